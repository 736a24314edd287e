package server

import (
	"context"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/annal-dev/annal/api"
	"github.com/annal-dev/annal/checkpoints"
	"github.com/annal-dev/annal/client"
)

func TestEventsAndProofsNotFound(t *testing.T) {
	ts := newTestServer(t)
	ctx := context.Background()
	if _, err := ts.root.Event(ctx, 99); !client.IsStatus(err, http.StatusNotFound) {
		t.Fatalf("event 99: %v, want 404", err)
	}
	if _, err := ts.root.Proof(ctx, 99); !client.IsStatus(err, http.StatusNotFound) {
		t.Fatalf("proof 99: %v, want 404", err)
	}
	for _, p := range []string{"/v1/events/01", "/v1/events/-1", "/v1/proof/x", "/v1/proof/consistency?old=2&new=1", "/v1/proof/consistency?old=1"} {
		resp, err := http.Get(ts.srv.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("GET %s = %d, want 400", p, resp.StatusCode)
		}
	}
}

func TestProofBeforeCheckpointIsConflict(t *testing.T) {
	ts := newTestServer(t)
	ctx := context.Background()
	r, err := ts.root.Submit(ctx, api.ActionRequest{Type: "observe", Target: "workspace"})
	if err != nil {
		t.Fatal(err)
	}
	// Either the checkpoint already covers it (200) or it does not yet (409);
	// WaitProof must end with a proof that names the entry.
	if _, err := ts.root.Proof(ctx, r.Index); err != nil && !client.IsStatus(err, http.StatusConflict) {
		t.Fatalf("proof right after submit: %v, want 200 or 409", err)
	}
	text, err := ts.root.WaitProof(ctx, r.Index)
	if err != nil {
		t.Fatal(err)
	}
	p, err := checkpoints.ParseTLogProof(text)
	if err != nil || p.Index != r.Index {
		t.Fatalf("proof %v %+v", err, p)
	}
}

func TestInfoReportsLog(t *testing.T) {
	ts := newTestServer(t)
	info, err := ts.root.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if info.Origin != ts.k.Origin() || info.VerifierKey != ts.k.VerifierKey() || info.Size != 1 {
		t.Fatalf("info %+v", info)
	}
	if _, err := checkpoints.NewLogVerifier(info.VerifierKey); err != nil {
		t.Fatal(err)
	}
}

func TestMetricsCountSubmissionsAndDenials(t *testing.T) {
	ts := newTestServer(t)
	ctx := context.Background()
	for i := 0; i < 3; i++ {
		if _, err := ts.root.Submit(ctx, api.ActionRequest{Type: "observe", Target: "workspace"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ts.root.Submit(ctx, api.ActionRequest{Type: "observe", Target: "a//b"}); err == nil {
		t.Fatal("bad target accepted")
	}
	anon, _ := client.New(ts.srv.URL, "")
	if _, err := anon.Submit(ctx, api.ActionRequest{Type: "observe", Target: "a"}); !client.IsStatus(err, http.StatusUnauthorized) {
		t.Fatalf("anonymous submit: %v", err)
	}
	resp, err := http.Get(ts.srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	text := string(raw)
	for metric, want := range map[string]float64{
		`annal_submissions_total{outcome="committed"}`:                      3,
		`annal_submissions_total{outcome="denied"}`:                         2,
		`annal_denials_total{class="invalid",stage="validate"}`:             1,
		`annal_denials_total{class="unauthenticated",stage="authenticate"}`: 1,
		`annal_submit_latency_seconds_count`:                                3,
		`annal_log_size`:                                                    4,
		`annal_sequencer_refusals_total`:                                    0,
	} {
		m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(metric) + ` (\S+)$`).FindStringSubmatch(text)
		if m == nil {
			t.Errorf("metric %s missing", metric)
			continue
		}
		if got, _ := strconv.ParseFloat(m[1], 64); got != want {
			t.Errorf("%s = %v, want %v", metric, got, want)
		}
	}
	if !strings.Contains(text, "annal_checkpoint_age_seconds ") {
		t.Error("checkpoint age missing")
	}
}

// metricValue reads one metric's value from annald's /metrics.
func metricValue(t *testing.T, ts *testServer, metric string) float64 {
	t.Helper()
	resp, err := http.Get(ts.srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(metric) + ` (\S+)$`).FindSubmatch(raw)
	if m == nil {
		t.Fatalf("metric %s missing", metric)
	}
	v, _ := strconv.ParseFloat(string(m[1]), 64)
	return v
}

// Proofs keep the top of every full level-0 tile from the first proof on,
// in the background; /metrics says how many are kept of how many, so that
// an operator (and annal-bench growth) can tell when a proof costs its
// steady price.
func TestMetricsSayWhenProofsKeepEveryTile(t *testing.T) {
	ts := newTestServer(t)
	ctx := context.Background()
	var last uint64
	for range 3 * 256 {
		rc, err := ts.root.Submit(ctx, api.ActionRequest{Type: "observe", Target: "workspace"})
		if err != nil {
			t.Fatal(err)
		}
		last = rc.Index
	}
	if _, err := ts.root.WaitProof(ctx, last); err != nil {
		t.Fatal(err)
	}
	keepable := metricValue(t, ts, "annal_proof_tiles_keepable")
	if keepable != 3 { // 769 entries: three full level-0 tiles
		t.Fatalf("annal_proof_tiles_keepable = %v, want 3", keepable)
	}
	for deadline := time.Now().Add(10 * time.Second); metricValue(t, ts, "annal_proof_tiles_kept") < keepable; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("proofs kept %v of %v tiles after 10 s", metricValue(t, ts, "annal_proof_tiles_kept"), keepable)
		}
	}
}
