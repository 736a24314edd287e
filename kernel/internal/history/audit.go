package history

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/annal-dev/annal/checkpoints"
	"github.com/annal-dev/annal/kernel/event"
	"github.com/annal-dev/annal/kernel/internal/ledger"
	"github.com/annal-dev/annal/kernel/internal/logstore"
	"github.com/annal-dev/annal/kernel/internal/sealstore"
	"github.com/annal-dev/annal/kernel/internal/tilewriter"
	"github.com/annal-dev/annal/kernel/internal/wal"
	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/rfc6962"
	"github.com/transparency-dev/tessera/api"
	"github.com/transparency-dev/tessera/api/layout"
	"github.com/transparency-dev/tessera/client"
)

// LogSource is where Audit reads a log: its signed checkpoint and its entry
// bundles, as c2sp.org/tlog-tiles lays them out. Tessera's client fetchers
// are LogSources.
type LogSource interface {
	ReadCheckpoint(ctx context.Context) ([]byte, error)
	ReadEntryBundle(ctx context.Context, index uint64, p uint8) ([]byte, error)
}

// LocalLog is the log of an annald data folder, read from its tiles on
// disk. The kernel need not be stopped: the audit covers the checkpoint it
// reads first.
func LocalLog(dataDir string) LogSource {
	return client.FileFetcher{Root: filepath.Join(dataDir, logstore.LogDirName)}
}

// RemoteLog is a log served as tlog-tiles at a URL (annald serves its log
// at its root URL; any static copy of the tiles will do).
func RemoteLog(root string) (LogSource, error) {
	u, err := url.Parse(root)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%q is not an http(s) URL", root)
	}
	if !strings.HasSuffix(u.Path, "/") {
		u.Path += "/"
	}
	return client.NewHTTPFetcher(u, &http.Client{Timeout: time.Minute})
}

// LocalVerifierKey is the verifier key an annald data folder names for
// its log.
func LocalVerifierKey(dataDir string) (string, error) { return logstore.ReadVerifierKey(dataDir) }

// AuditReport is what Audit found.
type AuditReport struct {
	Origin string `json:"origin"`
	// Size is the size of the signed checkpoint the audit covers: every
	// entry below it was read, hashed and checked against its root.
	Size uint64 `json:"size"`
	// Folded is how many entries replayed under the rules before the
	// first that breaks one (Size + Unsigned when none does).
	Folded uint64 `json:"folded"`
	// Rules is the rules version in force at the end of the replay.
	Rules int `json:"rules"`
	// Broken is the first entry that breaks a rule, if any.
	Broken *AuditFinding `json:"broken,omitempty"`
	// Accepted are the entries that break a rule and that root accepted
	// (annald tolerate): each names the log.tolerated entry that accepts it
	// and the operator's reason. The replay passed over them.
	Accepted []ToleratedEntry `json:"accepted,omitempty"`
	// Tolerated are entries written under older rules that break a rule
	// of a later version the log had not adopted yet.
	Tolerated []AuditFinding `json:"tolerated,omitempty"`
	// OpenIntents are the execute intents with no result at the end of
	// the replay, by log index: calls that were allowed and whose outcome
	// was never recorded (or is still running).
	OpenIntents []uint64 `json:"open_intents,omitempty"`
	// SealedOpened counts the sealed payloads the audit read from the data
	// folder and judged by every rule; SealedClosed those it judged
	// without their payload (erased, or an audit from tiles alone): the
	// rules that read payloads (policy patterns) were taken as decided.
	SealedOpened uint64 `json:"sealed_opened,omitempty"`
	SealedClosed uint64 `json:"sealed_closed,omitempty"`
	// Unsigned counts the entries past the signed checkpoint that were
	// replayed from the data folder (WithUnsignedTail), UnsignedInWAL of
	// them only in its write-ahead log; UnsignedSkipped says why they
	// were not read, if they were not.
	Unsigned        uint64 `json:"unsigned,omitempty"`
	UnsignedInWAL   uint64 `json:"unsigned_in_wal,omitempty"`
	UnsignedSkipped string `json:"unsigned_skipped,omitempty"`
	// WALTornTail describes the bytes at the end of the write-ahead log
	// that a crash during a write left (never acknowledged): not replayed,
	// and cut by the next start. Empty when there are none.
	WALTornTail string        `json:"wal_torn_tail,omitempty"`
	Elapsed     time.Duration `json:"elapsed_ns"`
}

// AuditOption changes what Audit reads besides the log.
type AuditOption func(*auditConfig)

type auditConfig struct {
	sealed *sealstore.Store
	// tailDir: replay what this data folder holds past the checkpoint.
	tailDir string
}

// WithUnsignedTail has Audit go on past the signed checkpoint with what the
// data folder at dataDir holds beyond it: the entries in its tiles that no
// checkpoint covers yet, then those only in its write-ahead log (answered,
// and written into the tiles at the next start or annald rebuild). They are
// replayed under the same rules and hashed on, and the tiles' part is
// checked against the tree state they record; no signature covers them
// yet. While annald runs on the folder they are not read: it writes them
// into the tiles itself, and the report says so.
func WithUnsignedTail(dataDir string) AuditOption {
	return func(c *auditConfig) { c.tailDir = dataDir }
}

