package kernel

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/annal-dev/annal/kernel/delta"
	"github.com/annal-dev/annal/kernel/event"
	"github.com/annal-dev/annal/kernel/internal/killswitch"
	"github.com/annal-dev/annal/kernel/internal/logstore"
	"github.com/annal-dev/annal/kernel/internal/ratelimit"
	"github.com/annal-dev/annal/kernel/ring"
	"github.com/transparency-dev/tessera"
	"go.opentelemetry.io/otel/trace"
)

// Defaults for Config. The batching defaults trade a little throughput for
// latency: a sequential client waits for its own batch to be written, so a
// short maximum age matters more than a large batch (see the README's
// benchmark notes for the figures behind them).
const (
	DefaultBatchMaxSize       = 512
	DefaultBatchMaxAge        = time.Millisecond
	DefaultCheckpointInterval = 200 * time.Millisecond
	// MinAWSCheckpointInterval is Tessera's least checkpoint interval on
	// its AWS driver.
	MinAWSCheckpointInterval = time.Second
	DefaultMaxOutstanding    = 8192
	DefaultFoldInterval      = time.Second
	DefaultMaxPendingHolds   = 16
	// DefaultGCInterval is how often Tessera removes the partial tiles and
	// entry bundles that full ones replaced. Each run removes at most ~100
	// bundles' worth (25,600 entries), so every 500 ms keeps up with 51,200
	// entries/s, well above the kernel's write rate; Tessera's own default
	// (one minute: 427 entries/s) let partials pile up at 20x the log's size.
	DefaultGCInterval = 500 * time.Millisecond
)

// RateLimit is one ring's token bucket (Execution Control §9.2): a rate
// per second and a burst.
type RateLimit = ratelimit.Limit

// DefaultRateLimits returns the per-ring limits of §9.2.
func DefaultRateLimits() map[ring.Ring]RateLimit { return ratelimit.DefaultLimits() }

// ValidateRateLimits checks per-ring limits as Open does.
func ValidateRateLimits(m map[ring.Ring]RateLimit) error { return ratelimit.ValidateLimits(m) }

// KillCallback asks an agent's runtime to stop the agent (§12).
type KillCallback = killswitch.Callback

// KillReason is one of §12.2's kill reasons.
type KillReason = killswitch.Reason

