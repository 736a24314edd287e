package ledger

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/annal-dev/annal/kernel/event"
)

// meta is what the "meta" key holds.
type meta struct {
	Origin     string             `json:"origin,omitempty"`
	Rules      int                `json:"rules"`
	Legacy     uint64             `json:"legacy,omitempty"`
	Energy     event.EnergyConfig `json:"energy"`
	Size       uint64             `json:"size"`
	Denials    uint64             `json:"denials"`
	RingConfig event.RingConfig   `json:"ring_config"`
	Kills      uint64             `json:"kills"`
}

// controlObject returns the control object a stored key names.
func (l *Ledger) controlObject(kind, id string) (any, bool) {
	var v any
	var ok bool
	switch kind {
	case "descriptor":
		v, ok = l.Descriptors[id]
	case "elevation":
		v, ok = l.Elevations[id]
	case "session":
		v, ok = l.Sessions[id]
	case "quarantine":
		v, ok = l.Quarantines[id]
	case "saga":
		v, ok = l.Sagas[id]
	case "policy":
		v, ok = l.Policies[id]
	case "intent":
		v, ok = l.Intents[id]
	case "nonce":
		v, ok = l.Nonces[id]
	case "erased":
		v, ok = l.Erased[id]
	case "tolerated":
		v, ok = l.Tolerated[id]
	}
	return v, ok
}

func (l *Ledger) loadControl(kind, id string, raw []byte) (bool, error) {
	switch kind {
	case "descriptor":
		return true, loadInto(raw, id, l.Descriptors)
	case "elevation":
		return true, loadInto(raw, id, l.Elevations)
	case "session":
		return true, loadInto(raw, id, l.Sessions)
	case "quarantine":
		return true, loadInto(raw, id, l.Quarantines)
	case "saga":
		return true, loadInto(raw, id, l.Sagas)
	case "policy":
		return true, loadInto(raw, id, l.Policies)
	case "intent":
		return true, loadInto(raw, id, l.Intents)
	case "nonce":
		return true, loadInto(raw, id, l.Nonces)
	case "erased":
		return true, loadInto(raw, id, l.Erased)
	case "tolerated":
		return true, loadInto(raw, id, l.Tolerated)
	}
	return false, nil
}

func loadInto[T any](raw []byte, id string, m map[string]*T) error {
	v := new(T)
	if err := json.Unmarshal(raw, v); err != nil {
		return err
	}
	m[id] = v
	return nil
}

// Encode returns the stored form of one key of TakeDirty, or false if the
// key names nothing any more (a completed intent): the store deletes it.
func (l *Ledger) Encode(key string) ([]byte, bool) {
	var v any
	kind, id, _ := strings.Cut(key, "/")
	switch kind {
	case "meta":
		v = meta{Origin: l.Origin, Rules: l.Rules, Legacy: l.Legacy, Energy: l.Energy, Size: l.Size, Denials: l.Denials, RingConfig: l.RingConfig, Kills: l.Kills}
	case "actor":
		a, ok := l.Actors[id]
		if !ok {
			return nil, false
		}
		v = a
	case "envelope":
		e, ok := l.Envelopes[id]
		if !ok {
			return nil, false
		}
		v = e
	case "hold":
		h, ok := l.Holds[id]
		if !ok {
			return nil, false
		}
		v = h
	default:
		o, ok := l.controlObject(kind, id)
		if !ok {
			return nil, false
		}
		v = o
	}
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("ledger: encode %s: %v", key, err)) // plain structs always encode
	}
	return b, true
}

// Keys returns every key of the ledger, for writing it whole.
func (l *Ledger) Keys() []string {
	keys := []string{"meta"}
	for id := range l.Actors {
		keys = append(keys, "actor/"+id)
	}
	for id := range l.Envelopes {
		keys = append(keys, "envelope/"+id)
	}
	for id := range l.Holds {
		keys = append(keys, "hold/"+id)
	}
	for prefix, ids := range map[string][]string{
		"descriptor": mapKeys(l.Descriptors), "elevation": mapKeys(l.Elevations), "session": mapKeys(l.Sessions),
		"quarantine": mapKeys(l.Quarantines), "saga": mapKeys(l.Sagas), "policy": mapKeys(l.Policies),
		"intent": mapKeys(l.Intents), "nonce": mapKeys(l.Nonces),
		"erased": mapKeys(l.Erased), "tolerated": mapKeys(l.Tolerated),
	} {
		for _, id := range ids {
			keys = append(keys, prefix+"/"+id)
		}
	}
	return keys
}

