// Package sealstore keeps sealed payloads beside the log
// (kernel/event/sealed.go), in the data folder:
//
//	sealed/keys/<subject>                 32 random bytes, 0600: the subject's key
//	sealed/payloads/<subject>/<hex>       nonce || AES-256-GCM(salt || payload)
//
// where <hex> is the commitment's hex and the commitment is the
// additional data, so a file cannot be passed off as another's. A payload
// is durable (file and folder synced) before the event that commits to it
// is decided, so a receipt never names a payload the kernel could lose; a
// payload whose event was refused or never written is an orphan that
// nothing names and costs only its bytes.
//
// Erasure destroys the key: its file is overwritten with zeros, synced and
// removed, and the subject's payloads are removed. Without the key the
// ciphertexts, and any copy of them (a backup of the data folder), are
// noise. What the file system keeps of the old key's blocks (a journal, an
// SSD's spare blocks, a snapshot) is outside the kernel's reach: on such
// storage put the data folder on an encrypted volume.
package sealstore

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/annal-dev/annal/internal/atomicfile"
	"github.com/annal-dev/annal/kernel/event"
)

// Store is the sealed store of one data folder. Its methods are safe for
// concurrent use.
type Store struct {
	dir string
	// mu orders key creation against destruction, so that a seal racing
	// an erasure cannot leave a fresh key behind it, and guards inflight,
	// writing and erased.
	mu sync.Mutex
	// inflight are the payload files written for requests not decided
	// yet, by path: a refused request removes the file it wrote, unless
	// another request stored the same commitment meanwhile (shared).
	inflight map[string]*sealUse
	// writing counts, by subject, the payload files being written outside
	// mu; a destruction waits (written) until none is, so that it neither
	// removes a folder a write is renaming into nor leaves a file behind.
	writing map[string]int
	written *sync.Cond
	// erased are the subjects destroyed since the store opened: nothing
	// more is sealed under them, even by a request that looked at the
	// ledger before their erasure.
	erased map[string]bool
}

type sealUse struct{ shared bool }

// ErrErased is the answer for a sealed payload whose subject was erased.
var ErrErased = errors.New("the payload's subject was erased: its key is destroyed")

// Open is the sealed store of the data folder at dataDir (its files are
// made on first use).
func Open(dataDir string) *Store {
	s := &Store{dir: filepath.Join(dataDir, "sealed"), inflight: map[string]*sealUse{}, writing: map[string]int{}, erased: map[string]bool{}}
	s.written = sync.NewCond(&s.mu)
	return s
}

func (s *Store) keyPath(subject string) string {
	return filepath.Join(s.dir, "keys", subject)
}

func (s *Store) payloadPath(sp *event.SealedPayload) string {
	return filepath.Join(s.dir, "payloads", sp.Subject, strings.TrimPrefix(sp.Commitment, "sha256:"))
}

// key returns the subject's key, creating it when create is set.
func (s *Store) key(subject string, create bool) ([]byte, error) {
	if !event.ValidSubject(subject) { // a subject is a file name: never a path
		return nil, fmt.Errorf("subject %q is not valid", subject)
	}
	path := s.keyPath(subject)
	k, err := os.ReadFile(path)
	switch {
	case err == nil && len(k) == 32:
		return k, nil
	case err == nil:
		return nil, fmt.Errorf("sealed key %s: %d bytes, not 32", path, len(k))
	case !errors.Is(err, os.ErrNotExist):
		return nil, err
	case !create:
		return nil, ErrErased
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	k = make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		return nil, err
	}
	if err := atomicfile.Write(path, bytes.NewReader(k), 0o600); err != nil {
		return nil, fmt.Errorf("write the key of subject %s: %w", subject, err)
	}
	return k, nil
}

func gcm(key []byte) (cipher.AEAD, error) {
	b, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(b)
}

