package ledger

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"

	"github.com/annal-dev/annal/kernel/event"
)

// Execute intents (RulesIntents). The paper's execute (§5.6) is recorded
// after it ran, so nothing can stop or hold it. Under RulesIntents an
// execute may instead be decided before it runs, in two entries:
//
//   - The intent: an execute action whose payload is
//     {"phase":"intent","input_oid":"sha256:…", …} (other members
//     describe what will run; none of §5.6's result fields). It passes
//     every gate of an action — a hold rule holds it until a human answers
//     — and costs what an execute with no output costs.
//   - The result: an execute action whose payload carries §5.6's fields
//     and "intent", the log index of the intent's action (of the approval,
//     for a held intent). Same actor, envelope, session, target and
//     input_oid as the intent; each intent is completed at most once. It
//     costs the output part of an execute's cost, and passes no gate the
//     intent passed: the command already ran under that decision, and a
//     revoke, freeze or kill since then does not unmake what it did.
//
// An intent with no result in the log is a call that was allowed and may
// have run, its outcome never recorded: the log shows it as open.
type Intent struct {
	Index    uint64 `json:"index"`
	Actor    string `json:"actor"`
	Envelope string `json:"envelope,omitempty"`
	Session  string `json:"session,omitempty"`
	Target   string `json:"target"`
	InputOID string `json:"input_oid"`
}

// PhaseIntent is the "phase" of an intent's payload.
const PhaseIntent = "intent"

// executePayload is what the rules read from an execute's payload.
type executePayload struct {
	intent      bool   // decided before it runs
	result      bool   // completes the intent at index `of`
	of          uint64 // with result
	inputOID    string
	outputBytes uint64
}

// parseExecute reads an execute payload under rules version `rules`: below
// RulesIntents every execute is a §5.6 record.
func parseExecute(payload json.RawMessage, rules int) (executePayload, error) {
	var p executePayload
	var m map[string]json.RawMessage
	if payload == nil {
		return p, fmt.Errorf("execute needs an inline payload with input_oid, output_oid, artifact_hash and exit_code (§5.6)")
	}
	if err := json.Unmarshal(payload, &m); err != nil || m == nil {
		return p, fmt.Errorf("execute payload must be a JSON object")
	}
	if rules >= RulesIntents {
		if raw, ok := m["phase"]; ok {
			return parseIntent(m, raw)
		}
		if raw, ok := m["intent"]; ok {
			var of float64
			if json.Unmarshal(raw, &of) != nil || of != math.Trunc(of) || of < 1 || of > 1<<53 {
				return p, fmt.Errorf("execute result: intent must be the log index of the intent's action")
			}
			p.result, p.of = true, uint64(of)
		}
	}
	n, err := recordFields(m)
	if err != nil {
		return p, err
	}
	p.outputBytes = n
	if p.result {
		_ = json.Unmarshal(m["input_oid"], &p.inputOID) // recordFields checked it
	}
	return p, nil
}

func parseIntent(m map[string]json.RawMessage, phase json.RawMessage) (executePayload, error) {
	p := executePayload{intent: true}
	var name string
	if json.Unmarshal(phase, &name) != nil || name != PhaseIntent {
		return p, fmt.Errorf("execute payload: phase must be %q (an intent, decided before it runs) or absent", PhaseIntent)
	}
	if raw, ok := m["input_oid"]; !ok || json.Unmarshal(raw, &p.inputOID) != nil || !event.ValidOID(p.inputOID) {
		return p, fmt.Errorf("execute intent: input_oid must be \"sha256:<64 lower-case hex>\"")
	}
	for _, f := range []string{"intent", "output_oid", "artifact_hash", "exit_code", "output_bytes"} {
		if _, ok := m[f]; ok {
			return p, fmt.Errorf("execute intent: %s belongs to the result, once the command ran", f)
		}
	}
	return p, nil
}

// cost is what an execute of this payload costs: an intent the base, a
// result the output part, a record both (Def. 4.17).
func (p executePayload) cost(c event.Costs) uint64 {
	switch {
	case p.intent:
		return c.Quote(event.Execute, 0)
	case p.result:
		return c.Quote(event.Execute, p.outputBytes) - c.Quote(event.Execute, 0)
	}
	return c.Quote(event.Execute, p.outputBytes)
}

