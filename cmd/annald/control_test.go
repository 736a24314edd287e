package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/annal-dev/annal/kernel/ring"
)

func TestParseRateLimits(t *testing.T) {
	limits, err := parseRateLimits([]string{"2=100/200", "3=1/2"})
	if err != nil {
		t.Fatal(err)
	}
	if l := limits[ring.Standard]; l.Rate != 100 || l.Burst != 200 {
		t.Fatalf("ring 2: %+v", l)
	}
	if l := limits[ring.Privileged]; l.Rate != 50 || l.Burst != 100 {
		t.Fatalf("ring 1 lost its default: %+v", l)
	}
	for _, bad := range []string{"2=100", "x=1/2", "4=1/2", "2=-1/2", "2=1/x", "2=NaN/1"} {
		if _, err := parseRateLimits([]string{bad}); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestKillWebhook(t *testing.T) {
	var got map[string]string
	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewDecoder(r.Body).Decode(&got)
	}))
	defer ok.Close()
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no", http.StatusInternalServerError)
	}))
	defer failing.Close()
	cb, err := killWebhook(ok.URL)
	if err != nil {
		t.Fatal(err)
	}
	if err := cb(context.Background(), "agent-1", "s", "manual"); err != nil {
		t.Fatal(err)
	}
	if got["agent"] != "agent-1" || got["reason"] != "manual" || got["session"] != "s" {
		t.Fatalf("webhook got %v", got)
	}
	cb, _ = killWebhook(failing.URL)
	if err := cb(context.Background(), "agent-1", "", "manual"); err == nil {
		t.Fatal("a 500 confirmed the kill")
	}
	for _, bad := range []string{"ftp://x", "not a url", "http://"} {
		if _, err := killWebhook(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
