package server

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/annal-dev/annal/api"
	"github.com/annal-dev/annal/kernel"
	"github.com/annal-dev/annal/witness"
	"github.com/annal-dev/annal/witness/witnesstest"
)

// witnessedLog is a kernel whose checkpoints a real (in-process)
// annal-witness cosigns before they are published.
type witnessedLog struct {
	*testServer
	dataDir    string
	witnessURL string
	witnessKey string // cosignature/v1 verifier key
	policy     string
	witness    *witnesstest.Witness
}

// witnessKnows says what the witness is told of the log.
type witnessKnows int

const (
	knowsLog      witnessKnows = iota // its origin and key
	knowsNothing                      // nothing: it answers 404
	knowsOtherKey                     // its origin with another key: 403
)

func newWitnessedLog(t *testing.T, knows witnessKnows) *witnessedLog {
	t.Helper()
	dir := t.TempDir()
	// Open once to make the log's keys, which the witness must know.
	cfg := kernel.DefaultConfig(dir)
	cfg.Logger = discardLogger()
	k, err := kernel.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	origin, logKey := k.Origin(), k.VerifierKey()
	if err := k.Close(); err != nil {
		t.Fatal(err)
	}

	w := witnesstest.Start(t, "witness.test/w1", nil)
	store := w.Store
	switch knows {
	case knowsLog:
		err = store.AddLog(witness.LogConfig{Origin: origin, Keys: []string{logKey}})
	case knowsOtherKey:
		err = store.AddLog(witness.LogConfig{Origin: origin, Keys: []string{otherKeyFor(t, origin)}})
	}
	if err != nil {
		t.Fatal(err)
	}
	policy := fmt.Sprintf("log %s\nwitness w1 %s %s\nquorum w1\n", logKey, w.VerifierKey, w.Server.URL)
	ts := newTestServer(t, func(c *kernel.Config) {
		c.DataDir = dir
		c.WitnessPolicy = []byte(policy)
		c.WitnessTimeout = 5 * time.Second
	})
	return &witnessedLog{testServer: ts, dataDir: dir, witnessURL: w.Server.URL, witnessKey: w.VerifierKey, policy: policy, witness: w}
}

