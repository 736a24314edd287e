package sealstore

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/annal-dev/annal/internal/atomicfile"
)

// diskBackend keeps keys and payloads in the data folder's sealed/. Its
// folders (keys/, and payloads/<subject>/ for each subject) are made
// durably (dirs): a payload acknowledged in a new subject's folder must not
// lose that folder in a crash.
type diskBackend struct {
	dir  string
	dirs *atomicfile.Dirs
}

func newDiskBackend(dataDir string) diskBackend {
	return diskBackend{dir: filepath.Join(dataDir, "sealed"), dirs: &atomicfile.Dirs{}}
}

func (d diskBackend) keyPath(subject string) string { return filepath.Join(d.dir, "keys", subject) }

func (d diskBackend) payloadPath(id payloadID) string {
	return filepath.Join(d.dir, "payloads", id.subject, id.name)
}

func (d diskBackend) readKey(subject string) ([]byte, error) {
	path := d.keyPath(subject)
	k, err := os.ReadFile(path)
	if err == nil && len(k) != 32 {
		return nil, fmt.Errorf("sealed key %s: %d bytes, not 32", path, len(k))
	}
	return k, err
}

// createKey writes key: the store makes one subject's key one caller at a
// time (Store.making), and only when it found none, so there is no other
// key to find.
func (d diskBackend) createKey(subject string, key []byte) ([]byte, error) {
	path := d.keyPath(subject)
	if err := d.dirs.Make(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	if err := atomicfile.Write(path, bytes.NewReader(key), 0o600); err != nil {
		return nil, fmt.Errorf("write the key of subject %s: %w", subject, err)
	}
	return key, nil
}

func (d diskBackend) destroyKey(subject string) error {
	path := d.keyPath(subject)
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	_, werr := f.Write(make([]byte, 32))
	serr := f.Sync()
	f.Close()
	if err := errors.Join(werr, serr); err != nil {
		return fmt.Errorf("overwrite the key of subject %s: %w", subject, err)
	}
	if err := os.Remove(path); err != nil {
		return err
	}
	return atomicfile.SyncDir(filepath.Dir(path))
}

func (d diskBackend) hasKey(subject string) bool { return fileExists(d.keyPath(subject)) }

func (d diskBackend) putPayload(id payloadID, sealed []byte) error {
	path := d.payloadPath(id)
	if err := d.dirs.Make(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return atomicfile.Write(path, bytes.NewReader(sealed), 0o600)
}

func (d diskBackend) getPayload(id payloadID) ([]byte, error) { return os.ReadFile(d.payloadPath(id)) }

func (d diskBackend) hasPayload(id payloadID) (bool, error) {
	_, err := os.Stat(d.payloadPath(id))
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}

func (d diskBackend) removePayload(id payloadID) { os.Remove(d.payloadPath(id)) }

func (d diskBackend) removePayloads(subject string) error {
	return os.RemoveAll(filepath.Join(d.dir, "payloads", subject))
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
