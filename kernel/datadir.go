package kernel

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
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
)

// The files of a data folder.
const (
	logDirName         = "log"             // the Tessera POSIX log: the tlog-tiles tree
	stateFileName      = "state.db"        // bbolt: the materialised view of the log
	signingKeyFileName = "log.key"         // x/mod note private key, 0600
	verifierKeyName    = "log.pub"         // x/mod note verifier key
	originFileName     = "origin"          // the log origin, chosen once
	rootCredentialName = "root.credential" // the root human's bearer credential, 0600
	lockFileName       = "LOCK"
)

// dataDir is an opened, locked data folder.
type dataDir struct {
	Path        string
	Origin      string
	SigningKey  string
	VerifierKey string
	unlock      func()
}

// LogPath is the folder of the Tessera POSIX log.
func (d *dataDir) LogPath() string { return filepath.Join(d.Path, logDirName) }

// StatePath is the bbolt state file.
func (d *dataDir) StatePath() string { return filepath.Join(d.Path, stateFileName) }

// RootCredentialPath is where the root credential is kept.
func (d *dataDir) RootCredentialPath() string { return filepath.Join(d.Path, rootCredentialName) }

var (
	openDirsMu sync.Mutex
	openDirs   = map[string]bool{}
)

// ErrDataDirInUse is returned when another kernel holds the data folder.
var ErrDataDirInUse = errors.New("data folder is in use by another annald")

// openDataDir creates the data folder on first use and locks it. origin is
// used only when the folder has no origin yet ("" generates one); on a later
// start a different non-empty origin is an error, since a log's origin
// never changes.
func openDataDir(path, origin string) (_ *dataDir, err error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(abs, logDirName), 0o700); err != nil {
		return nil, fmt.Errorf("create data folder: %w", err)
	}
	unlock, err := lockDir(abs)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			unlock()
		}
	}()
	d := &dataDir{Path: abs, unlock: unlock}
	if d.Origin, err = d.ensureOrigin(origin); err != nil {
		return nil, err
	}
	if err := d.ensureKeys(); err != nil {
		return nil, err
	}
	return d, nil
}

// Close releases the lock.
func (d *dataDir) Close() {
	if d.unlock != nil {
		d.unlock()
		d.unlock = nil
	}
}

func lockDir(abs string) (func(), error) {
	openDirsMu.Lock()
	defer openDirsMu.Unlock()
	if openDirs[abs] {
		return nil, fmt.Errorf("%w: %s is already open in this process", ErrDataDirInUse, abs)
	}
	f, err := os.OpenFile(filepath.Join(abs, lockFileName), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock file: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder, _ := os.ReadFile(filepath.Join(abs, lockFileName))
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

func (d *dataDir) ensureOrigin(want string) (string, error) {
	p := filepath.Join(d.Path, originFileName)
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
	return want, writeFileAtomic(p, []byte(want+"\n"), 0o644)
}

func (d *dataDir) ensureKeys() error {
	skPath := filepath.Join(d.Path, signingKeyFileName)
	vkPath := filepath.Join(d.Path, verifierKeyName)
	sk, err := os.ReadFile(skPath)
	if errors.Is(err, os.ErrNotExist) {
		skey, vkey, err := checkpoints.GenerateLogKey(d.Origin)
		if err != nil {
			return err
		}
		// The verifier key is derived, so it is written first: a crash
		// between the two writes leaves no private key without its public one.
		if err := writeFileAtomic(vkPath, []byte(vkey+"\n"), 0o644); err != nil {
			return err
		}
		if err := writeFileAtomic(skPath, []byte(skey+"\n"), 0o600); err != nil {
			return err
		}
		sk = []byte(skey)
	} else if err != nil {
		return fmt.Errorf("read log signing key: %w", err)
	}
	signer, err := checkpoints.NewLogSigner(string(sk))
	if err != nil {
		return err
	}
	if signer.Name() != d.Origin {
		return fmt.Errorf("log signing key %s is named %q, not the origin %q", skPath, signer.Name(), d.Origin)
	}
	vk, err := os.ReadFile(vkPath)
	if err != nil {
		return fmt.Errorf("read verifier key: %w", err)
	}
	v, err := checkpoints.NewLogVerifier(string(vk))
	if err != nil {
		return err
	}
	if v.Name() != signer.Name() || v.KeyHash() != signer.KeyHash() {
		return fmt.Errorf("verifier key %s does not match signing key %s", vkPath, skPath)
	}
	d.SigningKey = strings.TrimSpace(string(sk))
	d.VerifierKey = strings.TrimSpace(string(vk))
	return nil
}

// newCredential returns a fresh bearer credential: "annal_" and 256 random
// bits in unpadded base64url.
func newCredential() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return "annal_" + base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// writeFileAtomic writes data so that a crash leaves either the old file
// or the new one.
func writeFileAtomic(path string, data []byte, mode os.FileMode) error {
	return atomicfile.Write(path, bytes.NewReader(data), mode)
}
