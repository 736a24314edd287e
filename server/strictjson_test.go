package server

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/annal-dev/annal/api"
)

// send makes one request with a raw body and returns the status and the
// error message of the answer.
func (ts *testServer) send(t *testing.T, method, path, cred, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, ts.srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+cred)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	buf.ReadFrom(resp.Body)
	var e api.Error
	_ = json.Unmarshal(buf.Bytes(), &e)
	return resp.StatusCode, e.Error
}

// strictFixture is a server with an agent that may act on workspace/** and
// holds an envelope for it.
func strictFixture(t *testing.T) (*testServer, string, string) {
	t.Helper()
	ts := newTestServer(t)
	ctx := context.Background()
	grants := []api.Grant{{Pattern: "workspace/**", Actions: []string{"*"}}}
	trust := 0.8 // ring 2, which mutate needs
	na, err := ts.root.CreateAgent(ctx, api.AgentRequest{Name: "w", Purpose: "strict json", Energy: 10_000, Grants: grants, Trust: &trust})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ts.root.IssueEnvelope(ctx, api.EnvelopeRequest{Holder: na.ID, Budget: 5000, Grants: grants}); err != nil {
		t.Fatal(err)
	}
	return ts, na.ID, na.Credential
}

// TestAttack_CaseVariantMember: encoding/json matched member names
// case-insensitively, so a second member in another case overrode the one a
// reviewer or a proxy read: {"target":"workspace/checked","Target":
// "workspace/logged"} committed workspace/logged, "TYPE":"mutate" beside
// "type":"observe" committed a mutate, and "Budget":100000 beside
// "budget":10 issued an envelope of 100000. Each is now a 400 that names the
// member, and the log does not grow.
func TestAttack_CaseVariantMember(t *testing.T) {
	ts, agent, cred := strictFixture(t)
	for _, tc := range []struct {
		name, method, path, cred, body, member string
	}{
		{"target/Target", "POST", "/v1/actions", cred, `{"type":"mutate","target":"workspace/checked","Target":"workspace/logged"}`, "Target"},
		{"Target/target", "POST", "/v1/actions", cred, `{"type":"mutate","Target":"workspace/logged","target":"workspace/checked"}`, "Target"},
		{"type/TYPE", "POST", "/v1/actions", cred, `{"type":"observe","TYPE":"mutate","target":"workspace/a"}`, "TYPE"},
		{"Type alone", "POST", "/v1/actions", cred, `{"Type":"observe","target":"workspace/a"}`, "Type"},
		{"escaped variant", "POST", "/v1/actions", cred, `{"type":"observe","target":"workspace/a","\u0054arget":"workspace/b"}`, "Target"},
		{"payload_Hash", "POST", "/v1/actions", cred, `{"type":"mutate","target":"workspace/a","payload_Hash":"sha256:0000000000000000000000000000000000000000000000000000000000000000"}`, "payload_Hash"},
		{"resources.Network", "POST", "/v1/actions", cred, `{"type":"observe","target":"workspace/a","resources":{"Network":["x"]}}`, "Network"},
		{"budget/Budget", "POST", "/v1/envelopes", ts.rootCred, `{"holder":"` + agent + `","budget":10,"Budget":100000,"grants":[{"pattern":"workspace/**","actions":["*"]}]}`, "Budget"},
		{"budget/budgeT", "POST", "/v1/envelopes", ts.rootCred, `{"holder":"` + agent + `","budget":10,"budgeT":100000,"grants":[{"pattern":"workspace/**","actions":["*"]}]}`, "budgeT"},
		{"grant Actions", "POST", "/v1/envelopes", ts.rootCred, `{"holder":"` + agent + `","budget":10,"grants":[{"pattern":"workspace/**","actions":["observe"],"Actions":["*"]}]}`, "Actions"},
		{"agent Energy", "POST", "/v1/agents", ts.rootCred, `{"name":"x","purpose":"y","energy":1,"Energy":1000000}`, "Energy"},
		{"hold answer Reason", "POST", "/v1/holds/h-1/approve", ts.rootCred, `{"Reason":"x"}`, "Reason"},
		{"session Config", "POST", "/v1/sessions", cred, `{"id":"s1","Config":{"max_participants":1000}}`, "Config"},
		{"saga step Compensation", "POST", "/v1/sagas", cred, `{"id":"sg","steps":[{"id":"a","action":"x","compensation":"y","Compensation":"z"}]}`, "Compensation"},
		{"status Status", "POST", "/v1/actors/" + agent + "/status", ts.rootCred, `{"status":"active","Status":"terminated"}`, "Status"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := ts.size(t)
			status, msg := ts.send(t, tc.method, tc.path, tc.cred, tc.body)
			if status != http.StatusBadRequest {
				t.Fatalf("status %d %q, want 400", status, msg)
			}
			if !strings.Contains(msg, `"`+tc.member+`"`) {
				t.Errorf("error %q does not name the member %q", msg, tc.member)
			}
			if after := ts.size(t); after != before {
				t.Fatalf("log grew from %d to %d on a refused request", before, after)
			}
		})
	}
	// The exact spelling is taken: the refusals above are about the names.
	if status, msg := ts.send(t, "POST", "/v1/actions", cred, `{"type":"mutate","target":"workspace/checked"}`); status != http.StatusOK {
		t.Fatalf("exact request: %d %q", status, msg)
	}
	envs, err := ts.root.Envelopes(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range envs {
		if v.Budget != 5000 {
			t.Errorf("envelope %s of budget %d was issued", v.ID, v.Budget)
		}
	}
}

