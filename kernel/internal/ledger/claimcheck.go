package ledger

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/annal-dev/annal/kernel/event"
)

// The claims check: claims are written by hand, rule by rule (claims.go),
// and a change an event makes that its claims do not name lets a second
// event be decided on a state the first has already changed. So in test
// binaries every fold compares what its apply changed — the whole ledger as
// Encode stores it, before and after — with what the event claims, and
// panics, naming the rule and the key, when a change is not covered:
//
//   - a changed object must be claimed exclusively under its claim key
//     (claimKeyOf): its own key for actors, envelopes, holds, sessions,
//     sagas, intents, nonces and erased subjects; the agent's for its
//     elevations and quarantines; ClaimRules for descriptors, policies and
//     the log's settings;
//   - a change of an actor's share or status must claim ClaimCensus too
//     (production divides energy among the active by share);
//   - energy is a sum, held while in flight (Draw, Pending): what an actor
//     may still spend, or an envelope still has, may fall by at most what
//     the event draws from it without an exclusive claim, and may always
//     grow; counters (consumed, denials, kills, the size) are sums too.
//
// Exempt are the genesis (nothing is in flight before it), the intent an
// action opens at its own index (no other event can name it), and the
// nonces a signed event forgets (no decision reads an expired nonce).
//
// The check is off in the kernel's binaries, and in test binaries that run
// benchmarks: it encodes the whole ledger twice a fold. So that a long
// test's folds do not grow with its ledger, a ledger of more than
// claimCheckKeys keys has only every n-th fold checked, n growing with it
// (the race tests' ledgers are checked whole; a long workload's are
// sampled). A ledger nobody persists (Untracked: the kernel's sequencing
// copy) is not checked: the kernel folds the same event onto the same
// state again, and that fold is. Nor are replays: the check is asked for
// per ledger (CheckClaims), by the kernel for the ledger it folds decided
// events into, and by the tests of rules for theirs.
var checkClaims = sync.OnceValue(func() bool {
	if !testing.Testing() {
		return false
	}
	bench := flag.Lookup("test.bench")
	return bench == nil || bench.Value.String() == ""
})

// claimCheckKeys is the size of ledger, in keys, whose every fold the
// claims check sees.
const claimCheckKeys = 256

// ClaimsChecked says whether folds are checked against their claims (in
// test binaries), for tests that must know the check ran.
func ClaimsChecked() bool { return checkClaims() }

// CheckClaims has every fold of l, from now on, check that its event
// claimed what its apply changed, when l lives in a test binary (above).
func (l *Ledger) CheckClaims() { l.claimsChecked = true }

// claimCheck is what the claims check takes before an apply.
type claimCheck struct {
	before map[string][]byte
	claims []Claim
	draw   Draw
}

// beginClaimCheck returns what the check needs of ev before its apply, or
// nil where it does not run.
func (l *Ledger) beginClaimCheck(index uint64, ev *event.Event) *claimCheck {
	if !l.claimsChecked || !checkClaims() || index == 0 || ev.Kind == event.KindGenesis || l.dirty == nil {
		return nil
	}
	keys := l.Keys()
	if every := uint64(len(keys)+claimCheckKeys-1) / claimCheckKeys; every > 1 && index%every != 0 {
		return nil
	}
	return &claimCheck{before: l.encodeKeys(keys), claims: l.Claims(ev), draw: l.Draw(ev)}
}

func (l *Ledger) encodeKeys(keys []string) map[string][]byte {
	m := make(map[string][]byte, len(keys))
	for _, k := range keys {
		if v, ok := l.Encode(k); ok {
			m[k] = v
		}
	}
	return m
}

// endClaimCheck panics if ev's apply changed what it did not claim.
func (l *Ledger) endClaimCheck(cc *claimCheck, index uint64, ev *event.Event) {
	if cc == nil {
		return
	}
	if err := cc.verify(l.encodeKeys(l.Keys()), index, ev); err != nil {
		claimViolation(fmt.Sprintf("ledger: claims check: entry %d (%s by %s): %v", index, ev.Kind, ev.Actor, err))
	}
}

// MissedClaim reports, in a test binary (ClaimsChecked), a decision the
// kernel's sequencer found to have been taken on a state an event in flight
// had changed: the claims of one of the two missed the other. Elsewhere it
// does nothing: the kernel decides again.
func MissedClaim(what string) {
	if checkClaims() {
		claimViolation("ledger: claims check: " + what)
	}
}

// claimViolation is what the claims check does with a change an event did
// not claim: it panics, so that no test can pass over it. A test of the
// check itself may collect them instead.
var claimViolation = func(msg string) { panic(msg) }

// verify compares the ledger after the apply with cc.before.
func (cc *claimCheck) verify(after map[string][]byte, index uint64, ev *event.Event) error {
	au := &claimAudit{cc: cc, exclusive: map[string]bool{}, claimed: map[string]bool{}}
	for _, c := range cc.claims {
		au.claimed[c.Key] = true
		au.exclusive[c.Key] = au.exclusive[c.Key] || c.Exclusive
	}
	for _, ch := range storedChanges(cc.before, after) {
		if err := au.change(ch, index); err != nil {
			return err
		}
	}
	if len(au.missing) > 0 {
		return fmt.Errorf("%s", strings.Join(au.missing, "; "))
	}
	return nil
}

// storedChange is one stored key an apply changed: its stored form before
// (had) and after (has).
type storedChange struct {
	key, kind, id string
	old, cur      []byte
	had, has      bool
}