// WithSealedPayloads has Audit read the sealed payloads an annald data
// folder still holds, so that it judges them by every rule.
func WithSealedPayloads(dataDir string) AuditOption {
	return func(c *auditConfig) { c.sealed = sealstore.Open(dataDir) }
}

// AuditFinding is an entry and the rule it breaks.
type AuditFinding struct {
	Index  uint64 `json:"index"`
	Kind   string `json:"kind"`
	Actor  string `json:"actor"`
	Gate   string `json:"gate"`
	Reason string `json:"reason"`
	// Unsigned: the entry is past the signed checkpoint (WithUnsignedTail).
	Unsigned bool `json:"unsigned,omitempty"`
}

func (f AuditFinding) String() string {
	where := ""
	if f.Unsigned {
		where = ", past the signed checkpoint"
	}
	return fmt.Sprintf("entry %d (%s by %s%s) breaks the %s rule: %s", f.Index, f.Kind, f.Actor, where, f.Gate, f.Reason)
}

// maxAuditFindings bounds the tolerated findings a report lists.
const maxAuditFindings = 1000

// Audit replays a log under the rules, from its tiles alone: it verifies
// the signed checkpoint with verifierKey, reads every entry below it,
// parses each strictly, folds it into a fresh ledger, and checks that the
// entries hash to the checkpoint's root. It names the first entry that
// breaks a rule (Broken); an error means the log could not be read or is
// not the one the checkpoint signs. It changes nothing anywhere.
func Audit(ctx context.Context, src LogSource, verifierKey string, opts ...AuditOption) (*AuditReport, error) {
	start := time.Now()
	var cfg auditConfig
	for _, o := range opts {
		o(&cfg)
	}
	v, err := checkpoints.NewLogVerifier(verifierKey)
	if err != nil {
		return nil, fmt.Errorf("verifier key: %w", err)
	}
	raw, err := src.ReadCheckpoint(ctx)
	if err != nil {
		return nil, fmt.Errorf("read checkpoint: %w", err)
	}
	cp, err := checkpoints.OpenCheckpoint(raw, v)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	rep := &AuditReport{Origin: cp.Origin, Size: cp.Size}
	l := ledger.New()
	rng := (&compact.RangeFactory{Hash: rfc6962.DefaultHasher.HashChildren}).NewEmptyRange(0)
	read := func(bundleIndex uint64) ([][]byte, error) { return readBundle(ctx, src, bundleIndex, cp.Size) }
	// fold replays entry i (ev, or the parse error err) under the rules,
	// once its leaf is hashed into rng. An entry that breaks a rule and
	// that a log.tolerated entry under the checkpoint names is passed over.
	fold := func(i uint64, entry []byte, ev *event.Event, err error, unsigned bool) error {
		if rep.Broken != nil {
			return nil // the root is still checked, so the break is in the signed log
		}
		if err != nil {
			rep.Broken = &AuditFinding{Index: i, Gate: ledger.GateForm, Reason: err.Error(), Unsigned: unsigned}
			return nil
		}
		var open func(*event.SealedPayload) (json.RawMessage, bool)
		if a := ev.Action; a != nil && a.Sealed != nil && ev.Kind != event.KindActionDenied {
			rep.SealedClosed++
			if cfg.sealed != nil {
				if _, payload, err := cfg.sealed.Open(a.Sealed); err == nil {
					rep.SealedOpened++
					rep.SealedClosed--
					open = func(*event.SealedPayload) (json.RawMessage, bool) { return payload, true }
				}
			}
		}
		tolerated, err := l.FoldOpened(i, ev, open)
		if fe, ok := err.(*ledger.FoldError); ok && !unsigned {
			switch perr := passOver(ctx, l, i, ev, entry, err, read, cp.Size, nil); {
			case perr == nil:
				rep.Folded++
				return nil
			case !errors.As(perr, new(*RefusedEntryError)):
				return perr
			}
			rep.Broken = &AuditFinding{Index: i, Kind: string(ev.Kind), Actor: ev.Actor, Gate: fe.Gate, Reason: fe.Reason}
			return nil
		} else if fe, ok := err.(*ledger.FoldError); ok {
			rep.Broken = &AuditFinding{Index: i, Kind: string(ev.Kind), Actor: ev.Actor, Gate: fe.Gate, Reason: fe.Reason, Unsigned: unsigned}
			return nil
		} else if err != nil {
			return err
		}
		for _, t := range tolerated {
			if len(rep.Tolerated) < maxAuditFindings {
				rep.Tolerated = append(rep.Tolerated, AuditFinding{Index: i, Kind: string(ev.Kind), Actor: ev.Actor, Gate: t.Gate, Reason: t.Reason, Unsigned: unsigned})
			}
		}
		rep.Folded++
		return nil
	}
	stop := make(chan struct{})
	defer close(stop)
	for run := range parseAhead(0, cp.Size, read, stop) {
		if run.err != nil {
			return nil, run.err
		}
		for j, entry := range run.entries {
			if err := rng.Append(rfc6962.DefaultHasher.HashLeaf(entry), nil); err != nil {
				return nil, err
			}
			if err := fold(run.from+uint64(j), entry, run.events[j], run.errs[j], false); err != nil {
				return nil, err
			}
		}
	}
	root, err := rng.GetRootHash(nil)
	if err != nil {
		return nil, err
	}
	if cp.Size > 0 && !bytes.Equal(root, cp.Hash[:]) {
		return nil, fmt.Errorf("the %d entries read hash to root %x, the signed checkpoint says %x: these tiles are not the log it signs", cp.Size, root, cp.Hash)
	}
	if cfg.tailDir != "" && rep.Broken == nil {
		if err := auditUnsignedTail(ctx, cfg.tailDir, src, cp.Origin, cp.Size, rng, fold, rep); err != nil {
			return nil, err
		}
	}
	rep.Rules, rep.Elapsed = l.Rules, time.Since(start)
	rep.Accepted = Tolerated(l)
	for _, in := range l.Intents {
		rep.OpenIntents = append(rep.OpenIntents, in.Index)
	}
	slices.Sort(rep.OpenIntents)
	return rep, nil
}

