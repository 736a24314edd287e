package server

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/url"
	"testing"

	"github.com/annal-dev/annal/api"
	"github.com/annal-dev/annal/client"
	"github.com/annal-dev/annal/verifier"
)

func TestBundle_HumanExportsAndItVerifies(t *testing.T) {
	ts := newTestServer(t)
	ctx := context.Background()
	for range 5 {
		if _, err := ts.root.Submit(ctx, api.ActionRequest{Type: "mutate", Target: "workspace/a"}); err != nil {
			t.Fatal(err)
		}
	}
	last, err := ts.root.SubmitAndWait(ctx, api.ActionRequest{Type: "mutate", Target: "workspace/b"})
	if err != nil {
		t.Fatal(err)
	}
	p, err := verifier.ParsePolicy([]byte("log " + ts.k.VerifierKey() + "\nquorum none\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []url.Values{
		{},
		{"from": {"1"}, "to": {"4"}},
		{"actor": {"root"}, "since": {"2000-01-01T00:00:00Z"}, "old_size": {"2"}},
	} {
		body, err := ts.root.Bundle(ctx, q)
		if err != nil {
			t.Fatalf("%v: %v", q, err)
		}
		res, err := verifier.VerifyBundle(body, p, nil)
		body.Close()
		if err != nil {
			t.Fatalf("%v: %v", q, err)
		}
		if res.LastIndex > last.Index {
			t.Fatalf("%v: %+v", q, res)
		}
	}
}

func TestBundle_Refusals(t *testing.T) {
	ts := newTestServer(t)
	ctx := context.Background()
	agent, err := ts.root.CreateAgent(ctx, api.AgentRequest{Name: "a", Purpose: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ts.root.SubmitAndWait(ctx, api.ActionRequest{Type: "mutate", Target: "workspace/b"}); err != nil {
		t.Fatal(err)
	}
	ac, _ := client.New(ts.srv.URL, agent.Credential)
	anon, _ := client.New(ts.srv.URL, "")
	for _, c := range []struct {
		name   string
		c      *client.Client
		q      url.Values
		status int
	}{
		{"no credential", anon, nil, http.StatusUnauthorized},
		{"an agent", ac, nil, http.StatusForbidden},
		{"unknown parameter", ts.root, url.Values{"limit": {"3"}}, http.StatusBadRequest},
		{"repeated parameter", ts.root, url.Values{"from": {"1", "2"}}, http.StatusBadRequest},
		{"leading zero", ts.root, url.Values{"from": {"01"}}, http.StatusBadRequest},
		{"empty range", ts.root, url.Values{"from": {"2"}, "to": {"2"}}, http.StatusBadRequest},
		{"bad time", ts.root, url.Values{"since": {"yesterday"}}, http.StatusBadRequest},
		{"no such actor", ts.root, url.Values{"actor": {"nobody"}}, http.StatusNotFound},
	} {
		body, err := c.c.Bundle(ctx, c.q)
		if err == nil {
			raw, _ := io.ReadAll(body)
			body.Close()
			t.Errorf("%s: answered %q", c.name, bytes.SplitN(raw, []byte("\n"), 2)[0])
			continue
		}
		if !client.IsStatus(err, c.status) {
			t.Errorf("%s: %v, want status %d", c.name, err, c.status)
		}
	}
}