// Config configures a kernel. Start from DefaultConfig.
type Config struct {
	// DataDir is the data folder; it is created on first start.
	DataDir string
	// Storage is where the log lives: the zero Storage is the data folder
	// (POSIX); Storage.AWS puts it in a database and an S3 bucket.
	Storage Storage
	// Origin names the log on first start; "" generates one. A later start
	// with a different non-empty origin fails.
	Origin string
	// BatchMaxSize and BatchMaxAge are Tessera's batching: a batch is written
	// when it holds BatchMaxSize entries or its first entry is BatchMaxAge old.
	BatchMaxSize uint
	BatchMaxAge  time.Duration
	// CheckpointInterval is how often a new checkpoint is signed and published
	// (Tessera's POSIX driver allows no less than 100ms).
	CheckpointInterval time.Duration
	// GCInterval is how often Tessera removes partial tiles and entry
	// bundles that full ones replaced (DefaultGCInterval).
	GCInterval time.Duration
	// MaxOutstanding bounds entries in flight before Tessera pushes back,
	// and entries the write-ahead log holds ahead of the tiles.
	MaxOutstanding uint
	// DisableWriteAhead has a data folder's log answer only once Tessera has
	// written an entry into the tiles, as annald did before its write-ahead
	// log (kernel/internal/logstore, writeahead.go); entries a write-ahead log still holds are written
	// into the tiles first. A log in a database and bucket has none.
	DisableWriteAhead bool
	// FoldInterval is how often kernel state catches up with the log.
	FoldInterval time.Duration
	// Energy is the energy model written into the genesis event on first
	// start; a log keeps the model of its genesis for ever after.
	Energy event.EnergyConfig
	// StrictDenials records nothing for a denied action, as the paper's
	// INV-4 has it; by default a denial is a zero-cost action.denied event,
	// so that auditors see probing.
	StrictDenials bool
	// DisableProduction stops energy production: for tests and tools that
	// want a log without energy.produced events.
	DisableProduction bool
	// DisableScrub skips the background check of the whole log after
	// start (the start-up check of its newest files still runs).
	DisableScrub bool
	// MaxPendingHolds bounds the pending holds of one envelope (threat T2:
	// locking energy with holds).
	MaxPendingHolds int
	// DeltaRetention is how long a session delta's changes are kept
	// (§14.7, default 180 days): sealed beside the log, and erased by the
	// kernel when it ends, their hashes staying in the log for good.
	// 0 logs the changes themselves, kept for good.
	DeltaRetention time.Duration
	// WitnessPolicy, if set, is a c2sp.org/tlog-policy naming witnesses
	// (with URLs) and a quorum: every checkpoint is cosigned by a quorum
	// before it is published (Tessera's WithWitnesses), and published
	// checkpoints and tlog-proofs carry the cosignatures.
	WitnessPolicy []byte
	// WitnessTimeout bounds the wait for a quorum; without one the
	// checkpoint is not published (fail closed).
	WitnessTimeout time.Duration
	// RateLimits are the token buckets per ring (Execution Control §9.2);
	// nil means ratelimit.DefaultLimits. MaxRateBuckets bounds the buckets
	// (0: ratelimit.DefaultMaxBuckets). DisableRateLimit turns the gate off,
	// for tools that replay or load a log.
	RateLimits       map[ring.Ring]RateLimit
	MaxRateBuckets   int
	DisableRateLimit bool
	// RateClock is the rate limiter's monotonic clock (nil: time.Now,
	// whose readings carry Go's monotonic clock).
	RateClock func() time.Time
	// KillCallback, if set, is called when an agent is killed, to have the
	// agent's runtime stop it (§12); KillCallbackTimeout bounds it
	// (0: 5 s). Without one a kill still freezes the agent and revokes its
	// envelopes, and records terminated=false.
	KillCallback        KillCallback
	KillCallbackTimeout time.Duration
	// Tracer, if set, traces the stages of every decision (decide, append,
	// fold) as spans under the span in the request's context (tracing.go);
	// nil traces nothing and costs nothing.
	Tracer trace.Tracer
	// wrapAdd, if set, wraps Tessera's Add: tests use it to make appends
	// fail the way a full disk does.
	wrapAdd func(tessera.AddFn) tessera.AddFn
	// holdTiles, if set, keeps the write-ahead log's entries out of the
	// tiles until it is closed, and failTiles, if set, is asked before each
	// write of the tiles (landed false) and after it (landed true), and
	// fails it with its error: tests of the write-ahead log's crash and
	// failure paths use them.
	holdTiles <-chan struct{}
	failTiles func(landed bool) error
	// syncScrubEntries, if set, replaces ScrubAtStartEntries, for tests of
	// the background scrub.
	syncScrubEntries uint64
	// probeWrite, if set, replaces the resume loop's probe of the data
	// folder (probeWritable), for the same tests.
	probeWrite func() error
	// claimsOff has decisions take no claims, so that any two may be in
	// flight together: tests of the sequencer use it to show that it alone
	// keeps the log foldable.
	claimsOff bool
	// sequencerOff writes entries without the sequencer's check, as
	// releases before it did: with claimsOff, tests use it to have the
	// kernel meet an entry its fold refuses.
	sequencerOff bool
	// tolerate is annald tolerate's request (tolerate.go): Open passes
	// over its entries and records them in a log.tolerated entry.
	tolerate *tolerateRequest
	// Now is the kernel's clock.
	Now func() time.Time
	// Logger receives one structured line per notable event.
	Logger *slog.Logger
}

// DefaultConfig returns a Config with the documented defaults for dataDir.
func DefaultConfig(dataDir string) Config {
	return Config{
		DataDir:            dataDir,
		BatchMaxSize:       DefaultBatchMaxSize,
		BatchMaxAge:        DefaultBatchMaxAge,
		CheckpointInterval: DefaultCheckpointInterval,
		MaxOutstanding:     DefaultMaxOutstanding,
		GCInterval:         DefaultGCInterval,
		FoldInterval:       DefaultFoldInterval,
		Energy:             event.DefaultEnergy,
		MaxPendingHolds:    DefaultMaxPendingHolds,
		DeltaRetention:     delta.DefaultRetention,
		Now:                time.Now,
		Logger:             slog.Default(),
	}
}