// TestAttack_UnicodeFoldedMember: names that encoding/json folded onto a
// field with Unicode case folding, the long s ſ (U+017F) onto s and the
// Kelvin sign K (U+212A) onto k, are refused with a 400 and append nothing.
func TestAttack_UnicodeFoldedMember(t *testing.T) {
	ts, agent, cred := strictFixture(t)
	for _, tc := range []struct {
		name, method, path, cred, body, member string
	}{
		{"ſession", "POST", "/v1/actions", cred, `{"type":"observe","target":"workspace/a","ſession":"s1"}`, "ſession"},
		{"escaped ſ", "POST", "/v1/actions", cred, `{"type":"observe","target":"workspace/a","\u017fession":"s1"}`, "ſession"},
		{"typſ is not type", "POST", "/v1/actions", cred, `{"type":"observe","target":"workspace/a","targſt":"workspace/b"}`, "targſt"},
		{"Kelvin kind", "POST", "/v1/agents", ts.rootCred, "{\"name\":\"x\",\"purpose\":\"y\",\"\u212aind\":\"human\"}", "\u212aind"},
		{"ſ in an envelope's holder", "POST", "/v1/envelopes", ts.rootCred, `{"holder":"` + agent + `","budget":10,"grants":[],"hold_on":[],"\u017fession":"x"}`, "ſession"},
		{"Kelvin in a kill", "POST", "/v1/agents/" + agent + "/kill", ts.rootCred, "{\"reason\":\"x\",\"\u212a\":1}", "\u212a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := ts.size(t)
			status, msg := ts.send(t, tc.method, tc.path, tc.cred, tc.body)
			if status != http.StatusBadRequest {
				t.Fatalf("status %d %q, want 400", status, msg)
			}
			if !strings.Contains(msg, tc.member) {
				t.Errorf("error %q does not name the member %q", msg, tc.member)
			}
			if after := ts.size(t); after != before {
				t.Fatalf("log grew from %d to %d on a refused request", before, after)
			}
		})
	}
}

// TestAttack_HoldAnswerCaseVariant: the paper's form of a hold answer,
// mutate ledger/hold/<id> with {"decision", "reason"}, reads its payload
// exactly. With encoding/json, {"decision":"reject","Decision":"approve"},
// which a reviewer reads as a rejection, approved the held action.
func TestAttack_HoldAnswerCaseVariant(t *testing.T) {
	ts := newTestServer(t)
	ctx := context.Background()
	grants := []api.Grant{{Pattern: "workspace/**", Actions: []string{"*"}}}
	trust := 0.8
	na, err := ts.root.CreateAgent(ctx, api.AgentRequest{Name: "w", Purpose: "held", Energy: 10_000, Grants: grants, Trust: &trust})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ts.root.IssueEnvelope(ctx, api.EnvelopeRequest{Holder: na.ID, Budget: 5000, Grants: grants, HoldOn: grants}); err != nil {
		t.Fatal(err)
	}
	status, msg := ts.send(t, "POST", "/v1/actions", na.Credential, `{"type":"mutate","target":"workspace/gated"}`)
	if status != http.StatusAccepted {
		t.Fatalf("held action: %d %q", status, msg)
	}
	holds, err := ts.root.Holds(ctx, "pending")
	if err != nil || len(holds) != 1 {
		t.Fatalf("holds %+v %v", holds, err)
	}
	id := holds[0].ID
	for _, payload := range []string{
		`{"decision":"reject","Decision":"approve"}`,
		`{"Decision":"approve"}`,
		`{"decision":"reject","DECISION":"approve","reason":"no"}`,
		`{"decision":"approve","reaſon":"x"}`,
	} {
		before := ts.size(t)
		status, msg := ts.send(t, "POST", "/v1/actions", ts.rootCred, `{"type":"mutate","target":"ledger/hold/`+id+`","payload":`+payload+`}`)
		if status != http.StatusBadRequest || !strings.Contains(msg, "is not known") {
			t.Fatalf("answer %s: %d %q, want 400 naming the member", payload, status, msg)
		}
		if after := ts.size(t); after != before {
			t.Fatalf("answer %s: log grew from %d to %d", payload, before, after)
		}
	}
	if holds, err := ts.root.Holds(ctx, "pending"); err != nil || len(holds) != 1 || holds[0].ID != id {
		t.Fatalf("the hold is no longer pending: %+v %v", holds, err)
	}
	status, msg = ts.send(t, "POST", "/v1/actions", ts.rootCred, `{"type":"mutate","target":"ledger/hold/`+id+`","payload":{"decision":"reject","reason":"no"}}`)
	if status != http.StatusOK {
		t.Fatalf("exact answer: %d %q", status, msg)
	}
}
