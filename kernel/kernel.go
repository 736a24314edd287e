package kernel

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/annal-dev/annal/checkpoints"
	"github.com/annal-dev/annal/kernel/event"
	"github.com/google/uuid"
)

// Software names this kernel in the genesis event.
const Software = "annal/0.1"

// RootID is the id of the root human, created by the genesis event.
const RootID = "root"

// Kernel is an open sovereignty kernel over one data folder.
type Kernel struct {
	cfg    Config
	dir    *DataDir
	log    *tileLog
	state  *state
	costs  CostTable
	energy energyLedger
	logger *slog.Logger

	// createMu serialises actor creation so an id is never handed out twice.
	createMu sync.Mutex

	stopFold chan struct{}
	foldDone chan struct{}
	closeMu  sync.Mutex
	closed   bool
}

// Open opens (or, on first start, creates) the kernel's data folder, folds
// the log into state, and appends the genesis event if the log is empty.
func Open(cfg Config) (_ *Kernel, err error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	dir, err := OpenDataDir(cfg.DataDir, cfg.Origin)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			dir.Close()
		}
	}()
	signer, err := checkpoints.NewLogSigner(dir.SigningKey)
	if err != nil {
		return nil, err
	}
	verifier, err := checkpoints.NewLogVerifier(dir.VerifierKey)
	if err != nil {
		return nil, err
	}
	st, err := openState(dir.StatePath(), dir.Origin)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			st.close()
		}
	}()
	l, err := openTileLog(dir.LogPath(), signer, verifier, cfg)
	if err != nil {
		return nil, err
	}
	k := &Kernel{
		cfg: cfg, dir: dir, log: l, state: st, costs: DefaultCosts,
		energy: unmeteredLedger{}, logger: cfg.Logger,
		stopFold: make(chan struct{}), foldDone: make(chan struct{}),
	}
	if err := k.recover(context.Background()); err != nil {
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = l.close(shutdownCtx)
		return nil, err
	}
	go k.foldLoop()
	return k, nil
}

// recover folds every durable event into state and, on a log with no events
// yet, writes the root credential and appends the genesis event.
func (k *Kernel) recover(ctx context.Context) error {
	size, err := k.log.integratedSize(ctx)
	if err != nil {
		return fmt.Errorf("read log size: %w", err)
	}
	if k.state.foldedSize() > size {
		return fmt.Errorf("state has folded %d events but the log has only %d: the state file belongs to another log or the log lost entries", k.state.foldedSize(), size)
	}
	if err := k.state.foldTo(ctx, k.log, size); err != nil {
		return fmt.Errorf("fold log into state: %w", err)
	}
	if size > 0 {
		if _, ok := k.state.actor(RootID); !ok {
			return errors.New("log has events but no genesis event creating the root human")
		}
		k.logger.Info("kernel recovered", "origin", k.dir.Origin, "size", size)
		return nil
	}
	return k.genesis(ctx)
}

func (k *Kernel) genesis(ctx context.Context) error {
	cred, err := newCredential()
	if err != nil {
		return err
	}
	// The credential file is written before the genesis event: a crash in
	// between leaves an empty log, and the next start makes a new one.
	if err := writeFileAtomic(k.dir.RootCredentialPath(), []byte(cred+"\n"), 0o600); err != nil {
		return fmt.Errorf("write root credential: %w", err)
	}
	id, err := newEventID()
	if err != nil {
		return err
	}
	ev := &event.Event{
		V: event.Version, ID: id, Time: event.FormatTime(k.cfg.Now()), Kind: event.KindGenesis, Actor: RootID,
		Log:     &event.LogInfo{Origin: k.dir.Origin, Software: Software},
		Subject: &event.ActorRecord{ID: RootID, Kind: event.Human, Name: "root", CredentialSHA256: event.CredentialHash(cred)},
	}
	index, err := k.appendAndFold(ctx, ev)
	if err != nil {
		return fmt.Errorf("append genesis event: %w", err)
	}
	if index != 0 {
		return fmt.Errorf("genesis event landed at index %d, not 0", index)
	}
	k.logger.Info("log created", "origin", k.dir.Origin, "root_credential", k.dir.RootCredentialPath())
	return nil
}

