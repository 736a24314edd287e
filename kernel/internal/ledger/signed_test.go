package ledger

import (
	"encoding/json"
	"testing"

	"github.com/annal-dev/annal/kernel/event"
)

// RequestMatches compares an event with the signed request it records,
// member by member and path by path: each case names what differs, or
// nothing when the event is what was asked.
func TestRequestMatchesComparesEveryMember(t *testing.T) {
	req := func(method, path, body string) []byte {
		r := event.SignedRequest{Method: method, Path: path}
		if body != "" {
			r.Body = json.RawMessage(body)
		}
		raw, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		return raw
	}
	sealed := &event.SealedPayload{Subject: "s", Commitment: "c"}
	action := func(edit func(a *event.Action, ev *event.Event)) *event.Event {
		ev := &event.Event{Kind: event.KindAction, Session: "sess", Action: &event.Action{Type: event.Mutate, Target: "workspace/x",
			Payload: json.RawMessage(`{"a":1}`), PayloadHash: "", Envelope: "env-a", Resources: &event.Resources{Tools: 2}}}
		if edit != nil {
			edit(ev.Action, ev)
		}
		return ev
	}
	const actionBody = `{"type":"mutate","target":"workspace/x","payload":{"a":1},"envelope":"env-a","session":"sess","resources":{"tools":2}}`
	for _, tc := range []struct {
		name string
		req  []byte
		ev   *event.Event
		want string
	}{
		{"not JSON", []byte(`{`), action(nil), "unexpected end of JSON input"},
		{"body not an object", req("POST", event.ActionsPath, `[1]`), action(nil), "request body: json: cannot unmarshal array into Go value of type struct { Type event.ActionType \"json:\\\"type\\\"\"; Target string \"json:\\\"target\\\"\"; Payload json.RawMessage \"json:\\\"payload\\\"\"; PayloadHash string \"json:\\\"payload_hash\\\"\"; Envelope string \"json:\\\"envelope\\\"\"; Session string \"json:\\\"session\\\"\"; Res *event.Resources \"json:\\\"resources\\\"\"; Status string \"json:\\\"status\\\"\"; Holder string \"json:\\\"holder\\\"\"; Budget uint64 \"json:\\\"budget\\\"\"; Key string \"json:\\\"key\\\"\"; Require bool \"json:\\\"require_signed\\\"\"; Sealed *event.SealedPayload \"json:\\\"sealed\\\"\" }"},
		{"not a POST", req("GET", event.ActionsPath, `{"type":"create"}`), action(nil), ""},
		{"action", req("POST", event.ActionsPath, actionBody), action(nil), ""},
		{"action, envelope not named", req("POST", event.ActionsPath, `{"type":"mutate","target":"workspace/x","payload":{"a":1},"session":"sess","resources":{"tools":2}}`), action(nil), ""},
		{"action, no action", req("POST", event.ActionsPath, actionBody), &event.Event{Kind: event.KindEnvelopeIssued}, "the request is an action, the event a envelope.issued"},
		{"action, type", req("POST", event.ActionsPath, actionBody), action(func(a *event.Action, _ *event.Event) { a.Type = event.Create }), "the request is mutate workspace/x, the event create workspace/x"},
		{"action, target", req("POST", event.ActionsPath, actionBody), action(func(a *event.Action, _ *event.Event) { a.Target = "workspace/y" }), "the request is mutate workspace/x, the event mutate workspace/y"},
		{"action, payload", req("POST", event.ActionsPath, actionBody), action(func(a *event.Action, _ *event.Event) { a.Payload = json.RawMessage(`{"a":2}`) }), "the payload differs"},
		{"action, payload hash", req("POST", event.ActionsPath, actionBody), action(func(a *event.Action, _ *event.Event) { a.PayloadHash = "sha256:00" }), "the payload hash differs"},
		{"action, sealed", req("POST", event.ActionsPath, actionBody), action(func(a *event.Action, _ *event.Event) { a.Sealed = sealed }), "the sealed payload differs"},
		{"action, session", req("POST", event.ActionsPath, actionBody), action(func(_ *event.Action, ev *event.Event) { ev.Session = "other" }), `the request is in session "sess", the event in "other"`},
		{"action, envelope", req("POST", event.ActionsPath, actionBody), action(func(a *event.Action, _ *event.Event) { a.Envelope = "env-b" }), "the request names envelope env-a, the event env-b"},
		{"action, resources", req("POST", event.ActionsPath, actionBody), action(func(a *event.Action, _ *event.Event) { a.Resources = nil }), "the declared resources differ"},
		{"hold answer by mutate", req("POST", event.ActionsPath, `{"type":"mutate","target":"ledger/hold/h1"}`), &event.Event{Hold: &event.Hold{ID: "h1"}}, ""},
		{"hold answer by mutate, other hold", req("POST", event.ActionsPath, `{"type":"mutate","target":"ledger/hold/h1"}`), &event.Event{Hold: &event.Hold{ID: "h2"}}, "the request answers hold h1"},
		{"hold answer by mutate, no hold", req("POST", event.ActionsPath, `{"type":"mutate","target":"ledger/hold/h1"}`), action(nil), "the request answers hold h1"},
		{"hold", req("POST", "/v1/holds/h1/approve", ""), &event.Event{Hold: &event.Hold{ID: "h1", Decision: "approve"}}, ""},
		{"hold, decision", req("POST", "/v1/holds/h1/approve", ""), &event.Event{Hold: &event.Hold{ID: "h1", Decision: "reject"}}, "the request answers hold h1 with approve"},
		{"hold, no hold", req("POST", "/v1/holds/h1/approve", ""), action(nil), "the request answers hold h1 with approve"},
		{"hold, no prefix", req("POST", "holds/h1/approve", ""), action(nil), "the request answers hold h1 with approve"},
		{"status", req("POST", "/v1/actors/a1/status", `{"status":"frozen"}`), &event.Event{Status: &event.StatusChange{Actor: "a1", Status: "frozen"}}, ""},
		{"status, other", req("POST", "/v1/actors/a1/status", `{"status":"frozen"}`), &event.Event{Status: &event.StatusChange{Actor: "a1", Status: "active"}}, "the request sets a1 frozen"},
		{"key", req("POST", "/v1/actors/a1/key", `{"key":"k","require_signed":true}`), &event.Event{KeyChange: &event.KeyChange{Actor: "a1", Key: "k", RequireSigned: true}}, ""},
		{"key, require", req("POST", "/v1/actors/a1/key", `{"key":"k","require_signed":true}`), &event.Event{KeyChange: &event.KeyChange{Actor: "a1", Key: "k"}}, "the request sets the signing key of a1"},
		{"kill", req("POST", "/v1/agents/a1/kill", `{}`), &event.Event{Kill: &event.Kill{Agent: "a1"}}, ""},
		{"kill, other", req("POST", "/v1/agents/a1/kill", `{}`), &event.Event{Kill: &event.Kill{Agent: "a2"}}, "the request kills a1"},
		{"quarantine", req("POST", "/v1/agents/a1/quarantine", `{}`), &event.Event{Quarantine: &event.Quarantine{Agent: "a1"}}, ""},
		{"quarantine, none", req("POST", "/v1/agents/a1/quarantine", `{}`), action(nil), "the request quarantines a1"},
		{"other agent path", req("POST", "/v1/agents/a1/signal", `{}`), action(nil), ""},
		{"envelope", req("POST", "/v1/envelopes", `{"holder":"a1","budget":9}`), &event.Event{Envelope: &event.Envelope{Holder: "a1", Budget: 9}}, ""},
		{"envelope, budget", req("POST", "/v1/envelopes", `{"holder":"a1","budget":9}`), &event.Event{Envelope: &event.Envelope{Holder: "a1", Budget: 8}}, "the request issues an envelope of 9 to a1"},
		{"envelope, no prefix", req("POST", "envelopes", `{"holder":"a1","budget":9}`), action(nil), ""},
		{"revoke", req("POST", "/v1/envelopes/e1/revoke", ""), &event.Event{EnvelopeEnd: &event.EnvelopeEnd{ID: "e1"}}, ""},
		{"revoke, other", req("POST", "/v1/envelopes/e1/revoke", ""), &event.Event{EnvelopeEnd: &event.EnvelopeEnd{ID: "e2"}}, "the request revokes envelope e1"},
		{"revoke, too long", req("POST", "/v1/envelopes/e1/revoke/x", ""), action(nil), ""},
		{"other path", req("POST", "/v1/sessions", `{}`), action(nil), ""},
	} {
		err := RequestMatches(tc.ev, tc.req)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}
}
