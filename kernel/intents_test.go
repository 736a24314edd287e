package kernel

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/annal-dev/annal/kernel/event"
	"github.com/annal-dev/annal/kernel/internal/ledger"
)

func oidOf(c byte) string { return "sha256:" + strings.Repeat(string(c), 64) }

func intentPayload(input string) []byte {
	return []byte(`{"input_oid":"` + input + `","phase":"intent","tool":"build"}`)
}

func resultPayload(intent uint64, input string, outputBytes int) []byte {
	return fmt.Appendf(nil, `{"artifact_hash":"%s","exit_code":0,"input_oid":"%s","intent":%d,"output_bytes":%d,"output_oid":"%s"}`,
		oidOf('c'), input, intent, outputBytes, oidOf('b'))
}

// An execute decided before it runs: the intent costs the base, the result
// the output part, and completes the intent once.
func TestExecuteIntentThenResult(t *testing.T) {
	g := openGov(t)
	agent, _ := g.agent(1000, "tools/**:execute")
	g.envelope(g.root, EnvelopeRequest{Holder: agent.ID, Budget: 1000, Grants: grants("tools/**:execute")})
	ctx := context.Background()
	in, err := g.Submit(ctx, agent, ActionRequest{Type: event.Execute, Target: "tools/build", Payload: intentPayload(oidOf('a'))})
	if err != nil || in.Status != StatusCommitted || in.Cost != 25 {
		t.Fatalf("intent: %v %+v", err, in)
	}
	g.mu.Lock()
	open := g.ledger.Intents[fmt.Sprint(in.Index)]
	g.mu.Unlock()
	if open == nil || open.Actor != agent.ID || open.InputOID != oidOf('a') {
		t.Fatalf("open intent %+v", open)
	}
	// A result naming another input, or another target, is refused.
	for _, bad := range []ActionRequest{
		{Type: event.Execute, Target: "tools/build", Payload: resultPayload(in.Index, oidOf('d'), 0)},
		{Type: event.Execute, Target: "tools/other", Payload: resultPayload(in.Index, oidOf('a'), 0)},
		{Type: event.Execute, Target: "tools/build", Payload: resultPayload(in.Index-1, oidOf('a'), 0)},
	} {
		_, err := g.Submit(ctx, agent, bad)
		if d := denialOf(t, err); d.Gate != ledger.GateIntent {
			t.Fatalf("bad result %s: gate %s (%v)", bad.Payload, d.Gate, err)
		}
	}
	// Another agent cannot complete it, even with the same grants.
	other, _ := g.agent(1000, "tools/**:execute")
	g.envelope(g.root, EnvelopeRequest{Holder: other.ID, Budget: 1000, Grants: grants("tools/**:execute")})
	_, err = g.Submit(ctx, other, ActionRequest{Type: event.Execute, Target: "tools/build", Payload: resultPayload(in.Index, oidOf('a'), 0)})
	if d := denialOf(t, err); d.Gate != ledger.GateIntent {
		t.Fatalf("another agent's result: %v", err)
	}
	res, err := g.Submit(ctx, agent, ActionRequest{Type: event.Execute, Target: "tools/build", Payload: resultPayload(in.Index, oidOf('a'), 2560)})
	if err != nil || res.Status != StatusCommitted || res.Cost != 10 {
		t.Fatalf("result: %v %+v", err, res)
	}
	if b, _ := g.balance(agent.ID); b != 1000-25-10 {
		t.Fatalf("balance %d, want %d", b, 1000-35)
	}
	_, err = g.Submit(ctx, agent, ActionRequest{Type: event.Execute, Target: "tools/build", Payload: resultPayload(in.Index, oidOf('a'), 0)})
	if d := denialOf(t, err); d.Gate != ledger.GateIntent || !strings.Contains(d.Reason, "not an open execute intent") {
		t.Fatalf("second result: %v", err)
	}
	// An intent carries no result field; a phase other than intent is refused.
	for _, bad := range []string{
		`{"input_oid":"` + oidOf('a') + `","phase":"intent","exit_code":0}`,
		`{"input_oid":"` + oidOf('a') + `","phase":"done"}`,
		`{"phase":"intent"}`,
	} {
		_, err := g.Submit(ctx, agent, ActionRequest{Type: event.Execute, Target: "tools/build", Payload: []byte(bad)})
		if d := denialOf(t, err); d.Gate != ledger.GatePayload {
			t.Fatalf("payload %s: gate %s (%v)", bad, d.Gate, err)
		}
	}
}

