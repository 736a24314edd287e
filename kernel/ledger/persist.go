package ledger

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/annal-dev/annal/kernel/event"
)

// meta is what the "meta" key holds.
type meta struct {
	Energy  event.EnergyConfig `json:"energy"`
	Size    uint64             `json:"size"`
	Denials uint64             `json:"denials"`
}

// Encode returns the stored form of one key of TakeDirty, or false if the
// key names nothing (never, for keys TakeDirty returned).
func (l *Ledger) Encode(key string) ([]byte, bool) {
	var v any
	kind, id, _ := strings.Cut(key, "/")
	switch kind {
	case "meta":
		v = meta{Energy: l.Energy, Size: l.Size, Denials: l.Denials}
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
		return nil, false
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
	return keys
}

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
				l.Energy, l.Size, l.Denials = m.Energy, m.Size, m.Denials
			}
		case "actor":
			var a Actor
			if err = json.Unmarshal(raw, &a); err == nil && a.ID == id {
				l.Actors[id] = &a
				l.byCredential[a.CredentialSHA256] = id
			}
		case "envelope":
			var e Envelope
			if err = json.Unmarshal(raw, &e); err == nil && e.ID == id {
				l.Envelopes[id] = &e
			}
		case "hold":
			var h Hold
			if err = json.Unmarshal(raw, &h); err == nil && h.ID == id {
				l.Holds[id] = &h
			}
		default:
			err = fmt.Errorf("unknown key")
		}
		if err != nil {
			return nil, fmt.Errorf("stored state %s: %w", key, err)
		}
	}
	var envs []*Envelope
	for _, e := range l.Envelopes {
		envs = append(envs, e)
	}
	slices.SortFunc(envs, func(a, b *Envelope) int { return cmp.Compare(a.IssuedAt, b.IssuedAt) })
	for _, e := range envs {
		l.byHolder[e.Holder] = append(l.byHolder[e.Holder], e.ID)
	}
	return l, nil
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

// IsHuman reports whether the actor is a human.
func (a *Actor) IsHuman() bool { return a.Kind == event.Human }
