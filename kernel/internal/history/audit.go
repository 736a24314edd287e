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
	WALTornTail string `json:"wal_torn_tail,omitempty"`
	// SignaturesAhead counts the signed entries under the checkpoint
	// whose signature was verified on all cores ahead of the replay (it
	// verifies any other itself).
	SignaturesAhead uint64        `json:"signatures_ahead,omitempty"`
	Elapsed         time.Duration `json:"elapsed_ns"`
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
	cp, err := readSignedCheckpoint(ctx, src, verifierKey)
	if err != nil {
		return nil, err
	}
	a := &auditReplay{
		ctx:    ctx,
		ledger: ledger.New(),
		rng:    (&compact.RangeFactory{Hash: rfc6962.DefaultHasher.HashChildren}).NewEmptyRange(0),
		rep:    &AuditReport{Origin: cp.Origin, Size: cp.Size},
		sealed: cfg.sealed,
		read:   func(bundleIndex uint64) ([][]byte, error) { return readBundle(ctx, src, bundleIndex, cp.Size) },
		size:   cp.Size,
	}
	if err := a.replaySigned(cp); err != nil {
		return nil, err
	}
	if cfg.tailDir != "" && a.rep.Broken == nil {
		if err := a.replayUnsignedTail(cfg.tailDir, src, cp.Origin); err != nil {
			return nil, err
		}
	}
	rep := a.rep
	rep.Rules, rep.Elapsed = a.ledger.Rules, time.Since(start)
	rep.Accepted = Tolerated(a.ledger)
	for _, in := range a.ledger.Intents {
		rep.OpenIntents = append(rep.OpenIntents, in.Index)
	}
	slices.Sort(rep.OpenIntents)
	return rep, nil
}

// readSignedCheckpoint reads src's checkpoint and verifies it with
// verifierKey.
func readSignedCheckpoint(ctx context.Context, src LogSource, verifierKey string) (*checkpoints.SignedCheckpoint, error) {
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
	return cp, nil
}

// auditReplay is one audit's replay: the fresh ledger the entries fold
// into, the compact range their leaves hash into, and the report.
type auditReplay struct {
	ctx    context.Context
	ledger *ledger.Ledger
	rng    *compact.Range
	rep    *AuditReport
	sealed *sealstore.Store // nil: every sealed payload is judged closed
	// read reads an entry bundle of the signed log, and size is its size:
	// where a log.tolerated entry that accepts a broken one may be.
	read func(bundleIndex uint64) ([][]byte, error)
	size uint64
}

// replaySigned replays the entries under the signed checkpoint cp, parsed
// on all cores, and checks that they hash to its root.
func (a *auditReplay) replaySigned(cp *checkpoints.SignedCheckpoint) error {
	stop := make(chan struct{})
	defer close(stop)
	var at foldCursor
	defer at.verifyAheadFor(a.ledger)()
	defer func() { a.rep.SignaturesAhead = at.ahead }()
	for run := range parseAhead(0, cp.Size, a.read, stop, parseWork{leaves: true, origin: cp.Origin}) {
		if run.err != nil {
			return run.err
		}
		for j, entry := range run.entries {
			at.run, at.j = &run, j
			if err := a.add(run.from+uint64(j), entry, run.leaves[j], run.events[j], run.errs[j], false); err != nil {
				return err
			}
		}
	}
	root, err := a.rng.GetRootHash(nil)
	if err != nil {
		return err
	}
	if cp.Size > 0 && !bytes.Equal(root, cp.Hash[:]) {
		return fmt.Errorf("the %d entries read hash to root %x, the signed checkpoint says %x: these tiles are not the log it signs", cp.Size, root, cp.Hash)
	}
	return nil
}

// addUnsigned parses and replays entry i, past the signed checkpoint.
func (a *auditReplay) addUnsigned(i uint64, entry []byte) error {
	ev, perr := event.Parse(entry)
	if err := a.add(i, entry, event.LeafHash(entry), ev, perr, true); err != nil {
		return err
	}
	a.rep.Unsigned++
	return nil
}

// add appends entry i's leaf hash to the range and replays the entry (ev,
// or the parse error perr) under the rules.
func (a *auditReplay) add(i uint64, entry []byte, leaf [32]byte, ev *event.Event, perr error, unsigned bool) error {
	if err := a.rng.Append(leaf[:], nil); err != nil {
		return err
	}
	return a.fold(i, entry, ev, perr, unsigned)
}

// fold replays entry i under the rules. After the first break nothing
// more is replayed, but every leaf is still hashed: the root check then
// shows that the break is in the log the checkpoint signs.
func (a *auditReplay) fold(i uint64, entry []byte, ev *event.Event, perr error, unsigned bool) error {
	if a.rep.Broken != nil {
		return nil
	}
	if perr != nil {
		a.rep.Broken = &AuditFinding{Index: i, Gate: ledger.GateForm, Reason: perr.Error(), Unsigned: unsigned}
		return nil
	}
	tolerated, err := a.ledger.FoldOpened(i, ev, a.opener(ev))
	if fe, ok := err.(*ledger.FoldError); ok {
		return a.refused(i, ev, entry, fe, unsigned)
	} else if err != nil {
		return err
	}
	for _, t := range tolerated {
		if len(a.rep.Tolerated) < maxAuditFindings {
			a.rep.Tolerated = append(a.rep.Tolerated, AuditFinding{Index: i, Kind: string(ev.Kind), Actor: ev.Actor, Gate: t.Gate, Reason: t.Reason, Unsigned: unsigned})
		}
	}
	a.rep.Folded++
	return nil
}

