package kernel

import (
	"context"
	"fmt"

	"github.com/annal-dev/annal/kernel/internal/logstore"
)

// RepairReport says what Repair mended: the log's files (TempFiles,
// Mended, Size), then the state cache.
type RepairReport struct {
	logstore.LogRepair
	// State is what rebuilding the state cache found.
	State *RebuildReport
}

// Repair mends what can be mended in a data folder without losing anything
// the log acknowledged, and refuses the rest: it removes the temporary
// files of interrupted writes; re-derives a damaged or missing hash tile
// from the entries (or tiles) below it, keeping it only if the tree then
// hashes to the signed root; signs a new checkpoint of the tree state when
// the published one does not verify; and rebuilds the state cache from the
// log. A lost or changed entry, or a tree state that the entries do not
// hash to, cannot be mended from the folder: it says so, naming the file
// (restore the log folder from a backup). The data folder must not be in
// use.
func Repair(ctx context.Context, cfg Config) (*RepairReport, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	mended, err := logstore.RepairLog(ctx, cfg.DataDir)
	if mended == nil {
		return nil, err
	}
	report := &RepairReport{LogRepair: *mended}
	if err != nil {
		return report, err
	}
	// The log is sound: the state cache is rebuilt from it.
	if report.State, err = Rebuild(ctx, cfg); err != nil {
		return report, fmt.Errorf("rebuild the state cache: %w", err)
	}
	return report, nil
}

// VerifyFolder checks a data folder's log without changing anything (annald
// may be running on it): the start-up check of its newest files under the
// key in log.pub, then every entry and tile against the tree state's root,
// which the signed checkpoint's tree is a prefix of. It names the first
// damaged file.
func VerifyFolder(ctx context.Context, dataDir string) (size uint64, err error) {
	return logstore.VerifyFolder(ctx, dataDir)
}
