package ledger

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/annal-dev/annal/kernel/event"
	"github.com/annal-dev/annal/kernel/policy"
)

func sealedAction(subject, payload string) event.Action {
	salt := make([]byte, event.SaltSize)
	return event.Action{Type: event.Create, Target: "workspace/crm/" + subject,
		Sealed: &event.SealedPayload{Subject: subject, Commitment: event.SealCommitment(salt, []byte(payload))}}
}

// TestFoldSealed: the fold refuses what a kernel that broke the sealing
// rules would write — a sealed action after its subject's erasure, a
// payload in the log of an actor or envelope that asks for sealing, an
// erasure by an agent or a second one — and accepts the rest.
func TestFoldSealed(t *testing.T) {
	b := newBuilder(t)
	l := fold(t, b.genesis(1_000_000),
		b.agent(RootID, "clerk", 10_000), b.trust(RootID, "clerk"),
		b.envelope(RootID, "env-1", "clerk", "", 10_000),
		b.actor(RootID, "sealer", event.Agent, 10_000, func(r *event.ActorRecord) { r.SealPayloads = true }), b.trust(RootID, "sealer"),
		b.envelope(RootID, "env-2", "sealer", "", 10_000),
		b.envelopeWith(RootID, "env-3", "clerk", "", 10_000, func(e *event.Envelope) { e.SealPayloads = true }),
	)
	cost := l.Energy.Costs.Quote(event.Create, 0)
	foldOn(t, l, b.act("clerk", "env-1", sealedAction("customer-1", `{"a":1}`), cost))

	// Payloads in the log where sealing is asked: by the actor, by the envelope.
	withPayload := event.Action{Type: event.Create, Target: "workspace/x", Payload: json.RawMessage(`{"email":"x@y.z"}`)}
	mustRefuse(t, l, b.act("sealer", "env-2", withPayload, cost), GateSeal, "asks that its payloads be sealed")
	mustRefuse(t, l, b.act("clerk", "env-3", withPayload, cost), GateSeal, "envelope env-3 asks that payloads be sealed")
	// No payload, or sealed: fine. An execute's payload is the rules'.
	foldOn(t, l, b.act("sealer", "env-2", event.Action{Type: event.Create, Target: "workspace/empty"}, cost),
		b.act("clerk", "env-3", sealedAction("customer-2", `{}`), cost))

	// Erasure: a human's, once; then nothing is sealed under the subject.
	mustRefuse(t, l, b.ev("clerk", event.KindSubjectErased, func(e *event.Event) { e.Erasure = &event.Erasure{Subject: "customer-1"} }), GateSeal, "not a human")
	foldOn(t, l, b.ev(RootID, event.KindSubjectErased, func(e *event.Event) { e.Erasure = &event.Erasure{Subject: "customer-1"} }))
	if e := l.Erased["customer-1"]; e == nil || e.Index != l.Size-1 {
		t.Fatalf("erased subjects %+v", l.Erased)
	}
	mustRefuse(t, l, b.ev(RootID, event.KindSubjectErased, func(e *event.Event) { e.Erasure = &event.Erasure{Subject: "customer-1"} }), GateSeal, "erased at entry")
	mustRefuse(t, l, b.act("clerk", "env-1", sealedAction("customer-1", `{"a":2}`), cost), GateSeal, "was erased at entry")
	foldOn(t, l, b.act("clerk", "env-1", sealedAction("customer-3", `{"a":3}`), cost))

	// The erased set survives the stored form.
	keys := map[string][]byte{}
	for _, k := range l.Keys() {
		if v, ok := l.Encode(k); ok {
			keys[k] = v
		}
	}
	if _, ok := keys["erased/customer-1"]; !ok {
		t.Fatalf("no stored key for the erased subject: %v", keys)
	}
	loaded, err := Load(keys)
	if err != nil {
		t.Fatal(err)
	}
	if !loaded.AnyMustSeal() || loaded.Erased["customer-1"] == nil {
		t.Fatal("the stored state lost the sealing actors and envelopes or the erasure")
	}
	if New().AnyMustSeal() {
		t.Fatal("an empty ledger asks for sealing")
	}
}

