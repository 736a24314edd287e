// Package sealstore keeps sealed payloads beside the log
// (kernel/event/sealed.go). On the embedded default they live in the data
// folder (disk.go):
//
//	sealed/keys/<subject>                 32 random bytes, 0600: the subject's key
//	sealed/payloads/<subject>/<hex>       nonce || AES-256-GCM(salt || payload)
//
// where <hex> is the commitment's hex and the commitment is the
// additional data, so a file cannot be passed off as another's. A log on
// shared storage keeps them where every kernel instance reaches them
// (shared.go, internal/sharedstore): the subject's key wrapped by the
// key-encryption key in the database, the same ciphertext in the bucket.
// A payload is durable (file and folder synced, or stored in the bucket)
// before the event that commits to it is decided, so a receipt never
// names a payload the kernel could lose; a payload whose event was refused
// or never written is an orphan that nothing names and costs only its
// bytes.
//
// Erasure destroys the key: its file is overwritten with zeros, synced and
// removed (or its row's key set to NULL, for every instance), and the
// subject's payloads are removed. Without the key the ciphertexts, and
// any copy of them (a backup of the data folder, an object version), are
// noise. What the storage keeps of the old key's bytes (a file system's
// journal, an SSD's spare blocks, a snapshot, the database's binary log
// or backups) is outside the kernel's reach: put the data folder on an
// encrypted volume, and keep the database's backups as private as
// shared.key.
package sealstore

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/annal-dev/annal/internal/sharedstore"
	"github.com/annal-dev/annal/kernel/event"
	"golang.org/x/sync/singleflight"
)

// Store is the sealed store of one data folder, or of a log's shared
// storage (OpenShared). Its methods are safe for concurrent use.
type Store struct {
	b backend
	// mu guards inflight, writing and erased. A seal counts its write
	// (writing) before it looks for or makes the subject's key, and a
	// destruction waits until no write is counted, so that a seal racing
	// an erasure cannot leave a fresh key behind it.
	mu sync.Mutex
	// making makes one subject's key at a time, outside mu: a subject's
	// key is made once, and a new subject's key (every delta's) does not
	// hold up the seals of other subjects for its fsyncs.
	making singleflight.Group
	// inflight are the payloads written for requests not decided yet, by
	// subject and name: a refused request removes the payload it wrote,
	// unless another request stored the same commitment meanwhile
	// (shared).
	inflight map[payloadID]*sealUse
	// writing counts, by subject, the payloads being written outside mu;
	// a destruction waits (written) until none is, so that it neither
	// removes a folder a write is renaming into nor leaves a payload
	// behind.
	writing map[string]int
	written *sync.Cond
	// erased are the subjects destroyed since the store opened: nothing
	// more is sealed under them, even by a request that looked at the
	// ledger before their erasure.
	erased map[string]bool
}

type sealUse struct{ shared bool }

// payloadID names a payload in its backend: its subject and the hex of
// its commitment.
type payloadID struct{ subject, name string }

// backend is where the keys and the payloads are kept: the data folder
// (disk.go) or the log's shared storage (shared.go).
type backend interface {
	// readKey is the subject's key; os.ErrNotExist when it has none or
	// it was erased.
	readKey(subject string) ([]byte, error)
	// createKey stores key as the subject's unless it has one, and
	// returns the key it holds; ErrErased when it was erased.
	createKey(subject string, key []byte) ([]byte, error)
	// destroyKey destroys the subject's key (idempotent).
	destroyKey(subject string) error
	hasKey(subject string) bool
	// putPayload stores sealed durably; getPayload is os.ErrNotExist
	// when there is none.
	putPayload(id payloadID, sealed []byte) error
	getPayload(id payloadID) ([]byte, error)
	// hasPayload is an error when it cannot tell: a seal that took a
	// stored payload for absent would remove it if refused.
	hasPayload(id payloadID) (bool, error)
	removePayload(id payloadID)
	// removePayloads removes every payload of subject, every copy.
	removePayloads(subject string) error
}

// ErrErased is the answer for a sealed payload whose subject was erased.
var ErrErased = errors.New("the payload's subject was erased: its key is destroyed")

// Open is the sealed store of the data folder at dataDir (its files are
// made on first use).
func Open(dataDir string) *Store { return newStore(newDiskBackend(dataDir)) }