// Seal stores payload (canonical) under subject with salt, durably, and
// returns what the event carries, and whether this request wrote a new
// file (then it must call release once decided). The file is written
// outside mu: sealed actions sync their files in parallel.
func (s *Store) Seal(subject string, salt, payload []byte) (_ *event.SealedPayload, fresh bool, _ error) {
	sp := &event.SealedPayload{Subject: subject, Commitment: event.SealCommitment(salt, payload)}
	path := s.payloadPath(sp)
	s.mu.Lock()
	if s.erased[subject] {
		s.mu.Unlock()
		return nil, false, ErrErased
	}
	key, err := s.key(subject, true)
	write := true
	if err == nil {
		switch u := s.inflight[path]; {
		case u != nil:
			u.shared = true // written again below, so durable before this one's receipt
		case fileExists(path):
			write = false // the same payload under the same salt, stored already
		default:
			fresh = true
			s.inflight[path] = &sealUse{}
		}
	}
	if err == nil && write {
		s.writing[subject]++
	}
	s.mu.Unlock()
	if err != nil || !write {
		return sp, false, err
	}
	err = s.write(path, key, sp.Commitment, salt, payload)
	s.mu.Lock()
	if s.writing[subject]--; s.writing[subject] == 0 {
		delete(s.writing, subject)
		s.written.Broadcast()
	}
	s.mu.Unlock()
	if err != nil {
		s.Release(sp, fresh, false)
		return nil, false, err
	}
	return sp, fresh, nil
}

func (s *Store) write(path string, key []byte, commitment string, salt, payload []byte) error {
	aead, err := gcm(key)
	if err != nil {
		return err
	}
	nonce := make([]byte, aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return err
	}
	plain := append(append([]byte{}, salt...), payload...)
	sealed := aead.Seal(nonce, nonce, plain, []byte(commitment))
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	if err := atomicfile.Write(path, bytes.NewReader(sealed), 0o600); err != nil {
		return fmt.Errorf("store a sealed payload: %w", err)
	}
	return nil
}

// Release ends a fresh seal's request: kept, its file stays; refused, its
// file goes unless another request stored the same commitment meanwhile.
func (s *Store) Release(sp *event.SealedPayload, fresh, keep bool) {
	if !fresh {
		return
	}
	path := s.payloadPath(sp)
	s.mu.Lock()
	defer s.mu.Unlock()
	u := s.inflight[path]
	delete(s.inflight, path)
	if !keep && u != nil && !u.shared {
		os.Remove(path)
	}
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// Open returns the salt and payload a commitment was made to, ErrErased
// once the subject's key is gone, or an error naming what is wrong.
func (s *Store) Open(sp *event.SealedPayload) (salt, payload []byte, err error) {
	key, err := s.key(sp.Subject, false)
	if err != nil {
		return nil, nil, err
	}
	sealed, err := os.ReadFile(s.payloadPath(sp))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, fmt.Errorf("sealed payload %s of subject %s is missing from the data folder", sp.Commitment, sp.Subject)
	} else if err != nil {
		return nil, nil, err
	}
	aead, err := gcm(key)
	if err != nil {
		return nil, nil, err
	}
	if len(sealed) < aead.NonceSize() {
		return nil, nil, fmt.Errorf("sealed payload %s is damaged", sp.Commitment)
	}
	plain, err := aead.Open(nil, sealed[:aead.NonceSize()], sealed[aead.NonceSize():], []byte(sp.Commitment))
	if err != nil || len(plain) < event.SaltSize || !sp.Opens(plain[:event.SaltSize], plain[event.SaltSize:]) {
		return nil, nil, fmt.Errorf("sealed payload %s is damaged: it does not open its commitment", sp.Commitment)
	}
	return plain[:event.SaltSize], plain[event.SaltSize:], nil
}

// OpenPayload is ledger.Options.Open: the plaintext, or false.
func (s *Store) OpenPayload(sp *event.SealedPayload) (json.RawMessage, bool) {
	_, payload, err := s.Open(sp)
	return payload, err == nil
}

// Destroy erases subject: its key is overwritten, synced and removed, then
// its payloads are removed. It is idempotent, so that the start after a
// crash between an erasure's event and its destruction finishes it.
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
	path := s.keyPath(subject)
	if f, err := os.OpenFile(path, os.O_WRONLY, 0); err == nil {
		_, werr := f.Write(make([]byte, 32))
		serr := f.Sync()
		f.Close()
		if err := errors.Join(werr, serr); err != nil {
			return fmt.Errorf("overwrite the key of subject %s: %w", subject, err)
		}
		if err := os.Remove(path); err != nil {
			return err
		}
		if err := atomicfile.SyncDir(filepath.Dir(path)); err != nil {
			return err
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return os.RemoveAll(filepath.Join(s.dir, "payloads", subject))
}

// Holds reports whether a key of subject is present.
func (s *Store) Holds(subject string) bool { return fileExists(s.keyPath(subject)) }

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