// opener opens the sealed payload of ev's action for the fold, from the
// data folder's sealed payloads, and counts it opened or closed; nil when
// ev carries none or it cannot be opened (the rules that read it are then
// taken as decided).
func (a *auditReplay) opener(ev *event.Event) func(*event.SealedPayload) (json.RawMessage, bool) {
	act := ev.Action
	if act == nil || act.Sealed == nil || ev.Kind == event.KindActionDenied {
		return nil
	}
	if a.sealed != nil {
		if _, payload, err := a.sealed.Open(act.Sealed); err == nil {
			a.rep.SealedOpened++
			return func(*event.SealedPayload) (json.RawMessage, bool) { return payload, true }
		}
	}
	a.rep.SealedClosed++
	return nil
}

// refused handles entry i, which breaks a rule (fe): in the signed log, one
// that a log.tolerated entry under the checkpoint names is passed over;
// any other is the break the report names.
func (a *auditReplay) refused(i uint64, ev *event.Event, entry []byte, fe *ledger.FoldError, unsigned bool) error {
	if !unsigned {
		switch perr := passOver(a.ctx, a.ledger, i, ev, entry, fe, a.read, a.size, nil); {
		case perr == nil:
			a.rep.Folded++
			return nil
		case !errors.As(perr, new(*RefusedEntryError)):
			return perr
		}
	}
	a.rep.Broken = &AuditFinding{Index: i, Kind: string(ev.Kind), Actor: ev.Actor, Gate: fe.Gate, Reason: fe.Reason, Unsigned: unsigned}
	return nil
}

// replayUnsignedTail replays, after the signed checkpoint's entries, what
// the data folder at dir holds past them (WithUnsignedTail): the entries
// of its tiles up to their tree state, checked against its root, then the
// write-ahead log's entries past that.
func (a *auditReplay) replayUnsignedTail(dir string, src LogSource, origin string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	unlock, err := logstore.LockDir(abs)
	if errors.Is(err, logstore.ErrDataDirInUse) {
		a.rep.UnsignedSkipped = "annald is running on the data folder: it writes the entries past the checkpoint into the tiles and signs them"
		return nil
	} else if err != nil {
		return err
	}
	defer unlock()
	treeSize, err := a.replayUnsignedTiles(src, filepath.Join(abs, logstore.LogDirName))
	if err != nil {
		return err
	}
	return a.replayWriteAhead(filepath.Join(abs, logstore.WALDirName), origin, treeSize)
}

// replayUnsignedTiles replays the entries of the tiles at logDir past the
// signed checkpoint, up to their tree state, whose root they must hash to,
// and returns its size.
func (a *auditReplay) replayUnsignedTiles(src LogSource, logDir string) (treeSize uint64, err error) {
	treeSize, treeRoot, err := tilewriter.ReadTreeState(logDir)
	if err != nil {
		return 0, err
	}
	size := a.size
	if treeSize < size {
		return 0, fmt.Errorf("the tiles' tree state holds %d entries, fewer than the signed checkpoint's %d", treeSize, size)
	}
	for b := size / layout.EntryBundleWidth; size < treeSize; b++ {
		entries, err := readBundle(a.ctx, src, b, treeSize)
		if err != nil {
			return 0, err
		}
		first := b * layout.EntryBundleWidth
		if first+uint64(len(entries)) <= size {
			return 0, fmt.Errorf("entry bundle %d holds %d entries, none past %d, yet the tree state holds %d", b, len(entries), size, treeSize)
		}
		for j, entry := range entries {
			if i := first + uint64(j); i >= size {
				if err := a.addUnsigned(i, entry); err != nil {
					return 0, err
				}
				size++
			}
		}
	}
	if root, err := a.rng.GetRootHash(nil); err != nil {
		return 0, err
	} else if treeSize > 0 && !bytes.Equal(root, treeRoot) {
		return 0, fmt.Errorf("the %d entries of the tiles hash to root %x, their tree state says %x", treeSize, root, treeRoot)
	}
	return treeSize, nil
}

// replayWriteAhead replays the entries of the write-ahead log at walDir
// past the tiles' treeSize, if the data folder has one, and notes the torn
// tail a crash left in it.
func (a *auditReplay) replayWriteAhead(walDir, origin string, treeSize uint64) error {
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
		a.rep.WALTornTail = fmt.Sprintf("%d bytes at offset %d of %s: %s", info.TornBytes, info.TornOffset, info.TornFile, info.TornReason)
	}
	for _, r := range records {
		if err := a.addUnsigned(r.Index, r.Entry); err != nil {
			return err
		}
		a.rep.UnsignedInWAL++
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
