package server

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/annal-dev/annal/api"
	"github.com/annal-dev/annal/kernel"
)

// TestAttack_ConcurrentShareCreations: "Root creates a human with
// "share": 1. That human sends 50 concurrent POST /v1/agents
// {"name":"aN","purpose":"x","share":1}. One is created; the second is
// decided on a state where the human still holds its share, is written, and
// the fold then refuses it": every later request got 503 and the folder
// could not be opened again. Now exactly one creation is answered 201, every
// other one 403 at the energy gate, the kernel stays ready, the log audits
// clean and the folder opens again.
func TestAttack_ConcurrentShareCreations(t *testing.T) {
	dir := t.TempDir()
	cfg := kernel.DefaultConfig(dir)
	cfg.Logger = discardLogger()
	cfg.CheckpointInterval = 100 * time.Millisecond
	cfg.DisableProduction = true
	k, err := kernel.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(New(k, cfg.Logger))
	closed := false
	defer func() {
		if !closed {
			srv.Close()
			k.Close()
		}
	}()
	raw, err := os.ReadFile(k.RootCredentialPath())
	if err != nil {
		t.Fatal(err)
	}
	ts := &testServer{k: k, srv: srv, rootCred: strings.TrimSpace(string(raw))}

	for round := range 5 {
		human := decode[api.Agent](t, ts.call(t, "POST", "/v1/agents", ts.rootCred,
			fmt.Sprintf(`{"kind":"human","name":"h%d","purpose":"p","share":1}`, round)).must(t, http.StatusCreated))
		const creators = 50
		replies := make([]reply, creators)
		errs := make([]error, creators)
		var wg sync.WaitGroup
		for i := range creators {
			wg.Add(1)
			go func() {
				defer wg.Done()
				replies[i], errs[i] = ts.try("POST", "/v1/agents", human.Credential, fmt.Sprintf(`{"name":"a%d","purpose":"x","share":1}`, i))
			}()
		}
		wg.Wait()
		created := 0
		for i, r := range replies {
			switch {
			case errs[i] != nil:
				t.Fatalf("round %d: %v", round, errs[i])
			case r.status == http.StatusCreated:
				created++
			case r.status == http.StatusForbidden && r.err.Gate == "energy":
			default:
				t.Fatalf("round %d: %v, want 201 once and 403 at the energy gate otherwise", round, r)
			}
		}
		if created != 1 {
			t.Fatalf("round %d: %d creations with the human's one share", round, created)
		}
		var ready api.Readiness
		if code := getJSON(t, srv.URL+"/v1/readyz", &ready); code != http.StatusOK || !ready.Ready {
			t.Fatalf("round %d: readyz %d %+v", round, code, ready)
		}
	}

	srv.Close()
	if err := k.Close(); err != nil {
		t.Fatal(err)
	}
	closed = true
	key, err := kernel.LocalVerifierKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := kernel.Audit(context.Background(), kernel.LocalLog(dir), key, kernel.WithUnsignedTail(dir))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Broken != nil {
		t.Fatalf("audit: %v", rep.Broken)
	}
	k, err = kernel.Open(cfg)
	if err != nil {
		t.Fatalf("the folder does not open again: %v", err)
	}
	if err := k.Close(); err != nil {
		t.Fatal(err)
	}
}
