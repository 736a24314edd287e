package server

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/annal-dev/annal/api"
	"github.com/annal-dev/annal/checkpoints"
	"github.com/annal-dev/annal/client"
	"github.com/annal-dev/annal/kernel"
	"github.com/annal-dev/annal/verifier"
)

// TestProofUnderWriteLoad: while many submitters write, GET /v1/proof/<i>
// answers 200 with a proof that verifies offline, or 409 for an entry the
// latest checkpoint does not cover yet; never a 5xx. And every checkpoint
// GET /checkpoint serves verifies. (An outside tester once saw a 500
// "checkpoint has no signature by log key" for about 0.6 s under load.)
func TestProofUnderWriteLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("load test")
	}
	cfg := kernel.DefaultConfig(t.TempDir())
	cfg.Logger = discardLogger()
	cfg.DisableProduction = true
	cfg.DisableRateLimit = true
	cfg.CheckpointInterval = 100 * time.Millisecond // Tessera's minimum: as many checkpoint rewrites as it allows
	k, err := kernel.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(New(k, cfg.Logger))
	t.Cleanup(func() { srv.Close(); k.Close() })
	raw, err := os.ReadFile(k.RootCredentialPath())
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	root, _ := client.New(srv.URL, strings.TrimSpace(string(raw)))
	ctx := context.Background()
	logKey, err := checkpoints.NewLogVerifier(k.VerifierKey())
	if err != nil {
		t.Fatal(err)
	}
	grants := []api.Grant{{Pattern: "workspace/**", Actions: []string{"*"}}}
	trust := 0.8
	agents := make([]*client.Client, 4)
	for i := range agents {
		na, err := root.CreateAgent(ctx, api.AgentRequest{Name: fmt.Sprint("w", i), Purpose: "load", Energy: 200_000, Grants: grants, Trust: &trust})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := root.IssueEnvelope(ctx, api.EnvelopeRequest{Holder: na.ID, Budget: 200_000, Grants: grants}); err != nil {
			t.Fatal(err)
		}
		agents[i], _ = client.New(srv.URL, na.Credential)
		agents[i] = agents[i].WithHTTPClient(hc)
	}

	const writers, readers = 32, 8
	var (
		top                     atomic.Uint64 // highest index written
		stop                    atomic.Bool
		wrote, proofs, cps, bad atomic.Int64
		mu                      sync.Mutex
		failures                []string
	)
	fail := func(format string, args ...any) {
		bad.Add(1)
		mu.Lock()
		defer mu.Unlock()
		if len(failures) < 10 {
			failures = append(failures, fmt.Sprintf(format, args...))
		}
	}
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			payload := []byte(`{"pad":"` + strings.Repeat("x", 1000) + `"}`)
			for !stop.Load() {
				rc, err := agents[w%len(agents)].Submit(ctx, api.ActionRequest{Type: "create", Target: fmt.Sprintf("workspace/%d", w), Payload: payload})
				if err != nil {
					fail("submit: %v", err)
					continue
				}
				wrote.Add(1)
				for m := top.Load(); rc.Index > m && !top.CompareAndSwap(m, rc.Index); m = top.Load() {
				}
			}
		})
	}
	get := func(path string) (int, []byte) {
		resp, err := hc.Get(srv.URL + path)
		if err != nil {
			fail("GET %s: %v", path, err)
			return 0, nil
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, body
	}
	for r := range readers {
		wg.Go(func() {
			for !stop.Load() {
				if r%2 == 1 {
					if status, body := get("/checkpoint"); status == http.StatusOK {
						cps.Add(1)
						if _, err := checkpoints.OpenCheckpoint(body, logKey); err != nil {
							fail("GET /checkpoint: %v: %q", err, body)
						}
					}
					continue
				}
				i := rand.Uint64N(top.Load() + 1)
				status, body := get(fmt.Sprintf("/v1/proof/%d", i))
				switch status {
				case http.StatusOK:
					proofs.Add(1)
					entry, err := k.Entry(ctx, i)
					if err != nil {
						fail("entry %d: %v", i, err)
					} else if _, err := verifier.VerifyProof(entry, body, k.VerifierKey()); err != nil {
						fail("proof of %d does not verify: %v", i, err)
					}
				case http.StatusConflict: // not covered by a checkpoint yet
				default:
					fail("GET /v1/proof/%d: %d %s", i, status, body)
				}
			}
		})
	}
	time.Sleep(3 * time.Second)
	stop.Store(true)
	wg.Wait()
	t.Logf("%d entries written, %d proofs and %d checkpoints read and verified", wrote.Load(), proofs.Load(), cps.Load())
	if bad.Load() > 0 {
		t.Fatalf("%d failures, among them:\n%s", bad.Load(), strings.Join(failures, "\n"))
	}
	if wrote.Load() == 0 || proofs.Load() == 0 || cps.Load() == 0 {
		t.Fatal("the load did not run")
	}
}
