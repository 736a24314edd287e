package kernel

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/annal-dev/annal/internal/sharedstore"
	"github.com/annal-dev/annal/kernel/event"
	"github.com/annal-dev/annal/kernel/internal/history"
	"github.com/annal-dev/annal/kernel/internal/ledger"
	"github.com/annal-dev/annal/kernel/internal/logstore"
	"github.com/annal-dev/annal/kernel/internal/ratelimit"
	"github.com/annal-dev/annal/kernel/internal/sealstore"
	"github.com/google/uuid"
)

// Software names this kernel in the genesis event.
const Software = "annal/0.1"

// RulesVersion is the version of the rules this kernel writes a log under
// (its genesis, or the log.rules entry by which it adopts them for a log
// written under older ones).
const RulesVersion = ledger.Rules

// RootID is the id of the root human, created by the genesis event.
const RootID = ledger.RootID

// Kernel is an open sovereignty kernel over one data folder.
type Kernel struct {
	cfg Config
	dir *logstore.DataDir
	log *logstore.Log
	// witnesses sees the witnesses' answers (nil without a policy).
	witnesses *logstore.WitnessWatch
	store     *history.Store
	logger    *slog.Logger
	// sealed keeps sealed payloads and their subjects' keys (sealed.go).
	sealed *sealstore.Store
	// shared is what every instance of a log on shared storage reaches
	// (sharedstorage.go); nil on the data folder.
	shared *sharedstore.Store
	// chainFiles caches, by session, the files a session's chain gives
	// when the ledger no longer keeps them (retention.go).
	chainFiles sync.Map

	// mu guards the ledger, the claims and the pending energy. Decisions
	// are taken under it against the durable ledger less what decided
	// events hold; the group committer folds each durable group into the
	// ledger under it. Reads that change nothing (Authenticate, which
	// copies the actor; the seal check once some actor or envelope asks
	// for sealed payloads) take it shared. A submitted action's way to its
	// decision takes it only there: Identify and the seal check's first
	// look read what the ledger keeps beside it (its credential index and
	// count of sealers), so that the requests of many agents do not queue
	// on it twice.
	mu sync.RWMutex
	// deciding queues decisions before they take mu, so that mu has at
	// most one decision waiting on it. Why: with hundreds of agents
	// queued on mu itself, the fold stage waited behind all of them.
	deciding sync.Mutex
	ledger   *ledger.Ledger
	// seq is the sequencer's ledger (commit.go): the durable ledger and
	// every entry admitted to the log after it. seqStale is why it no
	// longer follows the log. seqMu guards both; the group committer's
	// writer holds it while it admits a group.
	seqMu    sync.Mutex
	seq      *ledger.Ledger
	seqStale error
	// seqGen counts the sequencing ledger's copies of the durable one and
	// the times it stopped following the log: the durable fold trusts the
	// sequencer's check of an entry only if seqGen has not moved since
	// (commit.go, foldInOrder). Written under both mu and seqMu.
	seqGen uint64
	// seqRefusals counts the entries the sequencer kept out of the log.
	seqRefusals atomic.Uint64
	claims      claims
	pending     *ledger.Pending
	// ids are actor ids handed to creations in flight.
	ids map[string]bool
	// failed is why the kernel takes no writes, nil while it does: an
	// append failed (resumable: the kernel resumes by itself once the
	// storage takes writes again, after folding what did land), or a
	// durable event could not be folded or the log is damaged (not
	// resumable: the operator must look, annald audit or verify).
	failed    error
	resumable bool
	// wakeResume starts the resume loop's attempts after a failed append.
	wakeResume chan struct{}
	// scrubbed is closed once the background scrub after start has ended.
	scrubbed chan struct{}
	// grown is closed, and replaced, whenever the ledger folds more of the
	// log (Grown).
	grown chan struct{}
	// unindexed are the history terms of folded events not yet in the
	// state file's index (kernel/internal/history); persist writes them.
	unindexed []history.IndexedEvent
	// persistMu makes persists take turns: each writes what it took from
	// the ledger and then drops that many terms from unindexed, which two
	// at once would drop twice.
	persistMu sync.Mutex

	// limiter is the rate limit gate's token buckets (in memory: a
	// restart refills them, which the limits' burst sizes allow).
	limiter *ratelimit.Limiter
	// checkOpts are the options of every decision's check (checkOptions).
	checkOpts *ledger.Options

	prod           producer
	lastProducedAt uint64
	stopLoops      chan struct{}
	loopsDone      sync.WaitGroup

	stopFold chan struct{}
	foldDone chan struct{}
	closeMu  sync.Mutex
	closed   bool
	// follower is set in a kernel that follows a log another writes
	// (follow.go).
	follower *following
}

