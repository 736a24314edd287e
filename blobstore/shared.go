package blobstore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/annal-dev/annal/format/oid"
	"github.com/annal-dev/annal/internal/sharedstore"
)

// sharedBlobs keeps the blobs of a log on shared storage, so that every
// kernel instance serves every blob (a takeover, instances behind a load
// balancer):
//
//	private/blobs/<N(oid)>     nonce || AES-256-GCM(bytes), the OID as additional data
//	annal_blobs (N(oid), size) what the quota counts
//
// The bucket may be public-read (for the tiles), and an agent's blobs are
// not public: so they are encrypted under a key derived from the KEK
// (sharedstore), and named by its HMAC of the OID, so that a listing does
// not confirm that a known file is stored. The object is stored before its
// row, so a crash between them leaves an uncounted orphan that the next
// Put of the same bytes writes again and counts, never a counted blob that
// is not there.
type sharedBlobs struct{ s *sharedstore.Store }

// OpenShared is the blob store of a log on shared storage, holding blobs
// of at most maxBlob bytes and maxTotal bytes in all. Blobs the folder at
// localDir holds (from before the log moved to shared storage) are moved
// there first, each checked against its name; the folder is removed once
// all are (a blob that does not match its name stops the start, naming
// its file).
func OpenShared(s *sharedstore.Store, localDir string, maxBlob, maxTotal int64) (*Store, error) {
	if maxBlob <= 0 || maxTotal <= 0 {
		return nil, errors.New("blobstore: the sizes must be positive")
	}
	st := &Store{maxBlob: maxBlob, quota: maxTotal, shared: &sharedBlobs{s: s}}
	if err := st.moveFrom(localDir); err != nil {
		return nil, fmt.Errorf("blobstore: move the blobs of %s to shared storage: %w", localDir, err)
	}
	return st, nil
}

func (b *sharedBlobs) object(id string) string { return "blobs/" + b.s.Name("blob", id) }

func (b *sharedBlobs) put(r io.Reader, maxBlob, quota int64) (string, int64, error) {
	var buf bytes.Buffer
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(&buf, h), io.LimitReader(r, maxBlob+1))
	if err != nil {
		return "", 0, err
	}
	if n > maxBlob {
		return "", 0, fmt.Errorf("%w: more than %d bytes", ErrTooLarge, maxBlob)
	}
	id := oid.Prefix + hex.EncodeToString(h.Sum(nil))
	return id, n, b.store(id, buf.Bytes(), quota)
}

// store keeps data under id unless it is counted already.
func (b *sharedBlobs) store(id string, data []byte, quota int64) error {
	ctx, cancel := context.WithTimeout(context.Background(), sharedstore.Timeout)
	defer cancel()
	name := b.s.Name("blob", id)
	var one int
	err := b.s.DB.QueryRowContext(ctx, "SELECT 1 FROM annal_blobs WHERE name = ?", name).Scan(&one)
	if err == nil {
		return nil // the same bytes are kept once
	} else if !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("look up a blob: %w", err)
	}
	// Instances putting different blobs at once may each pass this check:
	// the quota may be passed by at most what they put together.
	var used int64
	if err := b.s.DB.QueryRowContext(ctx, "SELECT COALESCE(SUM(size), 0) FROM annal_blobs").Scan(&used); err != nil {
		return fmt.Errorf("count the blobs: %w", err)
	}
	n := int64(len(data))
	if used+n > quota {
		return fmt.Errorf("%w: %d of %d bytes used", ErrQuota, used, quota)
	}
	if err := b.s.Put(ctx, b.object(id), b.s.SealBlob(id, data)); err != nil {
		return err
	}
	if _, err := b.s.DB.ExecContext(ctx, "INSERT IGNORE INTO annal_blobs (name, size) VALUES (?, ?)", name, n); err != nil {
		return fmt.Errorf("count a blob: %w", err)
	}
	return nil
}

// sealOverhead is what encryption adds to a blob: a nonce and a tag.
const sealOverhead = 12 + 16

func (b *sharedBlobs) get(id string, maxBlob int64) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), sharedstore.Timeout)
	defer cancel()
	sealed, err := b.s.Get(ctx, b.object(id), maxBlob+sealOverhead+1)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, id)
	} else if err != nil {
		return nil, err
	}
	data, err := b.s.OpenBlob(id, sealed)
	if err != nil {
		return nil, fmt.Errorf("%w: %s does not decrypt", ErrDamaged, id)
	}
	return data, nil
}

// moveFrom moves the blobs of the folder at dir into the shared store.
func (s *Store) moveFrom(dir string) error {
	root := filepath.Join(dir, "sha256")
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		id := oid.Prefix + strings.ReplaceAll(filepath.ToSlash(rel), "/", "")
		if !oid.Valid(id) {
			return nil // not a blob: removed with the folder
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if oid.Of(data) != id {
			return fmt.Errorf("%w: %s", ErrDamaged, path)
		}
		// The quota does not refuse a blob the log already names.
		if err := s.shared.store(id, data, 1<<62); err != nil {
			return err
		}
		return os.Remove(path)
	})
	if errors.Is(err, os.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	return os.RemoveAll(dir)
}
