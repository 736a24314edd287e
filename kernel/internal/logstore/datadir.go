package logstore

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"github.com/annal-dev/annal/checkpoints"
	"github.com/annal-dev/annal/internal/atomicfile"
	"github.com/annal-dev/annal/internal/sharedstore"
	"golang.org/x/mod/sumdb/note"
)

// The files of a data folder.
const (
	LogDirName         = "log"             // the Tessera POSIX log: the tlog-tiles tree
	StateFileName      = "state.db"        // bbolt: the materialised view of the log
	SigningKeyFileName = "log.key"         // x/mod note private key, 0600
	VerifierKeyName    = "log.pub"         // x/mod note verifier key
	OriginFileName     = "origin"          // the log origin, chosen once
	RootCredentialName = "root.credential" // the root human's bearer credential, 0600
	LockFileName       = "LOCK"

	// Inside the log folder: Tessera's private tree state (the size and
	// root it has integrated) and the published checkpoint.
	TreeStatePath      = ".state/treeState"
	CheckpointFileName = "checkpoint"
)

// DataDir is an opened, locked data folder.
type DataDir struct {
	Path        string
	Origin      string
	SigningKey  string
	VerifierKey string
	unlock      func()
}

// LogPath is the folder of the Tessera POSIX log.
func (d *DataDir) LogPath() string { return filepath.Join(d.Path, LogDirName) }

// StatePath is the bbolt state file.
func (d *DataDir) StatePath() string { return filepath.Join(d.Path, StateFileName) }

// RootCredentialPath is where the root credential is kept.
func (d *DataDir) RootCredentialPath() string { return filepath.Join(d.Path, RootCredentialName) }

var (
	openDirsMu sync.Mutex
	openDirs   = map[string]bool{}
)

// ErrDataDirInUse is returned when another kernel holds the data folder.
var ErrDataDirInUse = errors.New("data folder is in use by another annald")

// OpenDataDir creates the data folder on first use and locks it. origin is
// used only when the folder has no origin yet ("" generates one); on a later
// start a different non-empty origin is an error, since a log's origin
// never changes.
func OpenDataDir(path, origin string) (_ *DataDir, err error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	// Each new folder synced into its parent: the log's first entries are
	// acknowledged in them.
	if err := (&atomicfile.Dirs{}).Make(filepath.Join(abs, LogDirName), 0o700); err != nil {
		return nil, fmt.Errorf("create data folder: %w", err)
	}
	unlock, err := LockDir(abs)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			unlock()
		}
	}()
	// What a resume probe (probeWritable) left when the process died.
	if probes, _ := filepath.Glob(filepath.Join(abs, ".write-probe-*")); len(probes) > 0 {
		for _, p := range probes {
			os.Remove(p)
		}
	}
	d := &DataDir{Path: abs, unlock: unlock}
	if d.Origin, err = d.ensureOrigin(origin); err != nil {
		return nil, err
	}
	if err := d.ensureKeys(); err != nil {
		return nil, err
	}
	return d, nil
}

// OpenExistingDataDir opens, for a tool that must not create one (rebuild,
// repair), a data folder that annald made.
func OpenExistingDataDir(path string) (*DataDir, error) {
	if _, err := os.Stat(filepath.Join(path, OriginFileName)); err != nil {
		return nil, fmt.Errorf("%s is not an annald data folder: %w", path, err)
	}
	return OpenDataDir(path, "")
}

// Close releases the lock.
func (d *DataDir) Close() {
	if d.unlock != nil {
		d.unlock()
		d.unlock = nil
	}
}

