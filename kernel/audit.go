package kernel

import (
	"bytes"
	"context"
	"encoding/json"
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
	return client.FileFetcher{Root: filepath.Join(dataDir, logDirName)}
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
func LocalVerifierKey(dataDir string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dataDir, verifierKeyName))
	if err != nil {
		return "", fmt.Errorf("read the log's verifier key: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// AuditReport is what Audit found.
type AuditReport struct {
	Origin string `json:"origin"`
	// Size is the size of the signed checkpoint the audit covers: every
	// entry below it was read, hashed and checked against its root.
	Size uint64 `json:"size"`
	// Folded is how many entries replayed under the rules before the
	// first that breaks one (Size when none does).
	Folded uint64 `json:"folded"`
	// Rules is the rules version in force at the end of the replay.
	Rules int `json:"rules"`
	// Broken is the first entry that breaks a rule, if any.
	Broken *AuditFinding `json:"broken,omitempty"`
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
	SealedOpened uint64        `json:"sealed_opened,omitempty"`
	SealedClosed uint64        `json:"sealed_closed,omitempty"`
	Elapsed      time.Duration `json:"elapsed_ns"`
}

// AuditOption changes what Audit reads besides the log.
type AuditOption func(*auditConfig)

type auditConfig struct {
	sealed *sealedStore
}

// WithSealedPayloads has Audit read the sealed payloads an annald data
// folder still holds, so that it judges them by every rule.
func WithSealedPayloads(dataDir string) AuditOption {
	return func(c *auditConfig) { c.sealed = openSealedStore(dataDir) }
}

// AuditFinding is an entry and the rule it breaks.
type AuditFinding struct {
	Index  uint64 `json:"index"`
	Kind   string `json:"kind"`
	Actor  string `json:"actor"`
	Gate   string `json:"gate"`
	Reason string `json:"reason"`
}

func (f AuditFinding) String() string {
	return fmt.Sprintf("entry %d (%s by %s) breaks the %s rule: %s", f.Index, f.Kind, f.Actor, f.Gate, f.Reason)
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
	read := func(bundleIndex uint64) ([][]byte, error) {
		rawBundle, err := src.ReadEntryBundle(ctx, bundleIndex, layout.PartialTileSize(0, bundleIndex, cp.Size))
		if err != nil {
			return nil, fmt.Errorf("entry bundle %d: %w", bundleIndex, err)
		}
		var b api.EntryBundle
		if err := b.UnmarshalText(rawBundle); err != nil {
			return nil, fmt.Errorf("entry bundle %d: %w", bundleIndex, err)
		}
		return b.Entries, nil
	}
	stop := make(chan struct{})
	defer close(stop)
	for run := range parseAhead(0, cp.Size, read, stop) {
		if run.err != nil {
			return nil, run.err
		}
		for j, entry := range run.entries {
			i := run.from + uint64(j)
			if err := rng.Append(rfc6962.DefaultHasher.HashLeaf(entry), nil); err != nil {
				return nil, err
			}
			if rep.Broken != nil {
				continue // the root is still checked, so the break is in the signed log
			}
			ev, err := run.events[j], run.errs[j]
			if err != nil {
				rep.Broken = &AuditFinding{Index: i, Gate: GateForm, Reason: err.Error()}
				continue
			}
			var open func(*event.SealedPayload) (json.RawMessage, bool)
			if a := ev.Action; a != nil && a.Sealed != nil && ev.Kind != event.KindActionDenied {
				rep.SealedClosed++
				if cfg.sealed != nil {
					if _, payload, err := cfg.sealed.open(a.Sealed); err == nil {
						rep.SealedOpened++
						rep.SealedClosed--
						open = func(*event.SealedPayload) (json.RawMessage, bool) { return payload, true }
					}
				}
			}
			tolerated, err := l.FoldOpened(i, ev, open)
			if fe, ok := err.(*ledger.FoldError); ok {
				rep.Broken = &AuditFinding{Index: i, Kind: string(ev.Kind), Actor: ev.Actor, Gate: fe.Gate, Reason: fe.Reason}
				continue
			} else if err != nil {
				return nil, err
			}
			for _, t := range tolerated {
				if len(rep.Tolerated) < maxAuditFindings {
					rep.Tolerated = append(rep.Tolerated, AuditFinding{Index: i, Kind: string(ev.Kind), Actor: ev.Actor, Gate: t.Gate, Reason: t.Reason})
				}
			}
			rep.Folded++
		}
	}
	root, err := rng.GetRootHash(nil)
	if err != nil {
		return nil, err
	}
	if cp.Size > 0 && !bytes.Equal(root, cp.Hash[:]) {
		return nil, fmt.Errorf("the %d entries read hash to root %x, the signed checkpoint says %x: these tiles are not the log it signs", cp.Size, root, cp.Hash)
	}
	rep.Rules, rep.Elapsed = l.Rules, time.Since(start)
	for _, in := range l.Intents {
		rep.OpenIntents = append(rep.OpenIntents, in.Index)
	}
	slices.Sort(rep.OpenIntents)
	return rep, nil
}