// TestFoldSealedUnderOlderRules: the kernel decides no sealing in a log
// under rules 4; a fold of such a log written by another release tolerates
// it and counts it, as it does every rule introduced after a log's own.
func TestFoldSealedUnderOlderRules(t *testing.T) {
	b := newBuilder(t)
	g := b.genesis(1_000_000)
	g.Log.Rules = RulesSigned
	l := fold(t, g, b.agent(RootID, "clerk", 10_000), b.trust(RootID, "clerk"), b.envelope(RootID, "env-1", "clerk", "", 10_000))
	ev := b.act("clerk", "env-1", sealedAction("customer-1", `{}`), l.Energy.Costs.Quote(event.Create, 0))
	if err := l.Check(ev, Options{}); err == nil || !strings.Contains(err.Error(), "no sealed payloads") {
		t.Fatalf("Check under rules 4: %v", err)
	}
	tolerated, err := l.FoldReport(l.Size, ev)
	if err != nil || len(tolerated) != 1 || tolerated[0].Gate != GateSeal || l.Legacy != 1 {
		t.Fatalf("fold under rules 4: tolerated %v, err %v, legacy %d", tolerated, err, l.Legacy)
	}
}

// TestPolicyOnSealedPayload: a policy's patterns judge a sealed payload's
// plaintext when the checker is given it, and are left unjudged (names
// still judged) when it is not.
func TestPolicyOnSealedPayload(t *testing.T) {
	c, err := policy.Compile(policy.Policy{Name: "no-secrets", BlockedPatterns: []string{"secret"}, BlockedActions: []string{"workspace/forbidden"}})
	if err != nil {
		t.Fatal(err)
	}
	if v := policy.Evaluate([]*policy.Compiled{c}, []string{"create"}, []byte(`{"x":"secret"}`)); v == nil {
		t.Fatal("pattern not judged on a known payload")
	}
	if v := policy.EvaluateNames([]*policy.Compiled{c}, []string{"create"}); v != nil {
		t.Fatalf("an unknown payload was judged: %v", v)
	}
	if v := policy.EvaluateNames([]*policy.Compiled{c}, []string{"workspace/forbidden"}); v == nil || !strings.Contains(v.Error(), "blocked") {
		t.Fatalf("names not judged without the payload: %v", v)
	}
}

// TestFoldOpenedJudgesPatterns: a reader that holds a sealed payload
// (FoldOpened with an opener) refuses an action whose plaintext a policy
// pattern blocks; one that does not hold it cannot judge the pattern.
func TestFoldOpenedJudgesPatterns(t *testing.T) {
	b := newBuilder(t)
	events := []*event.Event{b.genesis(1_000_000),
		b.agent(RootID, "clerk", 10_000), b.trust(RootID, "clerk"),
		b.envelope(RootID, "env-1", "clerk", "", 10_000),
		b.ev(RootID, event.KindPolicySet, func(e *event.Event) {
			e.Policy = &event.PolicyRecord{Policy: policy.Policy{Name: "no-ssn", BlockedPatterns: []string{`\d{3}-\d{2}-\d{4}`}}, Version: 1}
		}),
		b.ev(RootID, event.KindPolicyAttached, func(e *event.Event) {
			e.PolicyAttachment = &event.PolicyAttachment{Policy: "no-ssn", Agent: "clerk"}
		}),
	}
	const secret = `{"ssn":"123-45-6789"}`
	forged := sealedAction("patient-1", secret)
	open := func(sp *event.SealedPayload) (json.RawMessage, bool) {
		if sp.Commitment == forged.Sealed.Commitment {
			return json.RawMessage(secret), true
		}
		return nil, false
	}
	holder := fold(t, events...)
	ev := b.act("clerk", "env-1", forged, holder.Energy.Costs.Quote(event.Create, 0))
	if _, err := holder.FoldOpened(holder.Size, ev, open); err == nil || !strings.Contains(err.Error(), "no-ssn") {
		t.Fatalf("a reader holding the payload folded a blocked one: %v", err)
	}
	blind := fold(t, events...)
	if _, err := blind.FoldOpened(blind.Size, ev, nil); err != nil {
		t.Fatalf("a reader without the payload refused what it cannot judge: %v", err)
	}
}