func LockDir(abs string) (func(), error) {
	openDirsMu.Lock()
	defer openDirsMu.Unlock()
	if openDirs[abs] {
		return nil, fmt.Errorf("%w: %s is already open in this process", ErrDataDirInUse, abs)
	}
	f, err := os.OpenFile(filepath.Join(abs, LockFileName), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock file: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder, _ := os.ReadFile(filepath.Join(abs, LockFileName))
		f.Close()
		return nil, fmt.Errorf("%w: %s is locked (held by pid %s)", ErrDataDirInUse, abs, strings.TrimSpace(string(holder)))
	}
	_ = f.Truncate(0)
	_, _ = f.WriteAt([]byte(fmt.Sprintf("%d\n", os.Getpid())), 0)
	openDirs[abs] = true
	return func() {
		openDirsMu.Lock()
		defer openDirsMu.Unlock()
		delete(openDirs, abs)
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}

func (d *DataDir) ensureOrigin(want string) (string, error) {
	p := filepath.Join(d.Path, OriginFileName)
	have, err := os.ReadFile(p)
	switch {
	case err == nil:
		origin := strings.TrimSpace(string(have))
		if want != "" && want != origin {
			return "", fmt.Errorf("data folder %s belongs to log %q; --origin %q cannot change it", d.Path, origin, want)
		}
		return origin, checkpoints.ValidateOrigin(origin)
	case !errors.Is(err, os.ErrNotExist):
		return "", err
	}
	if want == "" {
		var b [8]byte
		if _, err := rand.Read(b[:]); err != nil {
			return "", err
		}
		want = "annal.local/" + hex.EncodeToString(b[:])
	}
	if err := checkpoints.ValidateOrigin(want); err != nil {
		return "", fmt.Errorf("--origin: %w", err)
	}
	return want, WriteFileAtomic(p, []byte(want+"\n"), 0o644)
}

// ensureKeys reads the log's key pair, making one only for a folder that
// has no log yet. A log's signing key is its identity: a new key signing an
// existing log would be a different log under the same name, so a missing,
// unreadable or too-open log.key on an existing log refuses to start, and
// log.pub is never rewritten once a log exists (a missing one is derived
// again from log.key, which names exactly one public key).
func (d *DataDir) ensureKeys() error {
	skPath := filepath.Join(d.Path, SigningKeyFileName)
	vkPath := filepath.Join(d.Path, VerifierKeyName)
	exists, err := logExists(d.LogPath())
	if err != nil {
		return err
	}
	sk, err := os.ReadFile(skPath)
	switch {
	case errors.Is(err, os.ErrNotExist) && exists:
		return fmt.Errorf("the log signing key %s is missing, but %s holds a log: a log's key is its identity, so annald makes no new key for an existing log; restore log.key from a backup (a new key is a new log: a new data folder)", skPath, d.LogPath())
	case errors.Is(err, os.ErrNotExist):
		return d.makeKeys(skPath, vkPath)
	case err != nil:
		return fmt.Errorf("read the log signing key: %w", err)
	}
	signer, err := d.checkSigningKey(skPath, sk)
	if err != nil {
		return err
	}
	vk, err := readVerifierKeyOf(vkPath, sk)
	if err != nil {
		return err
	}
	v, err := checkpoints.NewLogVerifier(string(vk))
	if err != nil {
		return fmt.Errorf("verifier key %s: %w", vkPath, err)
	}
	if v.Name() != signer.Name() || v.KeyHash() != signer.KeyHash() {
		return fmt.Errorf("verifier key %s does not match signing key %s", vkPath, skPath)
	}
	d.SigningKey = strings.TrimSpace(string(sk))
	d.VerifierKey = strings.TrimSpace(string(vk))
	return nil
}

// checkSigningKey checks the signing key sk read from skPath: only its
// owner may read it, and it is named for the origin.
func (d *DataDir) checkSigningKey(skPath string, sk []byte) (note.Signer, error) {
	if err := CheckPrivateMode(skPath); err != nil {
		return nil, err
	}
	signer, err := checkpoints.NewLogSigner(string(sk))
	if err != nil {
		return nil, fmt.Errorf("log signing key %s: %w", skPath, err)
	}
	if signer.Name() != d.Origin {
		return nil, fmt.Errorf("log signing key %s is named %q, not the origin %q", skPath, signer.Name(), d.Origin)
	}
	return signer, nil
}

// readVerifierKeyOf reads the verifier key at vkPath; a missing one is
// derived again from the signing key sk and written.
func readVerifierKeyOf(vkPath string, sk []byte) ([]byte, error) {
	vk, err := os.ReadFile(vkPath)
	switch {
	case errors.Is(err, os.ErrNotExist):
		derived, err := checkpoints.VerifierKeyOf(string(sk))
		if err != nil {
			return nil, err
		}
		return []byte(derived), WriteFileAtomic(vkPath, []byte(derived+"\n"), 0o644)
	case err != nil:
		return nil, fmt.Errorf("read verifier key: %w", err)
	}
	return vk, nil
}

// LogKeys are the signer and the verifier of the log's key pair.
func (d *DataDir) LogKeys() (note.Signer, note.Verifier, error) {
	signer, err := checkpoints.NewLogSigner(d.SigningKey)
	if err != nil {
		return nil, nil, err
	}
	verifier, err := checkpoints.NewLogVerifier(d.VerifierKey)
	if err != nil {
		return nil, nil, err
	}
	return signer, verifier, nil
}

// makeKeys makes the key pair of a new log.
func (d *DataDir) makeKeys(skPath, vkPath string) error {
	skey, vkey, err := checkpoints.GenerateLogKey(d.Origin)
	if err != nil {
		return err
	}
	// The verifier key is written first: a crash between the two writes
	// leaves no private key without its public one, and a folder with no
	// log yet may make both again.
	if err := WriteFileAtomic(vkPath, []byte(vkey+"\n"), 0o644); err != nil {
		return err
	}
	if err := WriteFileAtomic(skPath, []byte(skey+"\n"), 0o600); err != nil {
		return err
	}
	d.SigningKey, d.VerifierKey = skey, vkey
	return nil
}

// logExists reports whether the log folder holds a log: a tree state or a
// checkpoint that Tessera wrote. Tessera writes both when it first opens a
// folder, before any entry, so a folder whose key pair was just made (and
// whose first start then crashed) has neither.
func logExists(logPath string) (bool, error) {
	for _, p := range []string{filepath.Join(logPath, TreeStatePath), filepath.Join(logPath, CheckpointFileName)} {
		if _, err := os.Lstat(p); err == nil {
			return true, nil
		} else if !errors.Is(err, os.ErrNotExist) {
			return false, fmt.Errorf("look for the log: %w", err)
		}
	}
	return false, nil
}

// CheckPrivateMode refuses a secret file that others may read or write.
func CheckPrivateMode(path string) error {
	fi, err := os.Lstat(path)
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file (%v)", path, fi.Mode().Type())
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return fmt.Errorf("%s has mode %#o: a secret must be readable by its owner only; run chmod 600 %s", path, perm, path)
	}
	return nil
}

