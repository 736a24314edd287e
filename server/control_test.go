package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/annal-dev/annal/api"
	"github.com/annal-dev/annal/client"
)

// A walk through the execution control API with the thin client: every
// change answers with the receipt of its event, every refusal with the
// status, stage, gate and (for elevations) the spec's reason.
func TestControlAPI(t *testing.T) {
	ts := newTestServer(t)
	ctx := context.Background()
	root := ts.root
	wantStatus := func(err error, status int, gate string) *client.Error {
		t.Helper()
		var ce *client.Error
		if !errors.As(err, &ce) || ce.Status != status || (gate != "" && ce.Gate != gate) {
			t.Fatalf("error %v, want HTTP %d gate %q", err, status, gate)
		}
		return ce
	}
	trust := 0.8
	grants := []api.Grant{{Pattern: "workspace/**", Actions: []string{"mutate"}}, {Pattern: "sessions/**", Actions: []string{"mutate"}}}
	na, err := root.CreateAgent(ctx, api.AgentRequest{Name: "w", Purpose: "control api", Energy: 10_000, Grants: grants, Trust: &trust})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := root.IssueEnvelope(ctx, api.EnvelopeRequest{Holder: na.ID, Budget: 5000, Grants: grants}); err != nil {
		t.Fatal(err)
	}
	agent, _ := client.New(ts.srv.URL, na.Credential)

	// Rings and elevation.
	var rings []struct {
		Agent     string `json:"agent"`
		Effective int    `json:"effective_ring"`
	}
	raw, err := root.Rings(ctx)
	if err != nil || json.Unmarshal(raw, &rings) != nil || len(rings) != 1 || rings[0].Effective != 2 {
		t.Fatalf("rings %s %v", raw, err)
	}
	_, err = agent.Elevate(ctx, api.ElevationRequest{Agent: na.ID, Ring: 1, Reason: "please"})
	if ce := wantStatus(err, http.StatusForbidden, "ring"); ce.Reason != "insufficient_trust" {
		t.Fatalf("elevation refusal does not name its reason: %v", ce)
	}
	if _, err := root.AssignRing(ctx, na.ID, api.RingRequest{Trust: 0.9}); err != nil {
		t.Fatal(err)
	}
	el, err := root.Elevate(ctx, api.ElevationRequest{Agent: na.ID, Ring: 1, TTLSeconds: 60, Reason: "deploy"})
	if err != nil || el.Receipt.Index == 0 || !strings.Contains(string(el.Record), `"attested_by":"root"`) {
		t.Fatalf("elevation %+v %v", el, err)
	}
	_, err = root.Elevate(ctx, api.ElevationRequest{Agent: na.ID, Ring: 0, Reason: "root please"})
	wantStatus(err, http.StatusForbidden, "ring")

	// Sessions, deltas, rollback.
	s, err := root.CreateSession(ctx, api.SessionRequest{ID: "s1", Config: json.RawMessage(`{"isolation":"READ_COMMITTED","min_eff_score":0.5}`)})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(s.Record), `"min_eff_score_bp":5000`) {
		t.Fatalf("session record %s", s.Record)
	}
	_, err = root.CreateSession(ctx, api.SessionRequest{ID: "s2", Config: json.RawMessage(`{"max_participants":"10"}`)})
	wantStatus(err, http.StatusBadRequest, "")
	for _, c := range []struct {
		by  *client.Client
		req api.SessionChangeRequest
	}{{root, api.SessionChangeRequest{Op: "state", State: "HANDSHAKING"}}, {agent, api.SessionChangeRequest{Op: "join"}}, {root, api.SessionChangeRequest{Op: "state", State: "ACTIVE"}}} {
		if _, err := c.by.ChangeSession(ctx, "s1", c.req); err != nil {
			t.Fatalf("%+v: %v", c.req, err)
		}
	}
	hash := "sha256:" + strings.Repeat("ab", 32)
	if _, err := agent.AppendDelta(ctx, "s1", api.DeltaRequest{TurnID: "t1", Changes: []api.Change{{Path: "a.txt", Operation: "create", ContentHash: hash}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := agent.AppendDelta(ctx, "s1", api.DeltaRequest{TurnID: "t2", Changes: []api.Change{{Path: "a.txt", Operation: "delete"}}}); err != nil {
		t.Fatal(err)
	}
	_, err = agent.AppendDelta(ctx, "s1", api.DeltaRequest{TurnID: "t3", Changes: []api.Change{{Path: "a.txt", Operation: "delete"}}})
	wantStatus(err, http.StatusConflict, "")
	chain, err := agent.Deltas(ctx, "s1")
	if err != nil || strings.Count(string(chain), `"delta_hash"`) != 2 {
		t.Fatalf("chain %s %v", chain, err)
	}
	rb, err := agent.Rollback(ctx, "s1", "t1")
	if err != nil || !strings.Contains(string(rb), `"a.txt":"`+hash+`"`) {
		t.Fatalf("rollback %s %v", rb, err)
	}
	if _, err := agent.Submit(ctx, api.ActionRequest{Type: "mutate", Target: "sessions/s1/x", Session: "s1"}); err != nil {
		t.Fatal(err)
	}
	_, err = agent.Submit(ctx, api.ActionRequest{Type: "mutate", Target: "sessions/s10/x", Session: "s1"})
	wantStatus(err, http.StatusForbidden, "session")

	// Policies.
	if _, err := root.SetDefaultPolicy(ctx, "no_pii"); err != nil {
		t.Fatal(err)
	}
	_, err = root.SetPolicy(ctx, "mine", json.RawMessage(`{"name":"mine","blocked_actions":["x"],"unknown":1}`))
	wantStatus(err, http.StatusBadRequest, "")
	// The seed's no_pii ends the agent that breaks it (seed 002: a
	// violation → SIGKILL), so a second agent breaks it.
	va, err := root.CreateAgent(ctx, api.AgentRequest{Name: "v", Purpose: "breaks no_pii", Energy: 10_000, Grants: grants, Trust: &trust})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := root.IssueEnvelope(ctx, api.EnvelopeRequest{Holder: va.ID, Budget: 5000, Grants: grants}); err != nil {
		t.Fatal(err)
	}
	violator, _ := client.New(ts.srv.URL, va.Credential)
	if _, err := root.AttachPolicy(ctx, "no_pii", api.AttachRequest{Agent: va.ID}); err != nil {
		t.Fatal(err)
	}
	_, err = violator.Submit(ctx, api.ActionRequest{Type: "mutate", Target: "workspace/x", Payload: json.RawMessage(`{"ssn":"1"}`)})
	if ce := wantStatus(err, http.StatusForbidden, "policy"); ce.Signal != "SIGKILL" || ce.DenialIndex == nil {
		t.Fatalf("a violation of no_pii: signal %q, denial index %v; want SIGKILL and the denial's index", ce.Signal, ce.DenialIndex)
	}
	_, err = violator.Submit(ctx, api.ActionRequest{Type: "mutate", Target: "workspace/x"})
	wantStatus(err, http.StatusForbidden, "actor")

	// Quarantine, signals, sagas, kill.
	if _, err := root.Quarantine(ctx, na.ID, api.QuarantineRequest{Reason: "manual", DurationSeconds: 60}); err != nil {
		t.Fatal(err)
	}
	_, err = agent.Submit(ctx, api.ActionRequest{Type: "mutate", Target: "workspace/x"})
	wantStatus(err, http.StatusForbidden, "quarantine")
	if _, err := root.Release(ctx, na.ID, api.ReleaseRequest{}); err != nil {
		t.Fatal(err)
	}
	if _, err := agent.SetSignalMask(ctx, []string{"SIGINT"}); err != nil {
		t.Fatal(err)
	}
	sig, err := root.Signal(ctx, na.ID, api.SignalRequest{Signal: "SIGINT"})
	if err != nil || !strings.Contains(string(sig.Record), `"queue"`) {
		t.Fatalf("signal %+v %v", sig, err)
	}
	if q, err := agent.Signals(ctx); err != nil || !strings.Contains(string(q), "SIGINT") {
		t.Fatalf("queued %s %v", q, err)
	}
	sg, err := agent.StartSaga(ctx, api.SagaRequest{ID: "sg", Session: "s1", Steps: []api.Step{{ID: "one", Action: "a", Compensation: "b"}}})
	if err != nil || !strings.Contains(string(sg.Record), `"max_retries":2`) {
		t.Fatalf("saga %+v %v", sg, err)
	}
	if _, err := agent.ReportStep(ctx, "sg", "one", api.StepReport{Transition: "started"}); err != nil {
		t.Fatal(err)
	}
	_, err = agent.ReportStep(ctx, "sg", "one", api.StepReport{Transition: "compensated"})
	wantStatus(err, http.StatusConflict, "")
	_, err = agent.Kill(ctx, na.ID, api.KillRequest{Reason: "manual"})
	wantStatus(err, http.StatusForbidden, "")
	k, err := root.Kill(ctx, na.ID, api.KillRequest{Reason: "manual", Session: "s1"})
	if err != nil || !strings.Contains(string(k.Record), `"compensation_triggered":true`) {
		t.Fatalf("kill %+v %v", k, err)
	}
	_, err = agent.Submit(ctx, api.ActionRequest{Type: "mutate", Target: "workspace/x"})
	wantStatus(err, http.StatusForbidden, "actor")
}

// Every execution control body has a size limit.
func TestControlBodiesAreLimited(t *testing.T) {
	ts := newTestServer(t)
	big := strings.Repeat("x", 2*api.MaxControlBody)
	for _, p := range []struct{ method, path string }{
		{"POST", "/v1/agents/agent-x/ring"}, {"POST", "/v1/elevations"}, {"POST", "/v1/sessions"},
		{"POST", "/v1/sessions/s/deltas"}, {"POST", "/v1/agents/agent-x/kill"}, {"PUT", "/v1/policies/p"},
		{"POST", "/v1/sagas"}, {"PUT", "/v1/descriptors/d"}, {"PUT", "/v1/rings/config"},
	} {
		req, _ := http.NewRequest(p.method, ts.srv.URL+p.path, strings.NewReader(`{"reason":"`+big+`"}`))
		req.Header.Set("Authorization", "Bearer "+ts.rootCred)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Errorf("%s %s with a %d-byte body: %d", p.method, p.path, len(big), resp.StatusCode)
		}
	}
}