// Open opens (or, on first start, creates) the kernel's data folder, folds
// the log into state, and appends the genesis event if the log is empty.
func Open(cfg Config) (_ *Kernel, err error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	dir, err := logstore.OpenDataDir(cfg.DataDir, cfg.Origin)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			dir.Close()
		}
	}()
	sealed, shared, err := openSealed(cfg, dir)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil && shared != nil {
			shared.Close()
		}
	}()
	opened, err := openLog(cfg, dir)
	if err != nil {
		return nil, err
	}
	l, cache, witnesses := opened.log, opened.state, opened.witnesses
	defer func() {
		if err != nil {
			cache.Store.Close()
		}
	}()
	k := newKernel(cfg, dir, l, cache, sealed, shared)
	k.witnesses = witnesses
	if !cfg.DisableRateLimit {
		k.limiter = ratelimit.New(cfg.RateLimits, cfg.MaxRateBuckets, cfg.RateClock)
	}
	hooks := logstore.Hooks{OnDurable: k.foldDurable, OnFailure: k.tileLogFailure, HoldTiles: cfg.holdTiles, FailTiles: cfg.failTiles}
	if !cfg.sequencerOff {
		hooks.Sequencer = k
	}
	l.Start(hooks)
	if err := k.recover(context.Background()); err != nil {
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = l.Close(shutdownCtx)
		return nil, err
	}
	k.startLoops(opened.unscrubbed)
	return k, nil
}

// openedLog is what Open finds in the data folder: the log, open for
// appends once started, the state folded from it, and the witnesses'
// watch; unscrubbed is the part of the log left to scrub in the
// background.
type openedLog struct {
	log        *logstore.Log
	state      *history.StateCache
	witnesses  *logstore.WitnessWatch
	unscrubbed *logstore.Unscrubbed
}

// openLog opens the log of dir under its keys and the state the kernel
// folded from it, checked against it.
func openLog(cfg Config, dir *logstore.DataDir) (*openedLog, error) {
	signer, verifier, err := dir.LogKeys()
	if err != nil {
		return nil, err
	}
	if err := logstore.CheckPrivateMode(dir.RootCredentialPath()); err != nil && !errors.Is(err, os.ErrNotExist) {
		cfg.Logger.Warn("the root credential is not private", "err", err)
	}
	o := &openedLog{}
	if len(cfg.WitnessPolicy) > 0 {
		if err := checkPolicyLog(cfg.WitnessPolicy, dir.VerifierKey); err != nil {
			return nil, err
		}
		o.witnesses = logstore.NewWitnessWatch(dir.Origin, dir.VerifierKey, cfg.Logger, cfg.Now)
	}
	o.log, o.unscrubbed, err = logstore.Open(dir, logstore.Options{
		LogOptions: cfg.logOptions(), Signer: signer, Verifier: verifier, Witnesses: o.witnesses,
		DisableWriteAhead: cfg.DisableWriteAhead, ScrubAtStart: cfg.scrubAtStart(), DisableScrub: cfg.DisableScrub,
	}, func(leafAt func(uint64) ([]byte, bool)) (err error) {
		o.state, err = history.OpenCheckedState(dir, cfg.Logger, leafAt)
		return err
	})
	if err != nil {
		if o.state != nil {
			o.state.Store.Close()
		}
		return nil, err
	}
	return o, nil
}