// WriteFileAtomic writes data so that a crash leaves either the old file
// or the new one.
func WriteFileAtomic(path string, data []byte, mode os.FileMode) error {
	return atomicfile.Write(path, bytes.NewReader(data), mode)
}

// identityFiles make a data folder a given log's: its signing key, verifier
// key, origin and root credential.
var identityFiles = []string{SigningKeyFileName, VerifierKeyName, OriginFileName, RootCredentialName}

// CopyIdentity copies a log's identity (signing key, verifier key, origin,
// root credential, and the shared store's key once the log has one) from
// the data folder from into the folder to, created if need be: all that a
// second machine of a log on shared storage (a standby) needs; its state
// is folded from the log.
func CopyIdentity(from, to string) error {
	if err := os.MkdirAll(to, 0o700); err != nil {
		return err
	}
	for _, f := range append(identityFiles, sharedstore.KeyFile) {
		b, err := os.ReadFile(filepath.Join(from, f))
		if f == sharedstore.KeyFile && errors.Is(err, os.ErrNotExist) {
			continue // made by the log's first start on shared storage
		}
		if err != nil {
			return err
		}
		if err := atomicfile.Write(filepath.Join(to, f), bytes.NewReader(b), 0o600); err != nil {
			return err
		}
	}
	return nil
}
