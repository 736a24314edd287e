package blobstore

import (
	"bytes"
	"errors"
	"github.com/annal-dev/annal/format/oid"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func TestPutGetDedupeAndLimits(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, 1024, 4096)
	if err != nil {
		t.Fatal(err)
	}
	data := []byte("stdout of a command\n")
	id, n, err := s.Put(bytes.NewReader(data))
	if err != nil || id != oid.Of(data) || n != int64(len(data)) {
		t.Fatalf("Put: %s %d %v", id, n, err)
	}
	got, err := s.Get(id)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("Get: %q %v", got, err)
	}
	// The same bytes again, concurrently: kept once.
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() { defer wg.Done(); s.Put(bytes.NewReader(data)) }()
	}
	wg.Wait()
	if s.used != int64(len(data)) {
		t.Errorf("used %d after putting the same %d bytes 9 times", s.used, len(data))
	}
	if _, _, err := s.Put(bytes.NewReader(make([]byte, 1025))); !errors.Is(err, ErrTooLarge) {
		t.Errorf("a blob over the limit: %v", err)
	}
	for i := range 3 {
		if _, _, err := s.Put(bytes.NewReader(bytes.Repeat([]byte{byte(i)}, 1024))); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := s.Put(bytes.NewReader(bytes.Repeat([]byte{9}, 1024))); !errors.Is(err, ErrQuota) {
		t.Errorf("over the quota: %v", err)
	}
	for _, bad := range []string{"", "sha256:", "sha256:" + strings.Repeat("A", 64), "md5:" + strings.Repeat("a", 64), "sha256:../../../etc/passwd" + strings.Repeat("a", 38)} {
		if _, err := s.Get(bad); !errors.Is(err, ErrInvalidID) {
			t.Errorf("Get(%q): %v", bad, err)
		}
	}
	if _, err := s.Get(oid.Of([]byte("never stored"))); !errors.Is(err, ErrNotFound) {
		t.Errorf("a blob never stored: %v", err)
	}
	// No temporary file stays behind, and a reopened store counts what it holds.
	left, _ := filepath.Glob(filepath.Join(dir, ".tmp-*"))
	if len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
	again, err := Open(dir, 1024, 4096)
	if err != nil || again.used != s.used {
		t.Errorf("reopened: used %d, want %d (%v)", again.used, s.used, err)
	}
}

// TestDamagedBlobIsNeverServed: a blob whose bytes changed on disk, or were
// cut short, is refused on read.
func TestDamagedBlobIsNeverServed(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, ".tmp-left-by-a-crash"), []byte("x"), 0o600)
	s, err := Open(dir, 1024, 4096)
	if err != nil {
		t.Fatal(err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".tmp-*")); len(left) != 0 {
		t.Errorf("Open left %v", left)
	}
	for name, damage := range map[string]func([]byte) []byte{
		"flipped":   func(b []byte) []byte { b[3] ^= 1; return b },
		"truncated": func(b []byte) []byte { return b[:len(b)/2] },
	} {
		data := []byte("the output an auditor resolves: " + name)
		id, _, err := s.Put(bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		path := s.path(id)
		os.WriteFile(path, damage(append([]byte(nil), data...)), 0o600)
		if _, err := s.Get(id); !errors.Is(err, ErrDamaged) {
			t.Errorf("%s: Get = %v, want ErrDamaged", name, err)
		}
	}
}

// FuzzGet: whatever OID a request names, Get answers a blob whose bytes
// hash to it, or an error; it never reads outside the store.
func FuzzGet(f *testing.F) {
	s, err := Open(f.TempDir(), 1<<10, 1<<20)
	if err != nil {
		f.Fatal(err)
	}
	id, _, err := s.Put(bytes.NewReader([]byte("stored")))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(id)
	f.Add("sha256:../../../../../../etc/passwd")
	f.Add("sha256:" + strings.Repeat("0", 64))
	f.Add("")
	f.Fuzz(func(t *testing.T, id string) {
		data, err := s.Get(id)
		if err != nil {
			return
		}
		if oid.Of(data) != id || !oid.Valid(id) {
			t.Fatalf("Get(%q) served bytes hashing to %s", id, oid.Of(data))
		}
		if rel, err := filepath.Rel(s.dir, s.path(id)); err != nil || strings.HasPrefix(rel, "..") {
			t.Fatalf("Get(%q) read %s", id, s.path(id))
		}
	})
}