// auditUnsignedTail replays, after the signed checkpoint's size entries,
// what the data folder at dir holds past them (WithUnsignedTail): the
// entries of its tiles up to their tree state, checked against its root,
// then the write-ahead log's entries past that.
func auditUnsignedTail(ctx context.Context, dir string, src LogSource, origin string, size uint64, rng *compact.Range,
	fold func(i uint64, entry []byte, ev *event.Event, err error, unsigned bool) error, rep *AuditReport) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	unlock, err := logstore.LockDir(abs)
	if errors.Is(err, logstore.ErrDataDirInUse) {
		rep.UnsignedSkipped = "annald is running on the data folder: it writes the entries past the checkpoint into the tiles and signs them"
		return nil
	} else if err != nil {
		return err
	}
	defer unlock()
	treeSize, treeRoot, err := tilewriter.ReadTreeState(filepath.Join(abs, logstore.LogDirName))
	if err != nil {
		return err
	}
	if treeSize < size {
		return fmt.Errorf("the tiles' tree state holds %d entries, fewer than the signed checkpoint's %d", treeSize, size)
	}
	for b := size / layout.EntryBundleWidth; size < treeSize; b++ {
		entries, err := readBundle(ctx, src, b, treeSize)
		if err != nil {
			return err
		}
		if b*layout.EntryBundleWidth+uint64(len(entries)) <= size {
			return fmt.Errorf("entry bundle %d holds %d entries, none past %d, yet the tree state holds %d", b, len(entries), size, treeSize)
		}
		for j, entry := range entries {
			i := b*layout.EntryBundleWidth + uint64(j)
			if i < size {
				continue
			}
			if err := rng.Append(rfc6962.DefaultHasher.HashLeaf(entry), nil); err != nil {
				return err
			}
			ev, perr := event.Parse(entry)
			if err := fold(i, entry, ev, perr, true); err != nil {
				return err
			}
			rep.Unsigned++
			size++
		}
	}
	if root, err := rng.GetRootHash(nil); err != nil {
		return err
	} else if treeSize > 0 && !bytes.Equal(root, treeRoot) {
		return fmt.Errorf("the %d entries of the tiles hash to root %x, their tree state says %x", treeSize, root, treeRoot)
	}
	walDir := filepath.Join(abs, logstore.WALDirName)
	if _, err := os.Stat(walDir); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if _, err := logstore.CheckWriteAheadOrigin(walDir, origin); err != nil {
		return err
	}
	records, info, err := wal.Read(walDir, treeSize)
	if err != nil {
		return logstore.WriteAheadError(err, treeSize)
	}
	if info.TornBytes > 0 {
		rep.WALTornTail = fmt.Sprintf("%d bytes at offset %d of %s: %s", info.TornBytes, info.TornOffset, info.TornFile, info.TornReason)
	}
	for _, r := range records {
		if err := rng.Append(rfc6962.DefaultHasher.HashLeaf(r.Entry), nil); err != nil {
			return err
		}
		ev, perr := event.Parse(r.Entry)
		if err := fold(r.Index, r.Entry, ev, perr, true); err != nil {
			return err
		}
		rep.Unsigned++
		rep.UnsignedInWAL++
	}
	return nil
}

// readBundle reads entry bundle index of a log of size entries from src.
func readBundle(ctx context.Context, src LogSource, index, size uint64) ([][]byte, error) {
	raw, err := src.ReadEntryBundle(ctx, index, layout.PartialTileSize(0, index, size))
	if err != nil {
		return nil, fmt.Errorf("entry bundle %d: %w", index, err)
	}
	var b api.EntryBundle
	if err := b.UnmarshalText(raw); err != nil {
		return nil, fmt.Errorf("entry bundle %d: %w", index, err)
	}
	return b.Entries, nil
}