// ScrubAtStartEntries is the largest log that Open reads whole before it
// serves (about 30 MB of entries, tens of milliseconds); a larger one is
// scrubbed in the background while it serves.
const ScrubAtStartEntries = 1 << 16

func (c Config) scrubAtStart() uint64 {
	if c.syncScrubEntries > 0 {
		return c.syncScrubEntries
	}
	return ScrubAtStartEntries
}

func (c Config) validate() error {
	if err := c.validateLog(); err != nil {
		return err
	}
	switch {
	case c.FoldInterval <= 0:
		return errors.New("config: fold interval must be positive")
	case c.MaxPendingHolds < 1:
		return errors.New("config: max pending holds must be at least 1")
	case c.Now == nil || c.Logger == nil:
		return errors.New("config: clock and logger must be set")
	case c.KillCallbackTimeout < 0:
		return errors.New("config: kill callback timeout must not be negative")
	case c.DeltaRetention != 0 && c.DeltaRetention < MinDeltaRetention:
		return fmt.Errorf("config: delta retention %v: 0 (kept for good) or at least %v", c.DeltaRetention, MinDeltaRetention)
	}
	if err := c.Energy.Validate(); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	if c.RateLimits != nil {
		if err := ratelimit.ValidateLimits(c.RateLimits); err != nil {
			return fmt.Errorf("config: rate limits: %w", err)
		}
	}
	return nil
}

// validateLog checks the settings of the log: where it is, and Tessera's.
func (c Config) validateLog() error {
	switch {
	case c.DataDir == "":
		return errors.New("config: data folder is not set")
	case c.BatchMaxSize == 0:
		return errors.New("config: batch size must be at least 1")
	case c.BatchMaxAge <= 0:
		return errors.New("config: batch age must be positive")
	case c.CheckpointInterval < 100*time.Millisecond:
		return fmt.Errorf("config: checkpoint interval %v is below Tessera's minimum of 100ms", c.CheckpointInterval)
	case !c.Storage.OnDisk() && c.CheckpointInterval < MinAWSCheckpointInterval:
		return fmt.Errorf("config: checkpoint interval %v is below Tessera's minimum of %v for a log in a bucket", c.CheckpointInterval, MinAWSCheckpointInterval)
	case c.GCInterval <= 0:
		return errors.New("config: the clean-up interval must be positive")
	case c.MaxOutstanding == 0:
		return errors.New("config: max outstanding must be at least 1")
	}
	return nil
}

// logOptions are the settings of the tile log under this Config.
func (c Config) logOptions() logstore.LogOptions {
	return logstore.LogOptions{
		Storage: c.Storage, BatchMaxSize: c.BatchMaxSize, BatchMaxAge: c.BatchMaxAge,
		CheckpointInterval: c.CheckpointInterval, GCInterval: c.GCInterval, MaxOutstanding: c.MaxOutstanding,
		WitnessPolicy: c.WitnessPolicy, WitnessTimeout: c.WitnessTimeout, Now: c.Now, Logger: c.Logger, WrapAdd: c.wrapAdd,
	}
}

// checkPolicyLog refuses a witness policy whose log lines name only other
// logs' keys: auditors check proofs against the same policy, and would
// refuse every checkpoint of this log. A policy without log lines (Tessera
// needs none) is accepted.
func checkPolicyLog(policy []byte, verifierKey string) error {
	var named []string
	for _, line := range strings.Split(string(policy), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == "log" {
			if f[1] == verifierKey {
				return nil
			}
			named = append(named, f[1])
		}
	}
	if len(named) == 0 {
		return nil
	}
	return fmt.Errorf("%w: the witness policy names the log key %s, but this log's key is %s: verifiers using the policy would refuse every checkpoint",
		ErrInvalid, strings.Join(named, ", "), verifierKey)
}