// ActionCost is what an action of type t with payload costs under the
// ledger's rules; a malformed execute payload is quoted as if it had no
// output (the payload gate refuses it).
func (l *Ledger) ActionCost(t event.ActionType, payload json.RawMessage) uint64 {
	if t != event.Execute {
		return l.Energy.Costs.Quote(t, 0)
	}
	p, _ := parseExecute(payload, l.Rules)
	return p.cost(l.Energy.Costs)
}

// ResultOf reports whether a is an execute result under the ledger's rules,
// and returns the open intent it names (nil if there is none).
func (l *Ledger) ResultOf(a *event.Action) (*Intent, bool) {
	if a.Type != event.Execute || l.Rules < RulesIntents {
		return nil, false
	}
	p, _ := parseExecute(a.Payload, l.Rules)
	if !p.result {
		return nil, false
	}
	return l.Intents[intentKey(p.of)], true
}

func intentKey(index uint64) string { return strconv.FormatUint(index, 10) }

// ruleFor is the rule of ev: its kind's, except that an execute result is
// an action with a rule of its own.
func (l *Ledger) ruleFor(ev *event.Event) *rule {
	if ev.Kind == event.KindAction && ev.Hold == nil && ev.Action != nil {
		if _, ok := l.ResultOf(ev.Action); ok {
			return executeResultRule
		}
	}
	return rules[ev.Kind]
}

// execute result: completes an open intent with what ran.
var executeResultRule = &rule{
	claims: func(c *claimSet, ev *event.Event) {
		c.chain(ev.Action.Envelope)
		if p, err := parseExecute(ev.Action.Payload, RulesIntents); err == nil {
			c.write("intent/" + intentKey(p.of))
		}
	},
	// The call ran under its intent's decision: its actor need not be able
	// to act now for what it did to be recorded.
	byRecord:    true,
	actionFacts: true,
	gates: []gate{
		actorGate,
		newGate(GateIntent, checkResultIntent),
		newGate(GateEnergy, checkActionEnergy),
		newGate(GatePayload, checkPayload),
	},
	draw: func(l *Ledger, ev *event.Event) Draw {
		return actionDraw(ev, ev.Decision.Settled, l)
	},
	apply: func(l *Ledger, _ uint64, ev *event.Event) {
		a := l.Actors[ev.Actor]
		chain, _ := l.Chain(ev.Action.Envelope)
		l.settle(a, chain, ev.Decision.Settled, 0)
		p, _ := parseExecute(ev.Action.Payload, l.Rules)
		delete(l.Intents, intentKey(p.of))
		l.touch("intent/" + intentKey(p.of))
	},
}

// checkResultIntent: the result names an open intent of its actor, with
// the same envelope, session, target and input.
func checkResultIntent(c *checker) *Violation {
	p, err := parseExecute(c.ev.Action.Payload, c.l.Rules)
	if err != nil {
		return malformed("%v", err)
	}
	in, ok := c.l.Intents[intentKey(p.of)]
	a := c.ev.Action
	switch {
	case !ok:
		return inconsistent(NotFound, "entry %d is not an open execute intent: it is not one, or a result completed it", p.of)
	case in.Actor != c.ev.Actor:
		return inconsistent(Forbidden, "intent %d is %s's, not %s's", p.of, in.Actor, c.ev.Actor)
	case in.Envelope != a.Envelope || in.Session != c.ev.Session || in.Target != a.Target:
		return inconsistent(Invalid, "the result names envelope %q, session %q, target %q; intent %d was envelope %q, session %q, target %q",
			a.Envelope, c.ev.Session, a.Target, p.of, in.Envelope, in.Session, in.Target)
	case in.InputOID != p.inputOID:
		return inconsistent(Invalid, "the result's input_oid %s is not intent %d's %s", p.inputOID, p.of, in.InputOID)
	}
	return nil
}

// openIntent records an intent committed at index.
func (l *Ledger) openIntent(index uint64, ev *event.Event) {
	// Only a payload with a member "phase" can be an intent. Payloads are
	// canonical, so its name is written plainly if it is there: most
	// actions are not parsed a second time to find out.
	if !bytes.Contains(ev.Action.Payload, []byte(`"phase"`)) {
		return
	}
	p, err := parseExecute(ev.Action.Payload, l.Rules)
	if err != nil || !p.intent {
		return
	}
	key := intentKey(index)
	l.Intents[key] = &Intent{Index: index, Actor: ev.Actor, Envelope: ev.Action.Envelope, Session: ev.Session, Target: ev.Action.Target, InputOID: p.inputOID}
	l.touch("intent/" + key)
}