func newStore(b backend) *Store {
	s := &Store{b: b, inflight: map[payloadID]*sealUse{}, writing: map[string]int{}, erased: map[string]bool{}}
	s.written = sync.NewCond(&s.mu)
	return s
}

func idOf(sp *event.SealedPayload) payloadID {
	return payloadID{subject: sp.Subject, name: strings.TrimPrefix(sp.Commitment, "sha256:")}
}

// key returns the subject's key, or ErrErased when it has none.
func (s *Store) key(subject string) ([]byte, error) {
	if !event.ValidSubject(subject) { // a subject is a file name: never a path
		return nil, fmt.Errorf("subject %q is not valid", subject)
	}
	k, err := s.b.readKey(subject)
	if errors.Is(err, os.ErrNotExist) {
		return nil, ErrErased
	}
	return k, err
}

// sealKey returns the subject's key, making it when there is none. Its
// caller has counted a write of subject (writing), so no destruction runs
// meanwhile. One caller at a time makes a subject's key (making); the
// others wait for it and take the key it made.
func (s *Store) sealKey(subject string) ([]byte, error) {
	if k, err := s.key(subject); !errors.Is(err, ErrErased) {
		return k, err
	}
	for {
		mine := false
		k, err, _ := s.making.Do(subject, func() (any, error) {
			mine = true
			return s.makeKey(subject)
		})
		if err == nil {
			return k.([]byte), nil
		}
		if mine {
			return nil, err
		}
		// Another caller's making failed: this one tries again.
	}
}

// makeKey makes subject's key, which this caller alone is making: unless
// a maker that finished since the caller looked made it already.
func (s *Store) makeKey(subject string) ([]byte, error) {
	if k, err := s.key(subject); !errors.Is(err, ErrErased) {
		return k, err
	}
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		return nil, err
	}
	return s.b.createKey(subject, k)
}

// Seal stores payload (canonical) under subject with salt, durably, and
// returns what the event carries, and whether this request wrote a new
// payload (then it must call release once decided). Looking for a stored
// payload and writing one happen outside mu (counted in writing, which an
// erasure waits for): sealed actions store their payloads in parallel,
// and a backend's round trips (the bucket's) do not queue behind each
// other.
func (s *Store) Seal(subject string, salt, payload []byte) (_ *event.SealedPayload, fresh bool, _ error) {
	sp := &event.SealedPayload{Subject: subject, Commitment: event.SealCommitment(salt, payload)}
	id := idOf(sp)
	s.mu.Lock()
	if s.erased[subject] {
		s.mu.Unlock()
		return nil, false, ErrErased
	}
	s.writing[subject]++
	s.mu.Unlock()
	key, err := s.sealKey(subject)
	if err != nil {
		s.doneWriting(subject)
		return sp, false, err
	}
	s.mu.Lock()
	u := s.inflight[id]
	if u != nil {
		u.shared = true // written again below, so durable before this one's receipt
	} else {
		u, fresh = &sealUse{}, true
		s.inflight[id] = u
	}
	s.mu.Unlock()
	stored := false
	if fresh {
		stored, err = s.b.hasPayload(id)
	}
	if err != nil || stored {
		// Stored already by a decided request (the same payload under
		// the same salt), or perhaps stored: this request neither writes
		// it nor may remove it.
		s.mu.Lock()
		if s.inflight[id] == u {
			delete(s.inflight, id)
		}
		s.mu.Unlock()
		s.doneWriting(subject)
		if err != nil {
			return nil, false, fmt.Errorf("look for a stored sealed payload: %w", err)
		}
		return sp, false, nil
	}
	err = s.write(id, key, sp.Commitment, salt, payload)
	s.doneWriting(subject)
	if err != nil {
		s.Release(sp, fresh, false)
		return nil, false, err
	}
	return sp, fresh, nil
}

// doneWriting ends one of subject's writes, waking an erasure that waits.
func (s *Store) doneWriting(subject string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.writing[subject]--; s.writing[subject] == 0 {
		delete(s.writing, subject)
		s.written.Broadcast()
	}
}

