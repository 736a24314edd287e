package kernel

import (
	"context"

	"github.com/annal-dev/annal/kernel/internal/history"
	"github.com/annal-dev/annal/kernel/internal/logstore"
)

// Auditing a log from outside the kernel: the replay of a log under the
// rules, checked against its signed checkpoint (kernel/internal/history,
// audit.go, holds how).
type (
	// LogSource is where Audit reads a log: its signed checkpoint and its
	// entry bundles, as c2sp.org/tlog-tiles lays them out. Tessera's
	// client fetchers are LogSources.
	LogSource = history.LogSource
	// AuditReport is what Audit found.
	AuditReport = history.AuditReport
	// AuditFinding is an entry and the rule it breaks.
	AuditFinding = history.AuditFinding
	// AuditOption changes what Audit reads besides the log.
	AuditOption = history.AuditOption
)

// Audit reads the log from src up to its latest signed checkpoint, which
// must verify under verifierKey, replays every entry under the rules a
// fresh kernel enforces, and checks that the entries hash to the
// checkpoint's root. It names the first entry that breaks a rule
// (Broken); an error means the log could not be read or is not the one
// the checkpoint signs. It changes nothing anywhere.
func Audit(ctx context.Context, src LogSource, verifierKey string, opts ...AuditOption) (*AuditReport, error) {
	return history.Audit(ctx, src, verifierKey, opts...)
}

// LocalLog is the log of an annald data folder, read from its tiles on
// disk. The kernel need not be stopped: the audit covers the checkpoint it
// reads first.
func LocalLog(dataDir string) LogSource { return history.LocalLog(dataDir) }

// RemoteLog is a log served as tlog-tiles at a URL (annald serves its log
// at its root URL; any static copy of the tiles will do).
func RemoteLog(root string) (LogSource, error) { return history.RemoteLog(root) }

// LocalVerifierKey is the verifier key an annald data folder names for
// its log.
func LocalVerifierKey(dataDir string) (string, error) { return logstore.ReadVerifierKey(dataDir) }

// WithUnsignedTail has Audit go on past the signed checkpoint with what the
// data folder at dataDir holds beyond it (its tiles, then its write-ahead
// log), replayed under the same rules; no signature covers them yet.
func WithUnsignedTail(dataDir string) AuditOption { return history.WithUnsignedTail(dataDir) }

// WithSealedPayloads has Audit read the sealed payloads an annald data
// folder still holds, so that it judges them by every rule.
func WithSealedPayloads(dataDir string) AuditOption { return history.WithSealedPayloads(dataDir) }
