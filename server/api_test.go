package server

import (
	"context"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"

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