// startLoops starts the kernel's background work: persisting the state,
// producing energy, timing out holds and expiries, resuming after a failed
// append, and scrubbing what Open left unscrubbed.
func (k *Kernel) startLoops(unscrubbed *logstore.Unscrubbed) {
	go k.foldLoop()
	if !k.cfg.DisableProduction {
		k.loopsDone.Add(1)
		go func() { defer k.loopsDone.Done(); k.produceLoop(k.stopLoops) }()
	}
	k.loopsDone.Add(2)
	go func() { defer k.loopsDone.Done(); k.holdLoop(k.stopLoops) }()
	go func() { defer k.loopsDone.Done(); k.resumeLoop(k.stopLoops) }()
	if unscrubbed != nil {
		k.loopsDone.Add(1)
		go func() { defer k.loopsDone.Done(); defer close(k.scrubbed); k.scrub(unscrubbed.Size, unscrubbed.Root) }()
	} else {
		close(k.scrubbed)
	}
}

// recover folds the log's tail into the stored ledger and, on a log with
// no events yet, writes the root credential and appends the genesis event.
func (k *Kernel) recover(ctx context.Context) error {
	size, err := k.log.SettledSize(ctx)
	if err != nil {
		return fmt.Errorf("read log size: %w", err)
	}
	if k.ledger.Size > size {
		return fmt.Errorf("state has folded %d events but the log has only %d: the state file belongs to another log or the log lost entries", k.ledger.Size, size)
	}
	var accept map[uint64]bool
	if k.cfg.tolerate != nil {
		accept = k.cfg.tolerate.entries
	}
	if err := history.FoldLogAccepting(ctx, k.log, k.ledger, size, accept, k.indexFolded); err != nil {
		return fmt.Errorf("fold log into state: %w", err)
	}
	if waiting := k.ledger.AwaitingRecord(); len(waiting) > 0 && k.cfg.tolerate == nil {
		return fmt.Errorf("fold log into state: entries %v were passed over as tolerated, but no log.tolerated entry names them", waiting)
	}
	k.mu.Lock()
	k.ledger.CheckClaims() // the events decided from here on (in a test binary)
	k.resetSequencer()
	k.mu.Unlock()
	if k.cfg.tolerate != nil {
		if err := k.recordToleration(ctx, k.cfg.tolerate); err != nil {
			return err
		}
	}
	if size == 0 {
		return k.genesis(ctx)
	}
	if _, ok := k.ledger.Actors[RootID]; !ok {
		return errors.New("log has events but no genesis event creating the root human")
	}
	if err := k.finishErasures(); err != nil {
		return err
	}
	k.logger.Info("kernel recovered", "origin", k.dir.Origin, "size", size, "rules", k.ledger.Rules)
	if k.ledger.Rules < ledger.Rules {
		return k.adoptRules(ctx)
	}
	return nil
}

// adoptRules brings a log written under older rules under this release's:
// one log.rules entry, from which on the fold checks every rule. Entries
// before it that broke a rule introduced since were tolerated (and are
// counted; annald audit lists them).
func (k *Kernel) adoptRules(ctx context.Context) error {
	_, err := k.decide(ctx, "rules", func(l *ledger.Ledger, _ event.Instant) (*event.Event, error) {
		return &event.Event{Kind: event.KindRulesAdopted, Actor: event.KernelActor,
			Log: &event.LogInfo{Origin: k.dir.Origin, Software: Software, Rules: ledger.Rules}}, nil
	})
	if err != nil {
		return fmt.Errorf("adopt rules %d: %w", ledger.Rules, err)
	}
	k.logger.Info("log adopted rules", "rules", ledger.Rules, "tolerated_before", k.ledger.Legacy)
	return nil
}

func (k *Kernel) genesis(ctx context.Context) error {
	cred, err := newCredential()
	if err != nil {
		return err
	}
	// The credential file is written before the genesis event: a crash in
	// between leaves an empty log, and the next start makes a new one.
	if err := logstore.WriteFileAtomic(k.dir.RootCredentialPath(), []byte(cred+"\n"), 0o600); err != nil {
		return fmt.Errorf("write root credential: %w", err)
	}
	energy := k.cfg.Energy
	d, err := k.decide(ctx, "genesis", func(*ledger.Ledger, event.Instant) (*event.Event, error) {
		return &event.Event{Kind: event.KindGenesis, Actor: RootID,
			Log: &event.LogInfo{Origin: k.dir.Origin, Software: Software, Energy: &energy, Rules: ledger.Rules},
			Subject: &event.ActorRecord{ID: RootID, Kind: event.Human, Name: "root", CredentialSHA256: event.CredentialHash(cred),
				Grants: []event.Grant{{Pattern: "**", Actions: allActions}}, Share: ledger.GenesisShare}}, nil
	})
	if err != nil {
		return fmt.Errorf("append genesis event: %w", err)
	}
	if d.index != 0 {
		return fmt.Errorf("genesis event landed at index %d, not 0", d.index)
	}
	k.logger.Info("log created", "origin", k.dir.Origin, "root_credential", k.dir.RootCredentialPath())
	return nil
}

