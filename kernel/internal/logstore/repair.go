package logstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/annal-dev/annal/checkpoints"
	"github.com/transparency-dev/tessera/api"
	"github.com/transparency-dev/tessera/api/layout"
	"golang.org/x/mod/sumdb/note"
)

// LogRepair says what RepairLog mended.
type LogRepair struct {
	// TempFiles is how many temporary files of interrupted writes it removed.
	TempFiles int
	// Mended lists each file rewritten, and from what.
	Mended []string
	// Size is the log's size, every entry and tile of which now agrees
	// with the signed tree.
	Size uint64
}

// maxRepairs bounds the files one Repair rewrites: each is a damaged tile
// or checkpoint, re-derived and then checked again.
const maxRepairs = 64

// RepairLog mends what can be mended in the log of the data folder at
// dataDir without losing anything the log acknowledged, and refuses the
// rest: it removes the temporary files of interrupted writes; re-derives a
// damaged or missing hash tile from the entries (or tiles) below it,
// keeping it only if the tree then hashes to the signed root; and signs a
// new checkpoint of the tree state when the published one does not
// verify. A lost or changed entry, or a tree state that the entries do not
// hash to, cannot be mended from the folder: it says so, naming the file.
// The data folder must not be in use.
func RepairLog(ctx context.Context, dataDir string) (*LogRepair, error) {
	dir, err := OpenExistingDataDir(dataDir)
	if err != nil {
		return nil, err
	}
	defer dir.Close()
	signer, verifier, err := dir.LogKeys()
	if err != nil {
		return nil, err
	}
	report := &LogRepair{}
	if report.TempFiles, err = RemoveTempFiles(dir.LogPath()); err != nil {
		return nil, err
	}
	d := DiskLog{Root: dir.LogPath()}
	for range maxRepairs {
		c, err := d.checkWhole(ctx, verifier)
		var damage *DamageError
		switch {
		case err == nil:
			report.Size = c.Size
			return report, nil
		case !errors.As(err, &damage) || !damage.Repairable:
			return report, err
		}
		var mended string
		if damage.Tile != nil {
			mended, err = d.mendTile(ctx, verifier, damage, err)
		} else {
			mended, err = d.mendCheckpoint(ctx, dir.Origin, signer, verifier, damage)
		}
		if err != nil {
			return report, err
		}
		report.Mended = append(report.Mended, mended)
	}
	return report, fmt.Errorf("gave up after mending %d files", maxRepairs)
}

// checkWhole is the start-up check of the log's newest files, then the
// scrub of every entry and tile.
func (d DiskLog) checkWhole(ctx context.Context, verifier note.Verifier) (*LogCheck, error) {
	c, err := VerifyLogEdge(ctx, d.Root, verifier)
	if err == nil && c.Size > 0 {
		err = ScrubLog(ctx, d.Root, c.Size, c.Root)
	}
	return c, err
}

// mendTile derives the tile damage names again and says so, or puts it
// back and says why not (found is the error that named it).
func (d DiskLog) mendTile(ctx context.Context, verifier note.Verifier, damage *DamageError, found error) (string, error) {
	undo, err := d.rederiveTile(*damage.Tile)
	if err == nil {
		err = d.checkMended(ctx, verifier, damage.File)
	}
	if err != nil && undo != nil {
		// The entries below were the damaged side: keep the tile.
		err = errors.Join(found, err, undo())
	}
	if err != nil {
		return "", err
	}
	below := "tiles"
	if damage.Tile.Level == 0 {
		below = "entries"
	}
	return fmt.Sprintf("%s: derived again from the %s below it", damage.File, below), nil
}

// mendCheckpoint signs the tree state again in place of the checkpoint
// damage names, and says so.
func (d DiskLog) mendCheckpoint(ctx context.Context, origin string, signer note.Signer, verifier note.Verifier, damage *DamageError) (string, error) {
	if err := d.resignCheckpoint(ctx, origin, signer, verifier); err != nil {
		return "", err
	}
	return fmt.Sprintf("%s: signed again from the tree state (%s)", damage.File, damage.Problem), nil
}

