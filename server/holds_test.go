package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/annal-dev/annal/api"
	"github.com/annal-dev/annal/client"
	"github.com/annal-dev/annal/kernel"
	"github.com/annal-dev/annal/kernel/event"
)

// rawJSON sends a request with cred and returns the status and the JSON
// object answered, whatever the client package knows of it.
func rawJSON(t *testing.T, ts *testServer, cred, method, path string, body any) (int, map[string]any) {
	t.Helper()
	var in io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		in = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, ts.srv.URL+path, in)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+cred)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]any{}
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("%s %s answered %d %q, not a JSON object", method, path, resp.StatusCode, raw)
	}
	return resp.StatusCode, out
}

// heldSetup is a kernel with one agent whose envelope seals its payloads
// and holds mutates of workspace/gated/*.
type heldSetup struct {
	ts       *testServer
	agent    *client.Client
	agentID  string
	envelope string
	clock    *atomic.Int64 // seconds the kernel's clock is ahead of time.Now
}

func newHeldSetup(t *testing.T, expires string) *heldSetup {
	t.Helper()
	ctx := context.Background()
	s := &heldSetup{clock: new(atomic.Int64)}
	s.ts = newTestServer(t, func(c *kernel.Config) {
		c.Now = func() time.Time { return time.Now().Add(time.Duration(s.clock.Load()) * time.Second) }
	})
	trust := 0.9
	grants := []api.Grant{{Pattern: "workspace/**", Actions: []string{"create", "mutate"}}}
	a, err := s.ts.root.CreateAgent(ctx, api.AgentRequest{Name: "mailer", Purpose: "sends mail", Energy: 10000, Trust: &trust, Grants: grants})
	if err != nil {
		t.Fatal(err)
	}
	v, err := s.ts.root.IssueEnvelope(ctx, api.EnvelopeRequest{Holder: a.ID, Budget: 10000, Grants: grants, SealPayloads: true, Expires: expires,
		HoldOn: []api.Grant{{Pattern: "workspace/gated/*", Actions: []string{"mutate"}}}})
	if err != nil {
		t.Fatal(err)
	}
	if s.agent, err = client.New(s.ts.srv.URL, a.Credential); err != nil {
		t.Fatal(err)
	}
	s.agentID, s.envelope = a.ID, v.ID
	return s
}

// hold submits a held action about subject and returns its receipt.
func (s *heldSetup) hold(t *testing.T, subject string) *api.Receipt {
	t.Helper()
	rc, err := s.agent.Submit(context.Background(), api.ActionRequest{Type: "mutate", Target: "workspace/gated/1",
		Payload: json.RawMessage(`{"to":"erin@example.org"}`), Subject: subject})
	if err != nil {
		t.Fatal(err)
	}
	if rc.Status != "held" {
		t.Fatalf("receipt %+v, want held", rc)
	}
	return rc
}

// TestHoldApprovalReasonIsLogged: the reason a human gives with an
// approval is in the approved action's event, covered by its leaf hash,
// and the answer, the hold and the history show it.
func TestHoldApprovalReasonIsLogged(t *testing.T) {
	s := newHeldSetup(t, "")
	held := s.hold(t, "customer-3")
	const reason = "checked the address with Erin by phone"
	status, rc := rawJSON(t, s.ts, s.ts.rootCred, "POST", "/v1/holds/"+held.HoldID+"/approve", api.HoldAnswer{Reason: reason})
	if status != http.StatusOK || rc["status"] != "committed" || rc["reason"] != reason {
		t.Fatalf("approve answered %d %v, want committed with the reason", status, rc)
	}
	index := uint64(rc["index"].(float64))
	ev := eventAt(t, s.ts.root, index)
	if ev.Kind != event.KindAction || ev.Hold == nil || ev.Hold.Decision != event.HoldApprove || ev.Hold.Reason != reason {
		t.Fatalf("the approved action is logged with hold %+v, want the approval's reason", ev.Hold)
	}
	if _, h := rawJSON(t, s.ts, s.ts.rootCred, "GET", "/v1/holds/"+held.HoldID, nil); h["status"] != "approved" || h["reason"] != reason {
		t.Fatalf("the hold shows %v", h)
	}
	if it := historyOf(t, s.ts.root, index); !strings.Contains(string(it.Event), `"reason":"`+reason+`"`) {
		t.Fatalf("the history shows %s", it.Event)
	}
	s.audited(t, index)
}