// storedChanges lists the keys whose stored form differs between before
// and after, sorted.
func storedChanges(before, after map[string][]byte) []storedChange {
	keys := make([]string, 0, len(after)+len(before))
	for k := range before {
		keys = append(keys, k)
	}
	for k := range after {
		if _, ok := before[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var changes []storedChange
	for _, key := range keys {
		old, had := before[key]
		cur, has := after[key]
		if had && has && bytes.Equal(old, cur) {
			continue
		}
		kind, id, _ := strings.Cut(key, "/")
		changes = append(changes, storedChange{key: key, kind: kind, id: id, old: old, cur: cur, had: had, has: has})
	}
	return changes
}

// claimAudit collects the changes an event's claims do not cover.
type claimAudit struct {
	cc                 *claimCheck
	exclusive, claimed map[string]bool
	missing            []string
}

// need notes a change that key must be claimed exclusively for.
func (au *claimAudit) need(key, why string) {
	if !au.exclusive[key] {
		au.missing = append(au.missing, fmt.Sprintf("%s (%s) is not claimed exclusively", key, why))
	}
}

// change judges one changed key against the claims.
func (au *claimAudit) change(ch storedChange, index uint64) error {
	switch {
	case ch.kind == "intent" && !ch.had && ch.id == intentKey(index):
		return nil // opened by this action at its own index
	case ch.kind == "nonce" && !ch.has:
		return nil // forgotten: out of any request's reach
	case !ch.had || !ch.has:
		au.need(claimKeyOf(ch.kind, ch.id, ch.old, ch.cur), map[bool]string{true: "created", false: "removed"}[ch.has])
		return nil
	}
	fields, err := changedFields(ch.old, ch.cur)
	if err != nil {
		return fmt.Errorf("%s: %v", ch.key, err)
	}
	switch ch.kind {
	case "meta":
		au.metaChanged(fields)
	case "actor", "envelope":
		au.energyHolderChanged(ch, fields)
	default:
		au.need(claimKeyOf(ch.kind, ch.id, ch.old, ch.cur), strings.Join(fields, ", "))
	}
	return nil
}

// metaChanged: the log's settings are ClaimRules; its counters are sums.
func (au *claimAudit) metaChanged(fields []string) {
	for _, f := range fields {
		if !slices.Contains([]string{"size", "denials", "kills", "legacy"}, f) {
			au.need(ClaimRules, "the log's "+f)
		}
	}
}

// energyHolderChanged: an actor's or envelope's energy may fall by what
// the event draws from it; a change of anything else needs its own key,
// and of an actor's share or status the census too.
func (au *claimAudit) energyHolderChanged(ch storedChange, fields []string) {
	if fell := au.cc.spendableFell(ch.kind, ch.id, ch.old, ch.cur); fell != "" {
		au.need(ch.key, fell)
	}
	for _, f := range fields {
		switch f {
		case "balance", "reserved", "consumed":
			// energy: judged by spendableFell
		case "share", "status":
			if ch.kind == "actor" && !au.claimed[ClaimCensus] {
				au.missing = append(au.missing, fmt.Sprintf("%s's %s changed and %s is not claimed", ch.key, f, ClaimCensus))
			}
			au.need(ch.key, f)
		default:
			au.need(ch.key, f)
		}
	}
}

// spendableFell says how an actor's available energy, or an envelope's
// remaining budget, fell by more than the event draws from it ("" if it
// did not).
func (cc *claimCheck) spendableFell(kind, id string, old, cur []byte) string {
	var drawn uint64
	switch {
	case kind == "actor" && cc.draw.Actor == id:
		drawn = cc.draw.Amount
	case kind == "envelope" && slices.Contains(cc.draw.Envelopes, id):
		drawn = cc.draw.Amount
	}
	spendable := func(raw []byte) int64 {
		var v struct {
			Balance  int64 `json:"balance"`
			Budget   int64 `json:"budget"`
			Consumed int64 `json:"consumed"`
			Reserved int64 `json:"reserved"`
		}
		_ = json.Unmarshal(raw, &v)
		if kind == "actor" {
			return v.Balance - v.Reserved
		}
		return v.Budget - v.Consumed - v.Reserved
	}
	if fell := spendable(old) - spendable(cur); fell > int64(drawn) {
		return fmt.Sprintf("its spendable energy fell by %d, the event draws %d", fell, drawn)
	}
	return ""
}

// claimKeyOf is the claim that covers a change of the stored object
// kind/id (old and cur are its stored forms, either may be nil).
func claimKeyOf(kind, id string, old, cur []byte) string {
	switch kind {
	case "descriptor", "policy", "meta", "tolerated":
		return ClaimRules
	case "elevation", "quarantine":
		var v struct {
			Agent string `json:"agent"`
		}
		if json.Unmarshal(cur, &v) != nil || v.Agent == "" {
			_ = json.Unmarshal(old, &v)
		}
		return actorKey(v.Agent)
	}
	return kind + "/" + id
}

// changedFields lists the top-level members of two JSON objects that
// differ.
func changedFields(old, cur []byte) ([]string, error) {
	var a, b map[string]json.RawMessage
	if err := json.Unmarshal(old, &a); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(cur, &b); err != nil {
		return nil, err
	}
	var fields []string
	for k, v := range a {
		if w, ok := b[k]; !ok || !bytes.Equal(v, w) {
			fields = append(fields, k)
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			fields = append(fields, k)
		}
	}
	slices.Sort(fields)
	return fields, nil
}