// rederiveTile writes the tile t as the level below derives it, and
// returns how to put back what was there.
func (d DiskLog) rederiveTile(t TileRef) (undo func() error, err error) {
	nodes, err := d.DeriveTile(t.Level, t.Index, t.Width)
	if err != nil {
		return nil, err
	}
	raw, err := api.HashTile{Nodes: nodes}.MarshalText()
	if err != nil {
		return nil, err
	}
	p := d.Path(layout.TilePath(t.Level, t.Index, PartialWidth(t.Width)))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return nil, err
	}
	old, rerr := os.ReadFile(p)
	undo = func() error { return os.Remove(p) }
	if rerr == nil {
		undo = func() error { return WriteFileAtomic(p, old, 0o644) }
	}
	return undo, WriteFileAtomic(p, raw, 0o644)
}

// checkMended checks the log again after file was rewritten: it must be
// sound, or damaged only in another file that can be mended.
func (d DiskLog) checkMended(ctx context.Context, verifier note.Verifier, file string) error {
	_, err := d.checkWhole(ctx, verifier)
	var damage *DamageError
	if err == nil || (errors.As(err, &damage) && damage.Repairable && damage.File != file) {
		return nil
	}
	return err
}

// resignCheckpoint replaces a published checkpoint that does not verify
// with one of the tree state, signed by the log's key, once the tiles
// agree with the tree state. The bad one is kept beside it.
func (d DiskLog) resignCheckpoint(ctx context.Context, origin string, signer note.Signer, verifier note.Verifier) error {
	p := d.Path(CheckpointFileName)
	bad, err := os.ReadFile(p)
	if err != nil {
		return err
	}
	if err := WriteFileAtomic(p+".damaged", bad, 0o644); err != nil {
		return err
	}
	if err := os.Remove(p); err != nil {
		return err
	}
	c, err := VerifyLogEdge(ctx, d.Root, verifier)
	if err != nil {
		// Put it back: nothing is mended unless everything else agrees.
		return errors.Join(err, WriteFileAtomic(p, bad, 0o644))
	}
	cp := checkpoints.Checkpoint{Origin: origin, Size: c.Size, Hash: [32]byte(c.Root)}
	signed, err := checkpoints.SignCheckpoint(cp, signer)
	if err != nil {
		return err
	}
	if bytes.Equal(signed, bad) {
		return fmt.Errorf("%s: signing the tree state again gives the same checkpoint", p)
	}
	return WriteFileAtomic(p, signed, 0o644)
}

// VerifyFolder checks a data folder's log without changing anything (annald
// may be running on it): the start-up check of its newest files under the
// key in log.pub, then every entry and tile against the tree state's root,
// which the signed checkpoint's tree is a prefix of. It names the first
// damaged file.
func VerifyFolder(ctx context.Context, dataDir string) (size uint64, err error) {
	key, err := ReadVerifierKey(dataDir)
	if err != nil {
		return 0, err
	}
	v, err := checkpoints.NewLogVerifier(key)
	if err != nil {
		return 0, err
	}
	logPath := filepath.Join(dataDir, LogDirName)
	c, err := VerifyLogEdge(ctx, logPath, v)
	if err != nil {
		return 0, err
	}
	if c.Checkpoint == nil {
		return 0, fmt.Errorf("%s: no signed checkpoint yet", filepath.Join(logPath, CheckpointFileName))
	}
	if c.Size > 0 {
		if err := ScrubLog(ctx, logPath, c.Size, c.Root); err != nil {
			return 0, err
		}
	}
	return c.Size, nil
}

// ReadVerifierKey is the verifier key an annald data folder names for its
// log.
func ReadVerifierKey(dataDir string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dataDir, VerifierKeyName))
	if err != nil {
		return "", fmt.Errorf("read the log's verifier key: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}