// closeTimeout bounds how long Close waits for entries to be written: past
// it, entries not yet being written are answered with an error, and
// answered entries the tiles do not hold yet stay in the write-ahead log
// for the next start.
const closeTimeout = 3 * time.Second

// Close stops the kernel: pending appends are integrated and published, state
// catches up with the log, and the data folder is unlocked.
func (k *Kernel) Close() error {
	k.closeMu.Lock()
	defer k.closeMu.Unlock()
	if k.closed {
		return nil
	}
	if k.follower != nil {
		return k.closeFollower()
	}
	k.closed = true
	close(k.stopLoops)
	k.loopsDone.Wait()
	close(k.stopFold)
	<-k.foldDone
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	logErr := k.log.Close(ctx)
	if errors.Is(logErr, context.DeadlineExceeded) && len(k.WitnessProblems()) > 0 {
		// Close waits for a checkpoint that covers every entry, which
		// refusing witnesses never cosign. The entries are durable;
		// the checkpoint follows once the witnesses are fixed.
		k.logger.Warn("stopped without a checkpoint for the last entries: witnesses refuse this log's checkpoints", "problems", k.WitnessProblems())
		logErr = nil
	}
	errs := []error{logErr}
	errs = append(errs, k.persist(), k.store.Close())
	if k.shared != nil {
		errs = append(errs, k.shared.Close())
	}
	k.dir.Close()
	return errors.Join(errs...)
}

// newKernel is a kernel on its open data folder, log, state cache and
// sealed store, its bookkeeping made: what Open and OpenFollower share.
func newKernel(cfg Config, dir *logstore.DataDir, l *logstore.Log, cache *history.StateCache, sealed *sealstore.Store, shared *sharedstore.Store) *Kernel {
	return &Kernel{
		cfg: cfg, dir: dir, log: l, store: cache.Store, ledger: cache.Ledger, claims: newClaims(), pending: ledger.NewPending(),
		ids: map[string]bool{}, logger: cfg.Logger, wakeResume: make(chan struct{}, 1), scrubbed: make(chan struct{}), grown: make(chan struct{}),
		stopFold: make(chan struct{}), foldDone: make(chan struct{}), stopLoops: make(chan struct{}),
		sealed: sealed, shared: shared,
	}
}

// Authenticate returns the actor whose credential this is.
func (k *Kernel) Authenticate(credential string) (*Actor, error) {
	if credential == "" {
		return nil, fmt.Errorf("%w: no credential presented", ErrUnauthenticated)
	}
	hash := event.CredentialHash(credential)
	k.mu.RLock()
	a, ok := k.ledger.ActorByCredential(hash)
	if ok {
		a = copyActor(a)
	}
	k.mu.RUnlock()
	// The map lookup is by hash, so timing reveals nothing of the credential;
	// the compare guards against a state that maps a hash to the wrong actor.
	if !ok || subtle.ConstantTimeCompare([]byte(a.CredentialSHA256), []byte(hash)) != 1 {
		return nil, fmt.Errorf("%w: the credential belongs to no actor", ErrUnauthenticated)
	}
	return a, nil
}

