package logstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"time"

	"github.com/annal-dev/annal/checkpoints"
	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
	"github.com/transparency-dev/tessera/api"
	"github.com/transparency-dev/tessera/api/layout"
	"github.com/transparency-dev/tessera/client"
	"golang.org/x/mod/sumdb/note"
)

// DamageError is a log or state file that is not what it must be. It names
// the file, what is wrong with it, and what the operator can do.
type DamageError struct {
	File    string
	Problem string
	Remedy  string
	// Repairable is set when annald repair can mend it from the rest of the
	// data folder without losing anything the log acknowledged.
	Repairable bool
	// Tile is the damaged hash Tile, when it is one.
	Tile *TileRef
}

// TileRef names a hash tile: its level, index and width in nodes.
type TileRef struct {
	Level, Index uint64
	Width        int
}

func (e *DamageError) Error() string {
	return fmt.Sprintf("%s: %s; %s", e.File, e.Problem, e.Remedy)
}

// ErrDamaged matches every *DamageError.
var ErrDamaged = errors.New("data folder damaged")

func (e *DamageError) Is(target error) bool { return target == ErrDamaged }

const (
	remedyBackup = "no copy of what was lost is left in the data folder: stop annald and restore the log folder from a backup (annald verify shows every damaged file)"
	remedyRepair = "annald repair re-derives it from the rest of the log and checks the result against the signed tree"
)

// DiskLog is the read-only view of a data folder's Tessera POSIX log, with
// the file paths that the start-up check and the scrub name.
type DiskLog struct {
	Root string
}

func (d DiskLog) Path(rel string) string { return filepath.Join(d.Root, rel) }

