package sealstore

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/annal-dev/annal/kernel/event"
)

// MoveFrom moves the sealed payloads a data folder holds (from before its
// log moved to shared storage) into s, a shared store, and reports how
// many subjects it moved. Each subject's payloads are opened under the
// folder's key and sealed again under the key the shared store holds for
// the subject (the folder's own, unless another instance made one first),
// so no instance ever needs the folder; only then is the folder's key
// destroyed and its payloads removed. A subject the shared store has
// erased is erased here too. It is idempotent: a start after a crash
// halfway moves the rest. A payload that does not open is an error naming
// its file, and the folder keeps everything not moved yet.
func (s *Store) MoveFrom(dataDir string) (int, error) {
	if _, ok := s.b.(sharedBackend); !ok {
		return 0, errors.New("sealstore: payloads move only into a shared store")
	}
	local := newDiskBackend(dataDir)
	keys, err := os.ReadDir(filepath.Join(local.dir, "keys"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return 0, err
	}
	n := 0
	for _, e := range keys {
		subject := e.Name()
		if !event.ValidSubject(subject) {
			continue // a temporary file of an interrupted write
		}
		if err := s.moveSubject(local, subject); err != nil {
			return n, fmt.Errorf("move the sealed payloads of subject %s to shared storage: %w", subject, err)
		}
		n++
	}
	// What is left has no key: the payloads of subjects erased here before
	// a crash finished their removal, noise without their key.
	return n, os.RemoveAll(local.dir)
}

func (s *Store) moveSubject(local diskBackend, subject string) error {
	localKey, err := local.readKey(subject)
	if err != nil {
		return err
	}
	key, err := s.b.createKey(subject, localKey)
	if err != nil && !errors.Is(err, ErrErased) {
		return err
	}
	if err == nil {
		if err := s.movePayloads(local, subject, localKey, key); err != nil {
			return err
		}
	}
	if err := local.destroyKey(subject); err != nil {
		return err
	}
	return local.removePayloads(subject)
}

func (s *Store) movePayloads(local diskBackend, subject string, localKey, key []byte) error {
	files, err := os.ReadDir(filepath.Join(local.dir, "payloads", subject))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	for _, f := range files {
		id := payloadID{subject: subject, name: f.Name()}
		if !validHex(id.name) {
			continue // a temporary file of an interrupted write
		}
		sealed, err := local.getPayload(id)
		if err != nil {
			return err
		}
		commitment := "sha256:" + id.name
		plain, err := decrypt(localKey, commitment, sealed)
		if err != nil {
			return fmt.Errorf("%s does not open under its subject's key: %w", local.payloadPath(id), err)
		}
		again, err := encrypt(key, commitment, plain)
		if err != nil {
			return err
		}
		if err := s.b.putPayload(id, again); err != nil {
			return err
		}
	}
	return nil
}

func validHex(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range s {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
