package ledger

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
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

// storedKind is one kind of object the ledger stores, each under
// "<kind>/<id>": how to find one, list them and load one.
type storedKind struct {
	name string
	get  func(l *Ledger, id string) (any, bool)
	ids  func(l *Ledger) []string
	load func(l *Ledger, id string, raw []byte) error
}

// objectsIn is the stored kind whose objects are the ledger's map m. A
// loaded object is kept if keep (when given) says so; keep also indexes
// it.
func objectsIn[T any](name string, m func(*Ledger) map[string]*T, keep func(l *Ledger, id string, v *T) bool) storedKind {
	return storedKind{
		name: name,
		get: func(l *Ledger, id string) (any, bool) {
			v, ok := m(l)[id]
			return v, ok
		},
		ids: func(l *Ledger) []string { return mapKeys(m(l)) },
		load: func(l *Ledger, id string, raw []byte) error {
			v := new(T)
			if err := json.Unmarshal(raw, v); err != nil {
				return err
			}
			if keep == nil || keep(l, id, v) {
				m(l)[id] = v
			}
			return nil
		},
	}
}

// storedKinds are the kinds of stored objects; "meta" holds the rest.
var storedKinds = []storedKind{
	objectsIn("actor", func(l *Ledger) map[string]*Actor { return l.Actors }, func(l *Ledger, id string, a *Actor) bool {
		if a.ID != id {
			return false
		}
		l.addCredential(a)
		l.countSealer(a.SealPayloads)
		return true
	}),
	objectsIn("envelope", func(l *Ledger) map[string]*Envelope { return l.Envelopes }, func(l *Ledger, id string, e *Envelope) bool {
		if e.ID != id {
			return false
		}
		l.countSealer(e.SealPayloads)
		return true
	}),
	objectsIn("hold", func(l *Ledger) map[string]*Hold { return l.Holds }, func(_ *Ledger, id string, h *Hold) bool { return h.ID == id }),
	objectsIn("descriptor", func(l *Ledger) map[string]*Descriptor { return l.Descriptors }, nil),
	objectsIn("elevation", func(l *Ledger) map[string]*Elevation { return l.Elevations }, nil),
	objectsIn("session", func(l *Ledger) map[string]*Session { return l.Sessions }, nil),
	objectsIn("quarantine", func(l *Ledger) map[string]*Quarantine { return l.Quarantines }, nil),
	objectsIn("saga", func(l *Ledger) map[string]*Saga { return l.Sagas }, nil),
	objectsIn("policy", func(l *Ledger) map[string]*Policy { return l.Policies }, nil),
	objectsIn("intent", func(l *Ledger) map[string]*Intent { return l.Intents }, nil),
	objectsIn("nonce", func(l *Ledger) map[string]*Nonce { return l.Nonces }, nil),
	objectsIn("erased", func(l *Ledger) map[string]*Erased { return l.Erased }, nil),
	objectsIn("tolerated", func(l *Ledger) map[string]*Tolerated { return l.Tolerated }, nil),
}

// storedKindOf finds a stored kind by name.
var storedKindOf = func() map[string]*storedKind {
	m := make(map[string]*storedKind, len(storedKinds))
	for i := range storedKinds {
		m[storedKinds[i].name] = &storedKinds[i]
	}
	return m
}()

// Encode returns the stored form of one key of TakeDirty, or false if the
// key names nothing any more (a completed intent): the store deletes it.
func (l *Ledger) Encode(key string) ([]byte, bool) {
	var v any
	kind, id, _ := strings.Cut(key, "/")
	if kind == "meta" {
		v = meta{Origin: l.Origin, Rules: l.Rules, Legacy: l.Legacy, Energy: l.Energy, Size: l.Size, Denials: l.Denials, RingConfig: l.RingConfig, Kills: l.Kills}
	} else {
		k, ok := storedKindOf[kind]
		if !ok {
			return nil, false
		}
		if v, ok = k.get(l, id); !ok {
			return nil, false
		}
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
	for _, k := range storedKinds {
		for _, id := range k.ids(l) {
			keys = append(keys, k.name+"/"+id)
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
		if err := l.loadKey(key, raw); err != nil {
			return nil, fmt.Errorf("stored state %s: %w", key, err)
		}
	}
	if l.Size > 0 && l.Rules == 0 {
		return nil, ErrStaleState
	}
	l.reindex()
	return l, nil
}

// loadKey loads one stored key.
func (l *Ledger) loadKey(key string, raw []byte) error {
	kind, id, _ := strings.Cut(key, "/")
	if kind == "meta" {
		var m meta
		if err := json.Unmarshal(raw, &m); err != nil {
			return err
		}
		l.Origin, l.Rules, l.Legacy = m.Origin, m.Rules, m.Legacy
		l.Energy, l.Size, l.Denials, l.RingConfig, l.Kills = m.Energy, m.Size, m.Denials, m.RingConfig, m.Kills
		return nil
	}
	k, ok := storedKindOf[kind]
	if !ok {
		return errors.New("unknown key")
	}
	return k.load(l, id, raw)
}

// reindex rebuilds what the ledger keeps beside its stored objects, in the
// order the fold built it: each agent's envelopes and elevations, the
// pending holds per envelope, the compiled policies, the descriptors.
func (l *Ledger) reindex() {
	for _, a := range l.Actors {
		newActor(a)
	}
	for _, d := range l.Descriptors {
		newDescriptor(d)
	}
	for _, s := range l.Sessions {
		newSession(s)
	}
	envs := slices.Collect(maps.Values(l.Envelopes))
	slices.SortFunc(envs, func(a, b *Envelope) int { return cmp.Compare(a.IssuedAt, b.IssuedAt) })
	for _, e := range envs {
		l.byHolder[e.Holder] = append(l.byHolder[e.Holder], e.ID)
		l.keepDerived(e)
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
	l.descriptorIDs = slices.AppendSeq(l.descriptorIDs, maps.Keys(l.Descriptors))
	slices.Sort(l.descriptorIDs)
	elevs := slices.Collect(maps.Values(l.Elevations))
	slices.SortFunc(elevs, func(a, b *Elevation) int { return cmp.Compare(a.GrantedAt, b.GrantedAt) })
	for _, v := range elevs {
		l.elevationsOf[v.Agent] = append(l.elevationsOf[v.Agent], v.ID)
	}
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
