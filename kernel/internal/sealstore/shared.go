package sealstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"

	"github.com/annal-dev/annal/internal/sharedstore"
)

// OpenShared is the sealed store of a log on shared storage: every kernel
// instance of the log opens the same payloads, and an erasure on one holds
// for all of them.
//
//	annal_sealed_keys (subject, wrapped)     the subject's key wrapped by the KEK;
//	                                         NULL once erased
//	private/sealed/<N(subject)>/<N(hex)>    nonce || AES-256-GCM(salt || payload)
//
// where N is the shared store's HMAC naming (a public bucket's listing
// shows no subject and no commitment) and the payload's ciphertext is the
// data folder's, under the subject's key: the bucket holds nothing but
// ciphertext. Erasure sets the key to NULL rather than deleting the row,
// so that no instance seals under the subject again (a seal racing the
// erasure on another instance finds the row and stops), then deletes
// every version of the subject's objects.
func OpenShared(s *sharedstore.Store) *Store { return newStore(sharedBackend{s: s}) }

type sharedBackend struct{ s *sharedstore.Store }

func ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), sharedstore.Timeout)
}

func (b sharedBackend) prefix(subject string) string {
	return "sealed/" + b.s.Name("subject", subject) + "/"
}

func (b sharedBackend) object(id payloadID) string {
	return b.prefix(id.subject) + b.s.Name("commitment", id.subject+"\x00"+id.name)
}

func (b sharedBackend) readKey(subject string) ([]byte, error) {
	c, cancel := ctx()
	defer cancel()
	var wrapped []byte
	err := b.s.DB.QueryRowContext(c, "SELECT wrapped FROM annal_sealed_keys WHERE subject = ?", subject).Scan(&wrapped)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil, os.ErrNotExist
	case err != nil:
		return nil, fmt.Errorf("read the key of subject %s: %w", subject, err)
	case wrapped == nil:
		return nil, os.ErrNotExist // erased
	}
	return b.s.UnwrapKey(subject, wrapped)
}

// createKey inserts key unless the subject has a row: then the key another
// instance made first is the subject's, or the subject was erased.
func (b sharedBackend) createKey(subject string, key []byte) ([]byte, error) {
	c, cancel := ctx()
	defer cancel()
	if _, err := b.s.DB.ExecContext(c, "INSERT IGNORE INTO annal_sealed_keys (subject, wrapped) VALUES (?, ?)", subject, b.s.WrapKey(subject, key)); err != nil {
		return nil, fmt.Errorf("store the key of subject %s: %w", subject, err)
	}
	k, err := b.readKey(subject)
	if errors.Is(err, os.ErrNotExist) {
		return nil, ErrErased
	}
	return k, err
}

func (b sharedBackend) destroyKey(subject string) error {
	c, cancel := ctx()
	defer cancel()
	_, err := b.s.DB.ExecContext(c, "INSERT INTO annal_sealed_keys (subject, wrapped) VALUES (?, NULL) ON DUPLICATE KEY UPDATE wrapped = NULL", subject)
	if err != nil {
		return fmt.Errorf("destroy the key of subject %s: %w", subject, err)
	}
	return nil
}

func (b sharedBackend) hasKey(subject string) bool {
	_, err := b.readKey(subject)
	return err == nil
}

func (b sharedBackend) putPayload(id payloadID, sealed []byte) error {
	c, cancel := ctx()
	defer cancel()
	return b.s.Put(c, b.object(id), sealed)
}

// maxSealedObject bounds a payload's read: event.MaxSealedPayload and its
// salt, nonce and tag are well under it.
const maxSealedObject = 1 << 20

func (b sharedBackend) getPayload(id payloadID) ([]byte, error) {
	c, cancel := ctx()
	defer cancel()
	return b.s.Get(c, b.object(id), maxSealedObject)
}

func (b sharedBackend) hasPayload(id payloadID) (bool, error) {
	c, cancel := ctx()
	defer cancel()
	return b.s.Has(c, b.object(id))
}

func (b sharedBackend) removePayload(id payloadID) {
	c, cancel := ctx()
	defer cancel()
	b.s.Delete(c, b.object(id)) // an orphan left behind is ciphertext nothing names
}

func (b sharedBackend) removePayloads(subject string) error {
	c, cancel := ctx()
	defer cancel()
	return b.s.DeleteAll(c, b.prefix(subject))
}
