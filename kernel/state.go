package kernel

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/annal-dev/annal/kernel/event"
	"github.com/transparency-dev/tessera/api/layout"
	bolt "go.etcd.io/bbolt"
)

var (
	bucketMeta        = []byte("meta")
	bucketActors      = []byte("actors")
	bucketCredentials = []byte("credentials")
	keyFolded         = []byte("folded")
	keyOrigin         = []byte("origin")
)

// Actor is an actor as kernel state knows it.
type Actor struct {
	event.ActorRecord
	// CreatedAt is the index of the event that created the actor.
	CreatedAt uint64 `json:"created_at"`
}

// IsHuman reports whether the actor is a human.
func (a *Actor) IsHuman() bool { return a.Kind == event.Human }

// expired reports whether the actor's expiry has passed at now.
func (a *Actor) expired(now time.Time) bool {
	if a.Expires == "" {
		return false
	}
	t, err := time.Parse(time.RFC3339Nano, a.Expires)
	return err != nil || !now.Before(t)
}

// state is the materialised view of the log: bbolt on disk, maps in memory.
// Every change is a fold of a log event, and folding an event twice gives
// the same state as folding it once.
type state struct {
	db *bolt.DB

	// applyMu serialises folds; mu guards the maps, and is held only to
	// read them or to publish a fold's result, never across disk writes.
	applyMu      sync.Mutex
	mu           sync.RWMutex
	actors       map[string]*Actor
	byCredential map[string]string // credential hash -> actor id
	folded       uint64            // events [0, folded) are folded in
}

func openState(path, origin string) (*state, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		return nil, fmt.Errorf("open state %s: %w", path, err)
	}
	s := &state{db: db, actors: map[string]*Actor{}, byCredential: map[string]string{}}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketMeta, bucketActors, bucketCredentials} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		meta := tx.Bucket(bucketMeta)
		if have := meta.Get(keyOrigin); have == nil {
			if err := meta.Put(keyOrigin, []byte(origin)); err != nil {
				return err
			}
		} else if string(have) != origin {
			return fmt.Errorf("state file belongs to log %q, not %q", have, origin)
		}
		if v := meta.Get(keyFolded); v != nil {
			s.folded = binary.BigEndian.Uint64(v)
		}
		if err := tx.Bucket(bucketActors).ForEach(func(k, v []byte) error {
			var a Actor
			if err := json.Unmarshal(v, &a); err != nil {
				return fmt.Errorf("actor %s: %w", k, err)
			}
			s.actors[a.ID] = &a
			return nil
		}); err != nil {
			return err
		}
		return tx.Bucket(bucketCredentials).ForEach(func(k, v []byte) error {
			s.byCredential[string(k)] = string(v)
			return nil
		})
	})
	if err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

func (s *state) close() error { return s.db.Close() }

func (s *state) actor(id string) (*Actor, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	a, ok := s.actors[id]
	return a, ok
}

func (s *state) actorByCredential(hash string) (*Actor, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	id, ok := s.byCredential[hash]
	if !ok {
		return nil, false
	}
	a, ok := s.actors[id]
	return a, ok
}

func (s *state) foldedSize() uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.folded
}

// indexedEvent is an event and its position in the log.
type indexedEvent struct {
	index uint64
	ev    *event.Event
}

// apply folds events into state durably. If folded is larger than the
// current position, the position moves to it: the caller asserts that every
// event below it is among events or needs no folding.
func (s *state) apply(events []indexedEvent, folded uint64) error {
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	var newActors []*Actor
	created := map[string]*Actor{} // by this call, not yet in the maps
	err := s.db.Update(func(tx *bolt.Tx) error {
		for _, ie := range events {
			a, err := s.effect(ie, created)
			if err != nil {
				return err
			}
			if a == nil {
				continue
			}
			raw, err := json.Marshal(a)
			if err != nil {
				return err
			}
			if err := tx.Bucket(bucketActors).Put([]byte(a.ID), raw); err != nil {
				return err
			}
			if err := tx.Bucket(bucketCredentials).Put([]byte(a.CredentialSHA256), []byte(a.ID)); err != nil {
				return err
			}
			newActors = append(newActors, a)
			created[a.ID] = a
		}
		if folded > s.foldedSize() {
			var v [8]byte
			binary.BigEndian.PutUint64(v[:], folded)
			return tx.Bucket(bucketMeta).Put(keyFolded, v[:])
		}
		return nil
	})
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, a := range newActors {
		s.actors[a.ID] = a
		s.byCredential[a.CredentialSHA256] = a.ID
	}
	s.folded = max(s.folded, folded)
	return nil
}

// effect computes what folding one event changes. Only actor creation
// changes state so far. The caller holds applyMu.
func (s *state) effect(ie indexedEvent, created map[string]*Actor) (*Actor, error) {
	switch ie.ev.Kind {
	case event.KindGenesis, event.KindActorCreated:
		rec := *ie.ev.Subject
		have, ok := created[rec.ID]
		if !ok {
			have, ok = s.actor(rec.ID)
		}
		if ok {
			if have.CreatedAt != ie.index {
				return nil, fmt.Errorf("event %d creates actor %s, which event %d already created", ie.index, rec.ID, have.CreatedAt)
			}
			return nil, nil // folded already
		}
		return &Actor{ActorRecord: rec, CreatedAt: ie.index}, nil
	}
	return nil, nil
}

// foldTo folds the log's events [folded, size) into state, a bundle at a time.
func (s *state) foldTo(ctx context.Context, l *tileLog, size uint64) error {
	for from := s.foldedSize(); from < size; {
		bundleIndex := from / layout.EntryBundleWidth
		b, err := l.readBundle(ctx, bundleIndex, size)
		if err != nil {
			return err
		}
		end := min(size, (bundleIndex+1)*layout.EntryBundleWidth)
		var events []indexedEvent
		for i := from; i < end; i++ {
			entry := b.Entries[i%layout.EntryBundleWidth]
			ev, err := parseForFold(entry)
			if err != nil {
				return fmt.Errorf("log entry %d: %w", i, err)
			}
			if ev != nil {
				events = append(events, indexedEvent{index: i, ev: ev})
			}
		}
		if err := s.apply(events, end); err != nil {
			return err
		}
		from = end
	}
	return nil
}

// parseForFold returns the event if folding it changes state, or nil for an
// event that needs no folding. Actions change no state yet, so they are
// recognised with a light decode of their kind, which keeps folding cheap
// at thousands of actions a second; every other event is parsed strictly.
func parseForFold(entry []byte) (*event.Event, error) {
	var head struct {
		Kind event.Kind `json:"kind"`
	}
	if err := json.Unmarshal(entry, &head); err != nil {
		return nil, fmt.Errorf("not an event: %w", err)
	}
	if head.Kind == event.KindAction {
		return nil, nil
	}
	return event.Parse(entry)
}