// TreeState is what Tessera's POSIX driver has integrated: its private
// .state/TreeState file, written last in every batch.
func (d DiskLog) TreeState() (size uint64, root []byte, err error) {
	p := d.Path(TreeStatePath)
	raw, err := os.ReadFile(p)
	if err != nil {
		return 0, nil, err
	}
	var ts struct {
		Size uint64 `json:"size"`
		Root []byte `json:"root"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&ts); err != nil || dec.More() || len(ts.Root) != rfc6962.DefaultHasher.Size() {
		return 0, nil, &DamageError{File: p, Problem: fmt.Sprintf("not a tree state (%d bytes)", len(raw)), Remedy: remedyBackup}
	}
	return ts.Size, ts.Root, nil
}

// bundle reads the entry bundle of index holding want entries (its partial
// file, or the full one once the partial has been collected).
func (d DiskLog) bundle(index uint64, want int) ([][]byte, error) {
	raw, file, err := d.read(layout.EntriesPath(index, PartialWidth(want)), layout.EntriesPath(index, 0))
	if err != nil {
		return nil, err
	}
	var b api.EntryBundle
	if err := b.UnmarshalText(raw); err != nil || len(b.Entries) < want {
		return nil, &DamageError{File: file, Problem: fmt.Sprintf("entry bundle %d does not hold the %d entries that the tree state (%s) counts in it (%d bytes)", index, want, d.Path(TreeStatePath), len(raw)), Remedy: remedyBackup}
	}
	return b.Entries[:want], nil
}

// Tile reads the hash Tile at level, index holding width nodes.
func (d DiskLog) Tile(level, index uint64, width int) ([][]byte, string, error) {
	rel := layout.TilePath(level, index, PartialWidth(width))
	raw, file, err := d.read(rel, layout.TilePath(level, index, 0))
	var missing *DamageError
	if errors.As(err, &missing) {
		// A tile holds nothing its entries do not: it can be derived again.
		missing.File, missing.Remedy, missing.Repairable, missing.Tile = d.Path(rel), remedyRepair, true, &TileRef{level, index, width}
	}
	if err != nil {
		return nil, d.Path(rel), err
	}
	var t api.HashTile
	if err := t.UnmarshalText(raw); err != nil || len(t.Nodes) < width {
		return nil, file, &DamageError{File: file, Problem: fmt.Sprintf("hash tile holds %d bytes, want %d hashes", len(raw), width), Remedy: remedyRepair, Repairable: true,
			Tile: &TileRef{level, index, width}}
	}
	return t.Nodes[:width], file, nil
}

// read reads rel, or full when rel is a partial that no longer exists.
func (d DiskLog) read(rel, full string) ([]byte, string, error) {
	raw, err := os.ReadFile(d.Path(rel))
	if errors.Is(err, fs.ErrNotExist) && rel != full {
		rel = full
		raw, err = os.ReadFile(d.Path(rel))
	}
	if errors.Is(err, fs.ErrNotExist) {
		return nil, d.Path(rel), &DamageError{File: d.Path(rel), Problem: "missing", Remedy: remedyBackup}
	}
	return raw, d.Path(rel), err
}

func (d DiskLog) readTile(_ context.Context, level, index uint64, p uint8) ([]byte, error) {
	return client.FileFetcher{Root: d.Root}.ReadTile(context.Background(), level, index, p)
}

// PartialWidth is the tlog-tiles partial width of a tile of n nodes (0: full).
func PartialWidth(n int) uint8 { return uint8(n % layout.TileWidth) }

// rightEdge is the newest tile at each level of a tree of size leaves:
// its index and how many nodes it holds.
func rightEdge(size uint64) (edge []struct {
	index uint64
	width int
}) {
	for nodes := size; nodes > 0; nodes >>= layout.TileHeight {
		last := (nodes - 1) / layout.TileWidth
		edge = append(edge, struct {
			index uint64
			width int
		}{last, int(nodes - last*layout.TileWidth)})
	}
	return edge
}

// DeriveTile computes the tile at level, index of width nodes from what is
// below it: a level-0 tile from its entry bundle's leaf hashes, a higher
// one from the roots of the full tiles under it.
func (d DiskLog) DeriveTile(level, index uint64, width int) ([][]byte, error) {
	if level == 0 {
		entries, err := d.bundle(index, width)
		if err != nil {
			return nil, err
		}
		hashes := make([][]byte, len(entries))
		for i, e := range entries {
			hashes[i] = rfc6962.DefaultHasher.HashLeaf(e)
		}
		return hashes, nil
	}
	nodes := make([][]byte, width)
	for j := range width {
		child, _, err := d.Tile(level-1, index*layout.TileWidth+uint64(j), layout.TileWidth)
		if err != nil {
			return nil, err
		}
		nodes[j] = subtreeRoot(child)
	}
	return nodes, nil
}

// subtreeRoot is the root of a perfect subtree given its 2^k leaves.
func subtreeRoot(level [][]byte) []byte {
	for len(level) > 1 {
		next := make([][]byte, len(level)/2)
		for i := range next {
			next[i] = rfc6962.DefaultHasher.HashChildren(level[2*i], level[2*i+1])
		}
		level = next
	}
	return level[0]
}

// LogCheck is what the start-up check found.
type LogCheck struct {
	Size       uint64 // integrated entries, from the tree state
	Root       []byte
	Checkpoint *checkpoints.SignedCheckpoint // nil when none is published yet
	TempFiles  int                           // left by interrupted writes, removed
}

// CheckLog is the start-up check of the log folder, run before Tessera opens
// it; it reads O(log n) files whatever the log's size. It removes the
// temporary files of writes a crash or a full disk interrupted, then
// checks that:
//   - the published checkpoint verifies under the log's own key and is not
//     ahead of the tree state;
//   - the newest entry bundle holds every entry the tree state counts;
//   - the newest tile at each level is complete and equals what the entries
//     and tiles below it derive;
//   - those tiles hash to the tree state's root, and the checkpoint's tree
//     is a prefix of it (a consistency proof from the tiles).
//
// Anything else is a *DamageError naming the file: the kernel must neither
// serve nor append on top of it. The whole log is checked later, in the
// background (scrubLog), and by annald verify.
func CheckLog(ctx context.Context, logPath string, v note.Verifier) (*LogCheck, error) {
	temps, err := RemoveTempFiles(logPath)
	if err != nil {
		return nil, err
	}
	c, err := VerifyLogEdge(ctx, logPath, v)
	if err != nil {
		return nil, err
	}
	c.TempFiles = temps
	return c, nil
}

// VerifyLogEdge is checkLog less the removal of temporary files, which
// only a log folder no writer has open may undergo.
func VerifyLogEdge(ctx context.Context, logPath string, v note.Verifier) (*LogCheck, error) {
	d := DiskLog{Root: logPath}
	size, root, err := d.TreeState()
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := d.checkNoLog(); err != nil {
			return nil, err
		}
		return &LogCheck{}, nil // a new log: Tessera makes it
	case err != nil:
		return nil, err
	}
	c := &LogCheck{Size: size, Root: root}
	if c.Checkpoint, err = d.signedCheckpoint(v, size); err != nil {
		return nil, err
	}
	if size == 0 {
		return c, nil
	}
	if err := c.checkEdgeTiles(ctx, d); err != nil {
		return nil, err
	}
	if err := c.verifyRoot(ctx, d); err != nil {
		return nil, err
	}
	return c, nil
}

// checkNoLog checks that a log folder without a tree state holds no log,
// nor did its data folder ever make one.
func (d DiskLog) checkNoLog() error {
	if exists, _ := logExists(d.Root); exists {
		return &DamageError{File: d.Path(TreeStatePath), Problem: "missing, while the log has a checkpoint", Remedy: remedyBackup}
	}
	if _, err := os.Stat(d.Path("tile")); err == nil {
		return &DamageError{File: d.Path(TreeStatePath), Problem: "missing, while the log has tiles", Remedy: remedyBackup}
	}
	// The root credential is written after Tessera made the tree state
	// and before the genesis entry: a folder that has one made a log.
	// Making another under the same key would fork its history.
	if _, err := os.Stat(filepath.Join(filepath.Dir(d.Root), RootCredentialName)); err == nil {
		return &DamageError{File: d.Path(TreeStatePath), Problem: "missing, while this data folder already made a log (it has a root credential): a new log under the same key would fork its history",
			Remedy: remedyBackup + "; or start a new data folder"}
	}
	return nil
}

// signedCheckpoint reads the published checkpoint, which must verify under
// the log's key v and not count more than the tree state's size entries;
// nil when none is published yet.
func (d DiskLog) signedCheckpoint(v note.Verifier, size uint64) (*checkpoints.SignedCheckpoint, error) {
	raw, err := os.ReadFile(d.Path(CheckpointFileName))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, nil // Tessera publishes one from the tree state as soon as it opens
	case err != nil:
		return nil, err
	}
	cp, err := checkpoints.OpenCheckpoint(raw, v)
	if err != nil {
		return nil, &DamageError{File: d.Path(CheckpointFileName), Problem: fmt.Sprintf("does not verify under the log's key %s: %v", v.Name(), err),
			Remedy: "annald repair signs a new checkpoint of the tree state once the tiles agree with it", Repairable: true}
	}
	if cp.Size > size {
		return nil, &DamageError{File: d.Path(TreeStatePath), Problem: fmt.Sprintf("counts %d entries, but the signed checkpoint %d", size, cp.Size), Remedy: remedyBackup}
	}
	return cp, nil
}

// checkEdgeTiles checks the newest tile at each level against what the
// entries and tiles below it derive.
func (c *LogCheck) checkEdgeTiles(ctx context.Context, d DiskLog) error {
	for level, t := range rightEdge(c.Size) {
		have, file, err := d.Tile(uint64(level), t.index, t.width)
		if err != nil {
			return err
		}
		want, err := d.DeriveTile(uint64(level), t.index, t.width)
		if err != nil {
			return err
		}
		for j := range want {
			if bytes.Equal(have[j], want[j]) {
				continue
			}
			if level == 0 {
				return c.blameLeaf(ctx, d, t.index*layout.EntryBundleWidth+uint64(j), want[j], file)
			}
			return &DamageError{File: file, Problem: fmt.Sprintf("hash %d is not what the entries below it hash to", j), Remedy: remedyRepair, Repairable: true,
				Tile: &TileRef{uint64(level), t.index, t.width}}
		}
	}
	return nil
}

// blameLeaf says which side is damaged when entry i hashes to leaf but its
// level-0 tile (file) says otherwise: the tile, if the entry's inclusion
// proof (built from the tile's other hashes) holds under the tree state's
// root, else the entry.
func (c *LogCheck) blameLeaf(ctx context.Context, d DiskLog, i uint64, leaf []byte, file string) error {
	pb, err := client.NewProofBuilder(ctx, c.Size, d.readTile)
	if err == nil {
		var incl [][]byte
		if incl, err = pb.InclusionProof(ctx, i); err == nil {
			err = proof.VerifyInclusion(rfc6962.DefaultHasher, i, c.Size, leaf, incl, c.Root)
		}
	}
	if err == nil {
		return &DamageError{File: file, Problem: fmt.Sprintf("the hash of entry %d is not what the entry hashes to", i), Remedy: remedyRepair, Repairable: true,
			Tile: &TileRef{0, i / layout.TileWidth, int(min(c.Size-i/layout.TileWidth*layout.TileWidth, layout.TileWidth))}}
	}
	bundle := d.Path(layout.EntriesPath(i/layout.EntryBundleWidth, PartialWidth(int(min(c.Size-i/layout.EntryBundleWidth*layout.EntryBundleWidth, layout.EntryBundleWidth)))))
	return &DamageError{File: bundle, Problem: fmt.Sprintf("entry %d hashes to %x, which the signed tree does not hold: it was changed after it was logged", i, leaf), Remedy: remedyBackup}
}

// verifyRoot checks the tiles against the tree state's root (the inclusion
// proof of the newest entry) and the checkpoint's tree against them.
func (c *LogCheck) verifyRoot(ctx context.Context, d DiskLog) error {
	last := c.Size - 1
	entries, err := d.bundle(last/layout.EntryBundleWidth, int(last%layout.EntryBundleWidth)+1)
	if err != nil {
		return err
	}
	pb, err := client.NewProofBuilder(ctx, c.Size, d.readTile)
	if err != nil {
		return fmt.Errorf("read the tiles of the tree: %w", err)
	}
	incl, err := pb.InclusionProof(ctx, last)
	if err == nil {
		err = proof.VerifyInclusion(rfc6962.DefaultHasher, last, c.Size, rfc6962.DefaultHasher.HashLeaf(entries[len(entries)-1]), incl, c.Root)
	}
	if err != nil {
		return &DamageError{File: d.Path(TreeStatePath), Problem: fmt.Sprintf("the tiles do not hash to its root %x: %v", c.Root, err), Remedy: remedyBackup}
	}
	cp := c.Checkpoint
	if cp == nil || cp.Size == 0 {
		return nil
	}
	if cp.Size == c.Size {
		if !bytes.Equal(cp.Hash[:], c.Root) {
			return &DamageError{File: d.Path(CheckpointFileName), Problem: fmt.Sprintf("signs root %x for size %d, the tree has %x", cp.Hash, cp.Size, c.Root), Remedy: remedyBackup}
		}
		return nil
	}
	cons, err := pb.ConsistencyProof(ctx, cp.Size, c.Size)
	if err == nil {
		err = proof.VerifyConsistency(rfc6962.DefaultHasher, cp.Size, c.Size, cons, cp.Hash[:], c.Root)
	}
	if err != nil {
		return &DamageError{File: d.Path(CheckpointFileName), Problem: fmt.Sprintf("the signed tree of size %d is not a prefix of the tiles' tree of size %d: %v", cp.Size, c.Size, err), Remedy: remedyBackup}
	}
	return nil
}

// TempFileName matches the temporary files Tessera's POSIX driver writes
// before renaming them into place: the target's name followed by a random
// number. A crash, or a full disk, can leave them behind.
var TempFileName = regexp.MustCompile(`^(?:[0-9]{3}[0-9]+|(?:checkpoint|treeState|gcState|version)[0-9]+)$`)

// RemoveTempFiles removes what interrupted writes left in the log folder
// and returns how many there were. Inside a partial folder (NNN.p) a name is
// a width (1 to 255); anything longer is a temporary file. (Tessera v1.0.4
// leaves one behind for every write that fails with a full disk: its
// createTemp clears the name it then means to remove.)
func RemoveTempFiles(logPath string) (int, error) { return RemoveTempFilesOlder(logPath, 0) }

// RemoveTempFilesOlder removes the temporary files last written more than
// age ago: while Tessera runs, younger ones may be writes in progress.
func RemoveTempFilesOlder(logPath string, age time.Duration) (int, error) {
	n := 0
	cutoff := time.Now().Add(-age)
	err := filepath.WalkDir(logPath, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		name := e.Name()
		temp := TempFileName.MatchString(name)
		if filepath.Ext(filepath.Dir(p)) == ".p" {
			temp = len(name) > 3
		}
		if !temp {
			return nil
		}
		if age > 0 {
			if fi, err := e.Info(); err != nil || fi.ModTime().After(cutoff) {
				return nil
			}
		}
		n++
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) {
		err = nil
	}
	return n, err
}

// ScrubLog reads the whole log below size: every entry bundle against its
// level-0 tile, every tile above against the tiles below it, and the root
// of all entries against root. It names the first file that disagrees: an
// entry changed after it was logged (the entries no longer hash to root),
// or else a damaged tile (which annald repair re-derives).
func ScrubLog(ctx context.Context, logPath string, size uint64, root []byte) error {
	return ScrubLogPaced(ctx, logPath, size, root, 1)
}

// ScrubLogPaced is ScrubLog taking at most share (0 < share ≤ 1) of the
// time: after each stretch of work it rests for as long as makes the
// work that share of the elapsed time. A kernel scrubs its log in the
// background after start while it serves; at full speed that took a core
// for 15 s at 10M entries, and its proofs and appends lost that core.
// Work is timed by the wall clock, so on a busy machine the scrub slows
// further.
func ScrubLogPaced(ctx context.Context, logPath string, size uint64, root []byte, share float64) error {
	s := &scrub{d: DiskLog{Root: logPath}, rng: (&compact.RangeFactory{Hash: rfc6962.DefaultHasher.HashChildren}).NewEmptyRange(0), pending: make([][][]byte, 1)}
	pace := newPacer(share)
	for b := uint64(0); b*layout.EntryBundleWidth < size; b++ {
		if err := pace.rest(ctx); err != nil {
			return err
		}
		if err := s.addBundle(b, int(min(size-b*layout.EntryBundleWidth, layout.EntryBundleWidth))); err != nil {
			return err
		}
	}
	// The partial tiles of the right edge above level 0.
	for level := 1; level < len(s.pending); level++ {
		if len(s.pending[level]) > 0 {
			if err := s.check(level, (size>>(layout.TileHeight*level))/layout.TileWidth, s.pending[level]); err != nil {
				return err
			}
		}
	}
	return s.verdict(size, root)
}

// scrub is one ScrubLog's reading of the log: the entries' leaves hashed
// into a compact range and up into tiles, each compared with the tile on
// disk.
type scrub struct {
	d   DiskLog
	rng *compact.Range
	// pending[l] are the level-l nodes derived so far for the tile being
	// filled at that level.
	pending [][][]byte
	// badTile is the first tile that differs from what the entries derive,
	// and badEntry, if that tile is at level 0, the entry it blames.
	badTile, badEntry *DamageError
}

// addBundle hashes the n entries of bundle b into the range and checks
// them against their level-0 tile.
func (s *scrub) addBundle(b uint64, n int) error {
	entries, err := s.d.bundle(b, n)
	if err != nil {
		return err
	}
	hashes := make([][]byte, n)
	for i, e := range entries {
		hashes[i] = rfc6962.DefaultHasher.HashLeaf(e)
		if err := s.rng.Append(hashes[i], nil); err != nil {
			return err
		}
	}
	return s.push(0, b, hashes)
}

// push checks the tile at level, index against nodes and, once the tile is
// full, adds its root to the tile being filled above it.
func (s *scrub) push(level int, index uint64, nodes [][]byte) error {
	if err := s.check(level, index, nodes); err != nil || len(nodes) < layout.TileWidth {
		return err
	}
	if len(s.pending) <= level+1 {
		s.pending = append(s.pending, nil)
	}
	s.pending[level+1] = append(s.pending[level+1], subtreeRoot(nodes))
	if len(s.pending[level+1]) < layout.TileWidth {
		return nil
	}
	full := s.pending[level+1]
	s.pending[level+1] = nil
	return s.push(level+1, index/layout.TileWidth, full)
}

// check compares the tile at level, index with the nodes derived from the
// entries, and remembers the first difference.
func (s *scrub) check(level int, index uint64, nodes [][]byte) error {
	have, file, err := s.d.Tile(uint64(level), index, len(nodes))
	var damage *DamageError
	if errors.As(err, &damage) && s.badTile == nil {
		s.badTile = damage
		return nil
	} else if err != nil {
		return err
	}
	for j := range nodes {
		if s.badTile == nil && !bytes.Equal(have[j], nodes[j]) {
			s.differs(level, index, nodes, j, have[j], file)
		}
	}
	return nil
}

// differs records that node j of the tile at level, index (file) is have,
// not what the entries derive.
func (s *scrub) differs(level int, index uint64, nodes [][]byte, j int, have []byte, file string) {
	s.badTile = &DamageError{File: file, Problem: fmt.Sprintf("hash %d is not what the entries below it hash to", j), Remedy: remedyRepair, Repairable: true,
		Tile: &TileRef{uint64(level), index, len(nodes)}}
	if level == 0 {
		i := index*layout.EntryBundleWidth + uint64(j)
		s.badEntry = &DamageError{File: s.d.Path(layout.EntriesPath(index, PartialWidth(len(nodes)))),
			Problem: fmt.Sprintf("entry %d hashes to %x, but its tile and the signed tree have %x: it was changed after it was logged", i, nodes[j], have), Remedy: remedyBackup}
	}
}

// verdict names the damaged file, if any: entries that no longer hash to
// root were changed after they were logged; if they do, a tile that
// differs from them is damaged.
func (s *scrub) verdict(size uint64, root []byte) error {
	got, err := s.rng.GetRootHash(nil)
	if err != nil {
		return err
	}
	switch {
	case bytes.Equal(got, root) && s.badTile != nil:
		return s.badTile
	case bytes.Equal(got, root):
		return nil
	case s.badEntry != nil:
		return s.badEntry
	}
	return &DamageError{File: s.d.Path("tile/entries"), Problem: fmt.Sprintf("the %d stored entries hash to root %x, the signed tree says %x: entries were changed after they were logged", size, got, root), Remedy: remedyBackup}
}

// ProbeWritable writes n bytes to a file in dir, syncs it and removes it:
// whether the file system takes writes again after one failed.
func ProbeWritable(dir string, n int) (err error) {
	f, err := os.CreateTemp(dir, ".write-probe-*")
	if err != nil {
		return err
	}
	defer func() {
		f.Close()
		if rerr := os.Remove(f.Name()); err == nil {
			err = rerr
		}
	}()
	if _, err := f.Write(make([]byte, n)); err != nil {
		return err
	}
	return f.Sync()
}
