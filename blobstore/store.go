// Package blobstore keeps the bytes behind the OIDs the log records (an
// execute's input and output, a tool call's arguments and result) in a
// content-addressed folder beside the log, so that an auditor can resolve
// an OID to what actually ran.
//
// A blob is named by its OID, "sha256:<64 lower-case hex>" of its bytes, and
// stored at <dir>/sha256/<2 hex>/<62 hex>. A write streams to a temporary
// file while hashing, syncs it and renames it into place, so a crash leaves
// either the whole blob or none; the same bytes written twice are kept
// once. Every read hashes the bytes again and refuses a blob whose bytes no
// longer match its name: the store never serves damaged content. The
// store's total size is bounded by a quota.
//
// A log on shared storage keeps its blobs where every kernel instance
// reaches them (shared.go): encrypted in the bucket, counted in the
// database.
package blobstore

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/annal-dev/annal/format/oid"
	"github.com/annal-dev/annal/internal/atomicfile"
)

// Errors the store answers.
var (
	ErrNotFound  = errors.New("no such blob")
	ErrDamaged   = errors.New("blob damaged: its bytes no longer hash to its name")
	ErrTooLarge  = errors.New("blob too large")
	ErrQuota     = errors.New("blob store full")
	ErrInvalidID = errors.New("not a blob OID")
)

// Store is a content-addressed folder of blobs, or the blobs of a log's
// shared storage (OpenShared).
type Store struct {
	dir     string
	maxBlob int64
	quota   int64
	// shared, if set, keeps the blobs in the log's shared storage
	// (shared.go) in place of dir.
	shared *sharedBlobs

	mu   sync.Mutex
	used int64
	// dirs makes the folders blobs go in, durably: a blob acknowledged in
	// a new folder must not lose the folder in a crash.
	dirs atomicfile.Dirs
}

// Open opens (creating it if needed) the store at dir, holding blobs of at
// most maxBlob bytes and maxTotal bytes in all. Temporary files an
// interrupted write left behind are removed.
func Open(dir string, maxBlob, maxTotal int64) (*Store, error) {
	if maxBlob <= 0 || maxTotal <= 0 {
		return nil, errors.New("blobstore: the sizes must be positive")
	}
	s := &Store{dir: dir, maxBlob: maxBlob, quota: maxTotal}
	if err := s.dirs.Make(filepath.Join(dir, "sha256"), 0o700); err != nil {
		return nil, err
	}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if strings.HasPrefix(d.Name(), ".tmp-") {
			return os.Remove(path)
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		s.used += info.Size()
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("blobstore: %w", err)
	}
	return s, nil
}

// MaxBlob is the largest blob the store takes.
func (s *Store) MaxBlob() int64 { return s.maxBlob }

func (s *Store) path(id string) string {
	h := strings.TrimPrefix(id, oid.Prefix)
	return filepath.Join(s.dir, "sha256", h[:2], h[2:])
}

// Put stores the bytes r yields (at most MaxBlob) and returns their OID
// and size. It is durable when it returns.
func (s *Store) Put(r io.Reader) (id string, size int64, err error) {
	if s.shared != nil {
		return s.shared.put(r, s.maxBlob, s.quota)
	}
	tmp, err := os.CreateTemp(s.dir, ".tmp-")
	if err != nil {
		return "", 0, err
	}
	defer func() {
		if tmp != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(tmp, h), io.LimitReader(r, s.maxBlob+1))
	if err != nil {
		return "", 0, err
	}
	if n > s.maxBlob {
		return "", 0, fmt.Errorf("%w: more than %d bytes", ErrTooLarge, s.maxBlob)
	}
	id = oid.Prefix + hex.EncodeToString(h.Sum(nil))
	final := s.path(id)
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := os.Stat(final); err == nil {
		return id, n, nil // the same bytes are kept once
	}
	if s.used+n > s.quota {
		return "", 0, fmt.Errorf("%w: %d of %d bytes used", ErrQuota, s.used, s.quota)
	}
	if err := tmp.Sync(); err != nil {
		return "", 0, err
	}
	if err := tmp.Close(); err != nil {
		return "", 0, err
	}
	if err := s.dirs.Make(filepath.Dir(final), 0o700); err != nil {
		return "", 0, err
	}
	if err := os.Rename(tmp.Name(), final); err != nil {
		return "", 0, err
	}
	tmp = nil
	if err := atomicfile.SyncDir(filepath.Dir(final)); err != nil {
		return "", 0, err
	}
	s.used += n
	return id, n, nil
}

// Get returns the bytes of id after checking that they still hash to it.
func (s *Store) Get(id string) ([]byte, error) {
	if !oid.Valid(id) {
		return nil, fmt.Errorf("%w: %q (want sha256:<64 lower-case hex>)", ErrInvalidID, id)
	}
	data, err := s.read(id)
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > s.maxBlob || oid.Of(data) != id {
		return nil, fmt.Errorf("%w: %s", ErrDamaged, id)
	}
	return data, nil
}

// read returns at most maxBlob+1 bytes stored under id.
func (s *Store) read(id string) ([]byte, error) {
	if s.shared != nil {
		return s.shared.get(id, s.maxBlob)
	}
	f, err := os.Open(s.path(id))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, id)
	} else if err != nil {
		return nil, err
	}
	defer f.Close()
	var buf bytes.Buffer
	if _, err := io.Copy(&buf, io.LimitReader(f, s.maxBlob+1)); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