// Identify is Authenticate for a caller that needs to know only who acts,
// such as Submit, whose decision reads the actor's state under the
// kernel's lock anyway: the actor it returns has its ID and Kind set and
// nothing else. It takes none of the kernel's locks. Why: under load,
// every request's Authenticate took the kernel's lock shared, and the
// readers queued behind a decision were let in together, so the next
// decision and the fold of the log waited until each of them had been
// scheduled (512 agents: the fold stage waited on the lock 30% of the
// time, and held it 8%).
func (k *Kernel) Identify(credential string) (*Actor, error) {
	if credential == "" {
		return nil, fmt.Errorf("%w: no credential presented", ErrUnauthenticated)
	}
	id, kind, ok := k.ledger.IdentifyCredential(event.CredentialHash(credential))
	if !ok {
		return nil, fmt.Errorf("%w: the credential belongs to no actor", ErrUnauthenticated)
	}
	return &Actor{ActorRecord: event.ActorRecord{ID: id, Kind: kind}}, nil
}

// Info describes the log.
type Info struct {
	Origin      string `json:"origin"`
	VerifierKey string `json:"verifier_key"`
	Size        uint64 `json:"size"`
	Checkpoint  uint64 `json:"checkpoint_size"`
	// NotReady is why the kernel takes no writes (nil while it does).
	NotReady error `json:"-"`
}

// Info returns the origin, verifier key, integrated size and the size of
// the latest checkpoint.
func (k *Kernel) Info(ctx context.Context) (Info, error) {
	size, err := k.log.Size(ctx)
	if err != nil {
		return Info{}, err
	}
	info := Info{Origin: k.dir.Origin, VerifierKey: k.dir.VerifierKey, Size: size, NotReady: k.Ready()}
	if cp, err := k.log.LatestCheckpoint(ctx); err == nil {
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

// Storage is where the log lives.
func (k *Kernel) Storage() Storage { return k.cfg.Storage }

// LogPath is the folder of a log kept in the data folder (POSIX storage):
// the tlog-tiles tree and Tessera's private .state folder, which must never
// be served.
func (k *Kernel) LogPath() string { return k.dir.LogPath() }

// ProofTilesKept is how many of the log's full level-0 tiles proofs keep
// the tops of, of how many they will (logstore.Log.ProofTilesKept): a
// proof costs its steady price once the two are equal.
func (k *Kernel) ProofTilesKept() (kept, keepable uint64, err error) {
	info, err := k.Info(context.Background())
	if err != nil {
		return 0, 0, err
	}
	kept, keepable = k.log.ProofTilesKept(info.Size)
	return kept, keepable, nil
}

// CheckpointAge is how long ago the published checkpoint was last written
// (for a log in a bucket: since this kernel saw it change).
func (k *Kernel) CheckpointAge() (time.Duration, error) {
	changed, err := k.log.CheckpointChangedAt(context.Background())
	if err != nil {
		return 0, err
	}
	return k.cfg.Now().Sub(changed), nil
}

// newEventID makes an event's ID: a UUIDv7 (uuid's clock, increasing
// within the process) whose random bits come from eventIDRandom.
func newEventID() (string, error) {
	id, err := uuid.NewV7FromReader(&eventIDRandom)
	if err != nil {
		return "", err
	}
	return id.String(), nil // lower-case hex already (TestEventIDsAreUniqueIncreasingV7)
}

// eventIDRandom is crypto/rand read 4 KiB at a time: one getrandom for
// hundreds of event IDs rather than one each, 0.6% of annald's CPU
// under load. An ID's random bits only make it unique, they guard no
// secret, and the IDs are public in the log anyway.
var eventIDRandom = lockedReader{r: bufio.NewReaderSize(rand.Reader, 4096)}

// lockedReader reads r whole (io.ReadFull) under a lock.
type lockedReader struct {
	mu sync.Mutex
	r  *bufio.Reader
}

func (l *lockedReader) Read(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return io.ReadFull(l.r, p)
}

// holdLoop times out overdue holds and ends elevations, quarantines,
// sessions and saga steps whose time has run out, once a second.
func (k *Kernel) holdLoop(stop <-chan struct{}) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			k.timeOutHolds(context.Background())
			k.expireControl(context.Background())
			k.expireRetention(context.Background())
		}
	}
}

// WitnessPolicy is the c2sp.org/tlog-policy the kernel's checkpoints are
// cosigned under (nil without witnesses).
func (k *Kernel) WitnessPolicy() []byte { return k.cfg.WitnessPolicy }