// ErrStaleState is a stored ledger written by a release before rules
// versions: its form and meaning differ, so the log must be folded again.
var ErrStaleState = errors.New("the state was written by an older release")

// Load rebuilds a ledger from stored keys and values, as Encode wrote them.
func Load(stored map[string][]byte) (*Ledger, error) {
	l := New()
	for key, raw := range stored {
		kind, id, _ := strings.Cut(key, "/")
		var err error
		switch kind {
		case "meta":
			var m meta
			if err = json.Unmarshal(raw, &m); err == nil {
				l.Origin, l.Rules, l.Legacy = m.Origin, m.Rules, m.Legacy
				l.Energy, l.Size, l.Denials, l.RingConfig, l.Kills = m.Energy, m.Size, m.Denials, m.RingConfig, m.Kills
			}
		case "actor":
			var a Actor
			if err = json.Unmarshal(raw, &a); err == nil && a.ID == id {
				l.Actors[id] = &a
				l.addCredential(&a)
				l.countSealer(a.SealPayloads)
			}
		case "envelope":
			var e Envelope
			if err = json.Unmarshal(raw, &e); err == nil && e.ID == id {
				l.Envelopes[id] = &e
				l.countSealer(e.SealPayloads)
			}
		case "hold":
			var h Hold
			if err = json.Unmarshal(raw, &h); err == nil && h.ID == id {
				l.Holds[id] = &h
			}
		default:
			var known bool
			if known, err = l.loadControl(kind, id, raw); !known {
				err = fmt.Errorf("unknown key")
			}
		}
		if err != nil {
			return nil, fmt.Errorf("stored state %s: %w", key, err)
		}
	}
	if l.Size > 0 && l.Rules == 0 {
		return nil, ErrStaleState
	}
	var envs []*Envelope
	for _, e := range l.Envelopes {
		envs = append(envs, e)
	}
	slices.SortFunc(envs, func(a, b *Envelope) int { return cmp.Compare(a.IssuedAt, b.IssuedAt) })
	for _, e := range envs {
		l.byHolder[e.Holder] = append(l.byHolder[e.Holder], e.ID)
		l.keepChain(e)
	}
	for _, h := range l.Holds {
		if h.Status == HoldPending {
			l.pendingHolds[h.Envelope]++
		}
	}
	for id, p := range l.Policies {
		if p.Name == id {
			l.compile(p.Policy)
		}
	}
	for id := range l.Descriptors {
		l.descriptorIDs = append(l.descriptorIDs, id)
	}
	slices.Sort(l.descriptorIDs)
	var elevs []*Elevation
	for _, v := range l.Elevations {
		elevs = append(elevs, v)
	}
	slices.SortFunc(elevs, func(a, b *Elevation) int { return cmp.Compare(a.GrantedAt, b.GrantedAt) })
	for _, v := range elevs {
		l.elevationsOf[v.Agent] = append(l.elevationsOf[v.Agent], v.ID)
	}
	return l, nil
}

// Clone returns a ledger that folds as l does and shares nothing with it:
// Load of every key l stores. Nothing of it is marked changed.
func (l *Ledger) Clone() *Ledger {
	stored := make(map[string][]byte, len(l.Actors)+len(l.Envelopes)+len(l.Holds)+1)
	for _, key := range l.Keys() {
		if v, ok := l.Encode(key); ok {
			stored[key] = v
		}
	}
	c, err := Load(stored)
	if err != nil {
		// Encode wrote every value from the ledger's own structs.
		panic(fmt.Sprintf("ledger: clone: %v", err))
	}
	return c
}

// Snapshot is the whole ledger in one canonical byte string, to compare
// two ledgers.
func (l *Ledger) Snapshot() []byte {
	b, err := json.Marshal(l) // maps marshal with sorted keys
	if err != nil {
		panic(fmt.Sprintf("ledger: snapshot: %v", err))
	}
	return b
}

func mapKeys[T any](m map[string]*T) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	return keys
}