// audited checks that the log up to index verifies offline (a bundle, by
// the independent verifier) and folds again under the rules (the audit).
func (s *heldSetup) audited(t *testing.T, index uint64) {
	t.Helper()
	verifiedBundle(t, s.ts, index)
	src, err := kernel.RemoteLog(s.ts.srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	if report, err := kernel.Audit(context.Background(), src, s.ts.k.VerifierKey()); err != nil || report.Broken != nil || report.Folded != report.Size {
		t.Fatalf("audit: %+v, %v", report, err)
	}
}

// TestAttack_ApprovalRefusedOnRecheckAnswersTheRefusal: a human approves a
// held action that the pipeline refuses when it runs again (its subject
// erased, its agent frozen or quarantined, its envelope revoked or
// expired meanwhile). The log then holds only the hold's end, a refusal
// that costs the commitment; the approver's answer must say so — the
// refusal's class, gate and reason, and where it is logged — never
// "committed".
func TestAttack_ApprovalRefusedOnRecheckAnswersTheRefusal(t *testing.T) {
	ctx := context.Background()
	expires := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	cases := []struct {
		name   string
		meddle func(t *testing.T, s *heldSetup)
		status int
		gate   string
	}{
		{"subject erased", func(t *testing.T, s *heldSetup) {
			if _, err := s.ts.root.EraseSubject(ctx, "customer-3", api.EraseRequest{Reason: "art. 17 request"}); err != nil {
				t.Fatal(err)
			}
		}, http.StatusConflict, "seal"},
		{"agent frozen", func(t *testing.T, s *heldSetup) {
			if _, err := s.ts.root.SetStatus(ctx, s.agentID, "frozen", "review"); err != nil {
				t.Fatal(err)
			}
		}, http.StatusForbidden, "actor"},
		{"agent quarantined", func(t *testing.T, s *heldSetup) {
			if _, err := s.ts.root.Quarantine(ctx, s.agentID, api.QuarantineRequest{Reason: "manual", DurationSeconds: 600}); err != nil {
				t.Fatal(err)
			}
		}, http.StatusForbidden, "quarantine"},
		{"envelope revoked", func(t *testing.T, s *heldSetup) {
			if _, err := s.ts.root.RevokeEnvelope(ctx, s.envelope, "budget moved"); err != nil {
				t.Fatal(err)
			}
		}, http.StatusForbidden, "envelope"},
		{"envelope expired", func(t *testing.T, s *heldSetup) {
			s.clock.Store(2 * 3600)
		}, http.StatusForbidden, "envelope"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := newHeldSetup(t, expires)
			held := s.hold(t, "customer-3")
			c.meddle(t, s)
			const reason = "looks right"
			rc, err := s.ts.root.AnswerHold(ctx, held.HoldID, "approve", reason)
			var ce *client.Error
			if !errors.As(err, &ce) {
				t.Fatalf("approve answered %v %+v; the log holds a refusal", err, rc)
			}
			if ce.Status != c.status || ce.Gate != c.gate || ce.DenialIndex == nil {
				t.Fatalf("approve answered %d, gate %q, refusal at %v (%s); want %d naming gate %q and the refusal's index",
					ce.Status, ce.Gate, ce.DenialIndex, ce.Message, c.status, c.gate)
			}
			ev := eventAt(t, s.ts.root, *ce.DenialIndex)
			if ev.Kind != event.KindHoldAnswered || ev.Hold.ID != held.HoldID || ev.Hold.Decision != event.HoldApprove || ev.Hold.Settled == 0 {
				t.Fatalf("the refusal's index %d holds %s %+v", *ce.DenialIndex, ev.Kind, ev.Hold)
			}
			if !strings.Contains(ev.Hold.Reason, reason) || !strings.Contains(ev.Hold.Reason, "refused on re-check") ||
				!strings.Contains(ce.Message, "refused on re-check") {
				t.Fatalf("logged reason %q, answer %q: want the approver's reason and the refusal's", ev.Hold.Reason, ce.Message)
			}
			h, err := s.ts.root.Hold(ctx, held.HoldID)
			if err != nil || h.Status != "approve_failed" || h.AnsweredAt != *ce.DenialIndex {
				t.Fatalf("the hold: %+v %v", h, err)
			}
			page, err := s.ts.root.History(ctx, url.Values{"kind": {"action"}, "actor": {s.agentID}})
			if err != nil || len(page.Events) != 0 {
				t.Fatalf("the log holds an action of the agent: %+v %v", page, err)
			}
			s.audited(t, *ce.DenialIndex)
		})
	}
}
