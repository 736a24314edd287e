package ledger

import (
	"fmt"
	"strconv"

	"github.com/annal-dev/annal/kernel/event"
)

// Tolerated entries: an earlier release could write an entry its own fold
// refuses, and a kernel that met one stopped for good. Root accepts such
// an entry (annald tolerate) with a log.tolerated entry that names it, the
// rule it breaks and why; the fold then passes over it, changing nothing
// but its size, and the entry stays in the log as evidence. Because the
// record comes after the entry, whoever folds the log looks ahead for it
// when an entry is refused (Tolerate is told it is there); a log.tolerated
// that names an entry the fold did not pass over is itself refused.

// Tolerated is an entry of the log that breaks a rule and that the fold
// passed over.
type Tolerated struct {
	Index    uint64     `json:"index"`
	Kind     event.Kind `json:"kind"`
	Actor    string     `json:"actor"`
	LeafHash string     `json:"leaf_hash"`
	Gate     string     `json:"gate"`
	Reason   string     `json:"reason"`
	// Record is the index of the log.tolerated entry that accepts it, 0
	// until that entry is folded; Why is its reason.
	Record uint64 `json:"record,omitempty"`
	Why    string `json:"why,omitempty"`
}

func toleratedKey(index uint64) string { return strconv.FormatUint(index, 10) }

// Tolerate passes over the entry ev at index, whose leaf hash is leafHash
// and which breaks a rule: the ledger changes nothing but its size, and
// keeps the entry as tolerated, awaiting the log.tolerated entry that names
// it, which the caller has found later in the log or is about to append.
// index MUST be l.Size. It returns the rule the entry breaks, and an error
// if it breaks none (it is folded, not tolerated) or is the genesis.
func (l *Ledger) Tolerate(index uint64, ev *event.Event, leafHash string) (*Violation, error) {
	switch {
	case index != l.Size:
		return nil, fmt.Errorf("the ledger expects entry %d next, not %d", l.Size, index)
	case index == 0 || ev.Kind == event.KindGenesis:
		return nil, fmt.Errorf("entry %d is the genesis: a log without one cannot be folded", index)
	}
	v, _ := l.check(ev, Options{}, l.Rules)
	if v == nil {
		return nil, fmt.Errorf("entry %d (%s by %s) breaks no rule: it is folded, not tolerated", index, ev.Kind, ev.Actor)
	}
	key := toleratedKey(index)
	l.Tolerated[key] = &Tolerated{Index: index, Kind: ev.Kind, Actor: ev.Actor, LeafHash: leafHash, Gate: v.Gate, Reason: v.Reason}
	l.touch("tolerated/" + key)
	l.Size++
	l.touch("meta")
	return v, nil
}

// ToleratedAt returns the entry at index that the fold passed over, if it
// did.
func (l *Ledger) ToleratedAt(index uint64) (*Tolerated, bool) {
	t, ok := l.Tolerated[toleratedKey(index)]
	return t, ok
}

// AwaitingRecord returns the entries passed over that no log.tolerated
// has named yet, by index: a log folded whole must have none.
func (l *Ledger) AwaitingRecord() []uint64 {
	var out []uint64
	for _, t := range l.Tolerated {
		if t.Record == 0 {
			out = append(out, t.Index)
		}
	}
	return out
}

// log.tolerated: root accepts entries that break a rule, which the fold
// passed over.
var toleratedRule = &rule{
	claims: func(c *claimSet, ev *event.Event) {
		c.write(ClaimRules, ClaimCensus)
	},
	gates: []gate{actorGate, newGate(GateAuthority, func(c *checker) *Violation {
		if c.ev.Actor != RootID {
			return inconsistent(Forbidden, "only root tolerates entries that break a rule")
		}
		for _, e := range c.ev.Toleration.Entries {
			t, ok := c.l.ToleratedAt(e.Index)
			switch {
			case !ok:
				return inconsistent(Conflict, "entry %d was not passed over: log.tolerated names only entries that break a rule", e.Index)
			case t.Record != 0:
				return inconsistent(Conflict, "entry %d was tolerated at entry %d already", e.Index, t.Record)
			case t.LeafHash != e.LeafHash:
				return inconsistent(Invalid, "entry %d has leaf hash %s, log.tolerated names %s", e.Index, t.LeafHash, e.LeafHash)
			case t.Gate != e.Gate:
				return inconsistent(Invalid, "entry %d breaks the %s rule, log.tolerated names the %s rule", e.Index, t.Gate, e.Gate)
			}
		}
		return nil
	})},
	apply: func(l *Ledger, index uint64, ev *event.Event) {
		for _, e := range ev.Toleration.Entries {
			key := toleratedKey(e.Index)
			t := l.Tolerated[key]
			t.Record, t.Why = index, ev.Toleration.Reason
			l.touch("tolerated/" + key)
		}
	},
}

// The rules of its kinds (rules.go).
func init() {
	rules[event.KindTolerated] = toleratedRule
}