// encrypt is nonce || AES-256-GCM(salt || payload) under key, with the
// commitment as additional data.
func encrypt(key []byte, commitment string, plain []byte) ([]byte, error) {
	aead, err := sharedstore.GCM(key)
	if err != nil {
		return nil, err
	}
	nonce := make([]byte, aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	return aead.Seal(nonce, nonce, plain, []byte(commitment)), nil
}

func (s *Store) write(id payloadID, key []byte, commitment string, salt, payload []byte) error {
	sealed, err := encrypt(key, commitment, append(append([]byte{}, salt...), payload...))
	if err != nil {
		return err
	}
	if err := s.b.putPayload(id, sealed); err != nil {
		return fmt.Errorf("store a sealed payload: %w", err)
	}
	return nil
}

// Release ends a fresh seal's request: kept, its payload stays; refused,
// it goes unless another request stored the same commitment meanwhile.
func (s *Store) Release(sp *event.SealedPayload, fresh, keep bool) {
	if !fresh {
		return
	}
	id := idOf(sp)
	s.mu.Lock()
	defer s.mu.Unlock()
	u := s.inflight[id]
	delete(s.inflight, id)
	if !keep && u != nil && !u.shared {
		s.b.removePayload(id)
	}
}

// Open returns the salt and payload a commitment was made to, ErrErased
// once the subject's key is gone, or an error naming what is wrong.
func (s *Store) Open(sp *event.SealedPayload) (salt, payload []byte, err error) {
	key, err := s.key(sp.Subject)
	if err != nil {
		return nil, nil, err
	}
	sealed, err := s.b.getPayload(idOf(sp))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, fmt.Errorf("sealed payload %s of subject %s is missing from the sealed store", sp.Commitment, sp.Subject)
	} else if err != nil {
		return nil, nil, err
	}
	plain, err := decrypt(key, sp.Commitment, sealed)
	if err != nil || len(plain) < event.SaltSize || !sp.Opens(plain[:event.SaltSize], plain[event.SaltSize:]) {
		return nil, nil, fmt.Errorf("sealed payload %s is damaged: it does not open its commitment", sp.Commitment)
	}
	return plain[:event.SaltSize], plain[event.SaltSize:], nil
}

func decrypt(key []byte, commitment string, sealed []byte) ([]byte, error) {
	aead, err := sharedstore.GCM(key)
	if err != nil {
		return nil, err
	}
	if len(sealed) < aead.NonceSize() {
		return nil, errors.New("too short")
	}
	return aead.Open(nil, sealed[:aead.NonceSize()], sealed[aead.NonceSize():], []byte(commitment))
}

// OpenPayload is ledger.Options.Open: the plaintext, or false.
func (s *Store) OpenPayload(sp *event.SealedPayload) (json.RawMessage, bool) {
	_, payload, err := s.Open(sp)
	return payload, err == nil
}

// Destroy erases subject: its key is destroyed, then its payloads are
// removed. It is idempotent, so that the start after a crash between an
// erasure's event and its destruction finishes it.
func (s *Store) Destroy(subject string) error {
	if !event.ValidSubject(subject) {
		return fmt.Errorf("subject %q is not valid", subject)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.erased[subject] = true
	for s.writing[subject] > 0 {
		s.written.Wait()
	}
	if err := s.b.destroyKey(subject); err != nil {
		return err
	}
	return s.b.removePayloads(subject)
}

// Holds reports whether a key of subject is present.
func (s *Store) Holds(subject string) bool { return s.b.hasKey(subject) }

// NewSalt returns a fresh salt for a payload the kernel seals itself.
func NewSalt() ([]byte, error) {
	salt := make([]byte, event.SaltSize)
	_, err := rand.Read(salt)
	return salt, err
}

// SealedOf returns the sealed payload an entry's action commits to, or a
// delta's sealed changes (kernel/delta/retention.go), or nil.
func SealedOf(entry []byte) *event.SealedPayload {
	if !bytes.Contains(entry, []byte(`"sealed":{`)) {
		return nil
	}
	var e struct {
		Action *struct {
			Sealed *event.SealedPayload `json:"sealed"`
		} `json:"action"`
		Delta *struct {
			Sealed *event.SealedPayload `json:"sealed"`
		} `json:"delta"`
	}
	switch {
	case json.Unmarshal(entry, &e) != nil:
		return nil
	case e.Action != nil:
		return e.Action.Sealed
	case e.Delta != nil:
		return e.Delta.Sealed
	}
	return nil
}