// appendAndFold appends a state-changing event and folds it into state
// before returning, so the caller's next request sees its effect.
func (k *Kernel) appendAndFold(ctx context.Context, ev *event.Event) (uint64, error) {
	entry, err := event.Encode(ev)
	if err != nil {
		return 0, err
	}
	index, err := k.log.append(ctx, entry)
	if err != nil {
		return 0, err
	}
	return index, k.state.apply([]indexedEvent{{index: index, ev: ev}}, 0)
}

func (k *Kernel) foldLoop() {
	defer close(k.foldDone)
	t := time.NewTicker(k.cfg.FoldInterval)
	defer t.Stop()
	for {
		select {
		case <-k.stopFold:
			return
		case <-t.C:
			if err := k.Fold(context.Background()); err != nil {
				k.logger.Error("fold log into state", "err", err)
			}
		}
	}
}

// Fold brings state up to the log's integrated size.
func (k *Kernel) Fold(ctx context.Context) error {
	size, err := k.log.integratedSize(ctx)
	if err != nil {
		return err
	}
	return k.state.foldTo(ctx, k.log, size)
}

// Close stops the kernel: pending appends are integrated and published, state
// catches up with the log, and the data folder is unlocked.
func (k *Kernel) Close() error {
	k.closeMu.Lock()
	defer k.closeMu.Unlock()
	if k.closed {
		return nil
	}
	k.closed = true
	close(k.stopFold)
	<-k.foldDone
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	errs := []error{k.log.close(ctx)}
	errs = append(errs, k.Fold(context.Background()), k.state.close())
	k.dir.Close()
	return errors.Join(errs...)
}

// Authenticate returns the actor whose credential this is.
func (k *Kernel) Authenticate(credential string) (*Actor, error) {
	if credential == "" {
		return nil, fmt.Errorf("%w: no credential presented", ErrUnauthenticated)
	}
	hash := event.CredentialHash(credential)
	a, ok := k.state.actorByCredential(hash)
	// The map lookup is by hash, so timing reveals nothing of the credential;
	// the compare guards against a state that maps a hash to the wrong actor.
	if !ok || subtle.ConstantTimeCompare([]byte(a.CredentialSHA256), []byte(hash)) != 1 {
		return nil, fmt.Errorf("%w: the credential belongs to no actor", ErrUnauthenticated)
	}
	return a, nil
}

// Info describes the log.
type Info struct {
	Origin      string `json:"origin"`
	VerifierKey string `json:"verifier_key"`
	Size        uint64 `json:"size"`
	Checkpoint  uint64 `json:"checkpoint_size"`
}

// Info returns the origin, verifier key, integrated size and the size of
// the latest checkpoint.
func (k *Kernel) Info(ctx context.Context) (Info, error) {
	size, err := k.log.integratedSize(ctx)
	if err != nil {
		return Info{}, err
	}
	info := Info{Origin: k.dir.Origin, VerifierKey: k.dir.VerifierKey, Size: size}
	if cp, err := k.log.latestCheckpoint(ctx); err == nil {
		info.Checkpoint = cp.Size
	}
	return info, nil
}

// Origin is the log origin.
func (k *Kernel) Origin() string { return k.dir.Origin }

// VerifierKey is the log's note verifier key.
func (k *Kernel) VerifierKey() string { return k.dir.VerifierKey }

// RootCredentialPath is where the root credential file is.
func (k *Kernel) RootCredentialPath() string { return k.dir.RootCredentialPath() }

// LogPath is the folder holding the tlog-tiles tree (and Tessera's private
// .state folder, which must never be served).
func (k *Kernel) LogPath() string { return k.dir.LogPath() }

// CheckpointAge is how long ago the published checkpoint was last written.
func (k *Kernel) CheckpointAge() (time.Duration, error) {
	fi, err := os.Stat(filepath.Join(k.dir.LogPath(), "checkpoint"))
	if err != nil {
		return 0, err
	}
	return k.cfg.Now().Sub(fi.ModTime()), nil
}

func newEventID() (string, error) {
	id, err := uuid.NewV7()
	if err != nil {
		return "", err
	}
	return strings.ToLower(id.String()), nil
}