// A held intent waits for a human; the result names the approval's index.
// A result is never held itself, and is recorded even when the agent was
// frozen after its intent was decided: the call already ran.
func TestExecuteIntentHeldAndResultAfterFreeze(t *testing.T) {
	g := openGov(t)
	agent, _ := g.agent(1000, "tools/**:execute")
	g.envelope(g.root, EnvelopeRequest{Holder: agent.ID, Budget: 1000, Grants: grants("tools/**:execute"), HoldOn: grants("tools/deploy:execute")})
	ctx := context.Background()
	r, err := g.Submit(ctx, agent, ActionRequest{Type: event.Execute, Target: "tools/deploy", Payload: intentPayload(oidOf('a'))})
	if err != nil || r.Status != StatusHeld {
		t.Fatalf("held intent: %v %+v", err, r)
	}
	// Before approval there is no intent to complete.
	_, err = g.Submit(ctx, agent, ActionRequest{Type: event.Execute, Target: "tools/deploy", Payload: resultPayload(r.Index, oidOf('a'), 0)})
	if d := denialOf(t, err); d.Gate != ledger.GateIntent {
		t.Fatalf("result of a hold request: %v", err)
	}
	ans, err := g.AnswerHold(ctx, g.root, r.HoldID, event.HoldApprove, "ok")
	if err != nil || g.kindAt(ans.Index) != event.KindAction {
		t.Fatalf("approve: %v %+v", err, ans)
	}
	if _, err := g.SetStatus(ctx, g.root, agent.ID, event.StatusFrozen, "review"); err != nil {
		t.Fatal(err)
	}
	res, err := g.Submit(ctx, agent, ActionRequest{Type: event.Execute, Target: "tools/deploy", Payload: resultPayload(ans.Index, oidOf('a'), 0)})
	if err != nil || res.Status != StatusCommitted || res.Cost != 0 || res.Envelope != ans.Envelope {
		t.Fatalf("result after freeze: %v %+v", err, res)
	}
	// A frozen agent cannot start another.
	_, err = g.Submit(ctx, agent, ActionRequest{Type: event.Execute, Target: "tools/build", Payload: intentPayload(oidOf('e'))})
	if d := denialOf(t, err); d.Gate != ledger.GateActor {
		t.Fatalf("intent of a frozen agent: %v", err)
	}
}

// Open intents survive a restart (state file), completed ones leave it, and
// the state matches a replay of the log.
func TestExecuteIntentsPersist(t *testing.T) {
	dir := t.TempDir()
	g := openGov(t, func(c *Config) { c.DataDir = dir })
	agent, cred := g.agent(1000, "tools/**:execute")
	g.envelope(g.root, EnvelopeRequest{Holder: agent.ID, Budget: 1000, Grants: grants("tools/**:execute")})
	ctx := context.Background()
	var idx []uint64
	for _, c := range []byte{'1', '2'} {
		in, err := g.Submit(ctx, agent, ActionRequest{Type: event.Execute, Target: "tools/build", Payload: intentPayload(oidOf(c))})
		if err != nil {
			t.Fatal(err)
		}
		idx = append(idx, in.Index)
	}
	if _, err := g.Submit(ctx, agent, ActionRequest{Type: event.Execute, Target: "tools/build", Payload: resultPayload(idx[0], oidOf('1'), 0)}); err != nil {
		t.Fatal(err)
	}
	if diff, err := g.stateMatchesReplay(ctx); err != nil || len(diff) > 0 {
		t.Fatalf("state differs from replay: %v %v", diff, err)
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	key, err := LocalVerifierKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Audit(ctx, LocalLog(dir), key)
	if err != nil || rep.Broken != nil || !slices.Equal(rep.OpenIntents, idx[1:]) {
		t.Fatalf("audit: %+v %v; want open intents %v", rep, err, idx[1:])
	}
	g2 := openGov(t, func(c *Config) { c.DataDir = dir })
	g2.mu.Lock()
	_, first := g2.ledger.Intents[fmt.Sprint(idx[0])]
	_, second := g2.ledger.Intents[fmt.Sprint(idx[1])]
	g2.mu.Unlock()
	if first || !second {
		t.Fatalf("after restart: completed intent present %v, open intent present %v", first, second)
	}
	agent2, err := g2.Authenticate(cred)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g2.Submit(ctx, agent2, ActionRequest{Type: event.Execute, Target: "tools/build", Payload: resultPayload(idx[1], oidOf('2'), 0)}); err != nil {
		t.Fatalf("result after restart: %v", err)
	}
}