// forkAtWitness has the log show the witness a second tree of the size
// it last cosigned (witnesstest.OfferFork, with the log's own key).
func (wl *witnessedLog) forkAtWitness(t *testing.T) {
	t.Helper()
	cp, err := wl.k.LatestCheckpoint(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	skey, err := os.ReadFile(filepath.Join(wl.dataDir, "log.key"))
	if err != nil {
		t.Fatal(err)
	}
	wl.witness.OfferFork(t, string(skey), wl.k.Origin(), cp.Size)
}

// TestConsoleVerifiesWitnessQuorumAndShowsEquivocation: the page checks the
// witness cosignatures against the policy the person trusts (met with the
// real witness, failed with a policy that needs a witness that never
// cosigned), and the log health view shows the witness's last cosigned
// size and the evidence it holds once the log showed it two trees.
func TestConsoleVerifiesWitnessQuorumAndShowsEquivocation(t *testing.T) {
	chromiumPath(t)
	wl := newWitnessedLog(t, knowsLog)
	agentID, agentCred := wl.newAgent(t, agentSpec{name: "witnessed", trust: 0.8, energy: 1000, grants: workspace})
	wl.issue(t, wl.rootCred, api.EnvelopeRequest{Holder: agentID, Budget: 500, Grants: workspace})
	rc := decode[api.Receipt](t, wl.mutate(t, agentCred, "workspace/a.md", "").ok(t))
	// Wait until a cosigned checkpoint covers it.
	wl.call(t, "GET", fmt.Sprintf("/v1/proof/%d?wait=published", rc.Index), wl.rootCred, nil)
	deadline := time.Now().Add(20 * time.Second)
	for {
		cp, err := wl.k.LatestCheckpoint(context.Background())
		if err == nil && cp.Size > rc.Index {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no cosigned checkpoint covers %d", rc.Index)
		}
		time.Sleep(50 * time.Millisecond)
	}

	b := newBrowser(t, wl.srv.URL)
	b.signIn(wl.rootCred)
	b.trust(wl.k.VerifierKey(), wl.policy)
	verify := func() string {
		b.view("history")
		row := fmt.Sprintf(`tr.event[data-index="%d"]`, rc.Index)
		b.waitFor("the event", `document.querySelector('`+row+`')`)
		b.eval(`(() => { const r = document.querySelector('`+row+`'); if (r.getAttribute('aria-expanded') !== 'true') r.click(); return true; })()`, new(bool))
		detail := row + ` + tr.detail`
		b.waitFor("the verify button", `document.querySelector('`+detail+` button.verify')`)
		b.eval(`document.querySelector('`+detail+` .verify-result').className = 'verify-result'; true`, new(bool))
		b.eval(`document.querySelector('`+detail+` button.verify').click(); true`, new(bool))
		b.waitFor("verification", `document.querySelector('`+detail+` .verify-result.ok, `+detail+` .verify-result.bad')`)
		return b.text(detail + " .verify-result")
	}
	if got := verify(); !strings.HasPrefix(got, "Verified") || !strings.Contains(got, `Witness quorum "w1" met`) || !strings.Contains(got, "w1 at") {
		t.Fatalf("with the real witness's policy: %s", got)
	}
	b.screenshot("verified-witnessed")

	// A policy that also needs a witness that never cosigned this log.
	_, absent, err := note.GenerateKey(rand.Reader, "witness.test/absent")
	if err != nil {
		t.Fatal(err)
	}
	absentKey := cosignatureKey(t, absent)
	strict := strings.Replace(wl.policy, "quorum w1\n", fmt.Sprintf("witness w2 %s\ngroup both all w1 w2\nquorum both\n", absentKey), 1)
	b.trust(wl.k.VerifierKey(), strict)
	if got := verify(); !strings.Contains(got, "FAILED") || !strings.Contains(got, "not cosigned by the policy's quorum both") {
		t.Errorf("with a policy needing an absent witness: %s", got)
	}
	// A policy for another log's key is refused when saved.
	b.view("trust")
	b.eval(fmt.Sprintf(`document.getElementById('trust-policy').value = %q; true`, strings.Replace(wl.policy, "log "+wl.k.VerifierKey(), "log "+otherLogKey(t), 1)), new(bool))
	b.eval(`document.querySelector('#trust-form button[type=submit]').click(); true`, new(bool))
	b.waitFor("the refusal", `document.getElementById('trust-status').innerText.startsWith('Not saved')`)
	if got := b.text("#trust-status"); !strings.Contains(got, "another log key") {
		t.Errorf("saving a policy for another log: %s", got)
	}

	// The log shows the witness a second tree; the health view says so.
	wl.forkAtWitness(t)
	b.view("health")
	b.waitFor("the witness row", `document.querySelector('#health-witnesses tr')`)
	health := b.text("#view-health")
	if !strings.Contains(health, "w1") || !strings.Contains(health, "proof(s) that this log showed two histories") {
		t.Errorf("the health view after an equivocation:\n%s", health)
	}
	h := decode[api.LogHealth](t, wl.call(t, "GET", "/v1/health", wl.rootCred, nil).ok(t))
	if len(h.Witnesses) != 1 || h.Witnesses[0].LastCosignedSize <= rc.Index || len(h.Witnesses[0].Evidence) != 1 || h.Quorum != "w1" {
		t.Errorf("GET /v1/health: %+v", h)
	}
	b.screenshot("health-equivocation")
	b.noInjection()
}

// cosignatureKey turns an Ed25519 note verifier key into the
// cosignature/v1 form a witness policy names.
func cosignatureKey(t *testing.T, vkey string) string {
	t.Helper()
	name, rest, _ := strings.Cut(vkey, "+")
	_, key, _ := strings.Cut(rest, "+")
	raw, err := base64Std(key)
	if err != nil {
		t.Fatal(err)
	}
	raw[0] = 0x04
	h := sha256.Sum256(append([]byte(name+"\n"), raw...))
	return fmt.Sprintf("%s+%x+%s", name, h[:4], base64StdEncode(raw))
}

// otherKeyFor is a verifier key for origin that is not the log's.
func otherKeyFor(t *testing.T, origin string) string {
	t.Helper()
	_, vkey, err := note.GenerateKey(rand.Reader, origin)
	if err != nil {
		t.Fatal(err)
	}
	return vkey
}

func otherLogKey(t *testing.T) string {
	t.Helper()
	_, vkey, err := note.GenerateKey(rand.Reader, "other.example/log")
	if err != nil {
		t.Fatal(err)
	}
	return vkey
}

func base64Std(s string) ([]byte, error) { return base64.StdEncoding.DecodeString(s) }
func base64StdEncode(b []byte) string    { return base64.StdEncoding.EncodeToString(b) }

// TestWitnessRefusalIsLoud: a witness that does not know the log, or trusts
// another key for it, makes no wait hang in silence: within seconds the
// proof answers 502 naming the witness and the fix, a submit that waits
// for its proof returns with that error, and /v1/info and /v1/health carry
// it; without it, every checkpoint would just never come.
func TestWitnessRefusalIsLoud(t *testing.T) {
	for _, tc := range []struct {
		name  string
		knows witnessKnows
		want  string
	}{
		{"unknown log", knowsNothing, "does not know this log"},
		{"other key", knowsOtherKey, "trusts another key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wl := newWitnessedLog(t, tc.knows)
			agentID, agentCred := wl.newAgent(t, agentSpec{name: "w", trust: 0.8, energy: 1000, grants: workspace})
			wl.issue(t, wl.rootCred, api.EnvelopeRequest{Holder: agentID, Budget: 500, Grants: workspace})
			start := time.Now()
			r := wl.call(t, "POST", "/v1/actions?wait=published", agentCred, api.ActionRequest{Type: "mutate", Target: "workspace/a"}).ok(t)
			rc := decode[api.Receipt](t, r)
			if rc.Proof != "" || !strings.Contains(rc.ProofError, tc.want) || !strings.Contains(rc.ProofError, "no checkpoint covering it can be published") {
				t.Errorf("receipt of a waited submit: proof_error %q", rc.ProofError)
			}
			if took := time.Since(start); took > 15*time.Second {
				t.Errorf("the waited submit took %v: it should give up once the witness refused for a few seconds", took)
			}
			p := wl.call(t, "GET", fmt.Sprintf("/v1/proof/%d", rc.Index), "", nil)
			if p.status != http.StatusBadGateway || !strings.Contains(p.err.Error, tc.want) || !strings.Contains(p.err.Error, wl.witnessURL) {
				t.Errorf("GET proof: %v", p)
			}
			info := decode[api.Info](t, wl.call(t, "GET", "/v1/info", "", nil).ok(t))
			if len(info.WitnessProblems) != 1 || !strings.Contains(info.WitnessProblems[0], tc.want) {
				t.Errorf("info: %+v", info)
			}
			if tc.knows == knowsNothing && !strings.Contains(info.WitnessProblems[0], "annal-witness logs add --origin") {
				t.Errorf("the problem does not say how to fix it: %q", info.WitnessProblems[0])
			}
			h := decode[api.LogHealth](t, wl.call(t, "GET", "/v1/health", wl.rootCred, nil).ok(t))
			if len(h.WitnessProblems) != 1 {
				t.Errorf("health: %+v", h)
			}
		})
	}
}
