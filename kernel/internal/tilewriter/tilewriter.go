// Package tilewriter appends entries at explicit indices to a transparency
// log kept in Tessera's POSIX on-disk layout (C2SP tlog-tiles), writing
// byte for byte the files Tessera v1.0.4's POSIX driver would write, so that
// Tessera's appender (publishing checkpoints, witnessing, collecting
// garbage) and every tlog-tiles reader keep working on the folder.
//
// It exists because the kernel's write-ahead log fixes each entry's index
// before the entry reaches the tile log: Tessera's own queue assigns indices
// itself, and may reorder batches.
//
// The contract:
//
//   - Single writer. The caller makes sure nothing else appends to the
//     folder while a Writer is open: Tessera's appender opened on the same
//     folder must never be given Add, and no other process may write it.
//     Append refuses to go on if it finds the tree state changed under it,
//     but that check is a safety net, not a lock. On a new folder, open
//     Tessera's appender before the first Append: its start-up writes an
//     empty tree state when it finds none.
//   - Durability. Append writes the entry bundles and hash tiles first,
//     each synced and its folder synced, and the tree state
//     (.state/treeState) last, atomically: temporary file, sync, rename,
//     folder sync. The tree state is what counts: an entry is in the log
//     once Append has returned nil, and not before. After a crash the files
//     an unfinished Append wrote beyond the tree state are ignored (they
//     never replace a file the tree state names: partial files carry their
//     width in their name) and are overwritten by the next Append.
//   - Failure. After an error nothing is promised: the Writer is broken,
//     every later call fails, and the caller opens a new Writer, which reads
//     what is durable. (An entry too large to bundle is refused before
//     anything is written, and does not break the Writer.)
//   - Idempotence. Appending the same entries again at the same indices,
//     after a crash or an error, writes the same files with the same bytes.
//   - Readers never see a file change its content: a full file is only
//     ever replaced by the same bytes, atomically, and a partial one is
//     written once under a name no earlier tree state used.
//   - Temporary files are named like Tessera's: the target's name followed
//     by random decimal digits, in the target's folder, so the kernel's
//     cleaner recognises what a crash left behind.
//
// A Writer keeps in memory what the next Append needs (the compact range of
// the tree, the partial hash tile of each level and the partial entry
// bundle), so an Append of n entries costs O(n) hashing and one write per
// bundle and tile it touches, whatever the size of the log.
package tilewriter

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"

	"github.com/annal-dev/annal/internal/atomicfile"
	"github.com/annal-dev/annal/kernel/event"
	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/rfc6962"
	"github.com/transparency-dev/tessera/api/layout"
)

const (
	// MaxEntrySize is the largest entry an entry bundle can hold: its length
	// is written in two bytes (C2SP tlog-tiles).
	MaxEntrySize = 1<<16 - 1

	stateDir      = ".state"
	treeStateFile = "treeState"
	treeStatePath = stateDir + "/" + treeStateFile

	// tileHeight is how many tree levels a hash tile spans: a tile at tile
	// level L holds the tree's nodes at height tileHeight*L.
	tileHeight = layout.TileHeight
	tileWidth  = layout.TileWidth
	hashSize   = 32

	dirPerm  = 0o755 // as Tessera's POSIX driver
	filePerm = 0o644
)

var hasher = rfc6962.DefaultHasher

// rangeFactory must be one value: compact ranges refuse to merge ranges made
// by different factories.
var rangeFactory = &compact.RangeFactory{Hash: hashChildren}

// hashChildren is hasher.HashChildren: SHA-256(0x01 || left || right),
// summed over one buffer on the stack. Why: the hasher makes a digest on
// the heap for every node, and the tree gains about one interior node an
// entry.
func hashChildren(left, right []byte) []byte {
	if len(left) != hashSize || len(right) != hashSize {
		return hasher.HashChildren(left, right)
	}
	var in [1 + 2*hashSize]byte
	in[0] = rfc6962.RFC6962NodeHashPrefix
	copy(in[1:], left)
	copy(in[1+hashSize:], right)
	sum := sha256.Sum256(in[:])
	return sum[:]
}

// Writer appends entries at explicit indices to a Tessera POSIX log folder.
// Its methods may be called from several goroutines; Appends run one at a
// time.
type Writer struct {
	root string

	// appendMu serialises Append and guards everything below the state.
	appendMu sync.Mutex
	broken   error
	tree     *compact.Range // the whole tree, [0, size)
	// edge[L] holds the nodes of the partial hash tile at tile level L (the
	// tree's nodes at height 8L past the last full tile at that level):
	// fewer than 256, possibly none.
	edge [][][]byte
	// bundle holds the entries past the last full entry bundle, marshalled
	// as the bundle file holds them.
	bundle []byte

	// stateMu guards size and rootHash, so that Size and Root do not wait
	// for an Append's writes.
	stateMu  sync.Mutex
	size     uint64
	rootHash []byte

	// beforeWrite, when set (by tests only), is called in order for each
	// file an Append is about to write, the tree state last, with its path
	// relative to the log folder. An error fails the Append as a crash
	// would there: only the files before that one are written.
	beforeWrite func(rel string) error
}

// treeState is the JSON of Tessera's .state/treeState: the same field names
// and order, so that the bytes are the same as Tessera's.
type treeState struct {
	Size uint64 `json:"size"`
	Root []byte `json:"root"`
}

// Open reads the folder's tree state (.state/treeState) and the right edge of its tree (the
// compact range's nodes, the partial tiles and the partial entry bundle), so that Append continues it.
// A folder without a tree state is an empty log (size 0); Open then creates .state.
// It checks that the right-edge nodes hash to the stored root and refuses otherwise.
func Open(root string) (*Writer, error) {
	w := &Writer{root: root}
	dirsToSync := map[string]struct{}{}
	if err := ensureDir(filepath.Join(root, stateDir), dirsToSync); err != nil {
		return nil, fmt.Errorf("tilewriter: open %s: %w", root, err)
	}
	for dir := range dirsToSync {
		if err := syncDir(dir); err != nil {
			return nil, fmt.Errorf("tilewriter: open %s: %w", root, err)
		}
	}
	size, storedRoot, err := readTreeState(root)
	if err != nil {
		return nil, fmt.Errorf("tilewriter: open %s: %w", root, err)
	}
	if err := w.readRightEdge(size, storedRoot); err != nil {
		return nil, fmt.Errorf("tilewriter: open %s: %w", root, err)
	}
	w.size, w.rootHash = size, storedRoot
	return w, nil
}

// readTreeState reads .state/treeState; a missing one is the empty tree.
func readTreeState(root string) (uint64, []byte, error) {
	p := filepath.Join(root, stateDir, treeStateFile)
	raw, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, hasher.EmptyRoot(), nil
	}
	if err != nil {
		return 0, nil, err
	}
	var ts treeState
	if err := json.Unmarshal(raw, &ts); err != nil {
		return 0, nil, fmt.Errorf("tree state %s: %v", p, err)
	}
	if len(ts.Root) != hashSize {
		return 0, nil, fmt.Errorf("tree state %s: root of %d bytes, want %d", p, len(ts.Root), hashSize)
	}
	return ts.Size, ts.Root, nil
}

// readRightEdge loads the partial tiles and the partial entry bundle of a
// tree of size entries, rebuilds its compact range from them, and checks
// that it hashes to storedRoot and that the bundle's entries hash to the
// level-0 tile.
func (w *Writer) readRightEdge(size uint64, storedRoot []byte) error {
	if err := w.readEdgeTiles(size); err != nil {
		return err
	}
	if err := w.rebuildTree(size, storedRoot); err != nil {
		return err
	}
	return w.readEdgeBundle(size)
}

// readEdgeTiles loads into w.edge the nodes of the partial hash tile at
// each level of a tree of size entries: a level's partial tile holds the
// nodes past its last full tile, size>>(8L) mod 256 of them.
func (w *Writer) readEdgeTiles(size uint64) error {
	for level := 0; size>>(tileHeight*level) > 0; level++ {
		nodes := size >> (tileHeight * level)
		index, width := nodes/tileWidth, int(nodes%tileWidth)
		w.edge = append(w.edge, nil)
		if width == 0 {
			continue
		}
		rel, raw, err := readPartialOrFull(w.root, layout.TilePath(uint64(level), index, uint8(width)), layout.TilePath(uint64(level), index, 0))
		if err != nil {
			return fmt.Errorf("hash tile level %d index %d (%d nodes) of the tree state's %d entries: %w", level, index, width, size, err)
		}
		want := width * hashSize
		if rel == layout.TilePath(uint64(level), index, 0) {
			want = tileWidth * hashSize
		}
		if len(raw) != want {
			return fmt.Errorf("hash tile %s: %d bytes, want %d (the tree state's %d entries put %d nodes in it)", rel, len(raw), want, size, width)
		}
		for i := range width {
			w.edge[level] = append(w.edge[level], bytes.Clone(raw[i*hashSize:(i+1)*hashSize]))
		}
	}
	return nil
}

// rebuildTree sets w.tree to the compact range of [0, size) made from the
// partial tiles' nodes, and checks that it hashes to storedRoot. The
// compact range has one node per set bit of size; the bits 8L to 8L+7 are
// the set bits of the node count of the partial tile at level L, so those
// nodes are exactly the compact range of that tile's nodes.
func (w *Writer) rebuildTree(size uint64, storedRoot []byte) error {
	var rangeHashes [][]byte
	for level := len(w.edge) - 1; level >= 0; level-- {
		tile := rangeFactory.NewEmptyRange(0)
		for _, h := range w.edge[level] {
			if err := tile.Append(h, nil); err != nil {
				return err
			}
		}
		rangeHashes = append(rangeHashes, tile.Hashes()...)
	}
	tree, err := rangeFactory.NewRange(0, size, rangeHashes)
	if err != nil {
		return fmt.Errorf("right edge of the tree state's %d entries: %w", size, err)
	}
	if got := rootOf(tree); !bytes.Equal(got, storedRoot) {
		return fmt.Errorf("the right-edge tiles of %s's %d entries hash to root %x, but it holds root %x", treeStatePath, size, got, storedRoot)
	}
	w.tree = tree
	return nil
}

// readEdgeBundle loads into w.bundle the partial entry bundle of a tree of
// size entries, checking each entry against its hash in the level-0 tile.
func (w *Writer) readEdgeBundle(size uint64) error {
	width := int(size % tileWidth)
	if width == 0 {
		return nil
	}
	index := size / tileWidth
	rel, raw, err := readPartialOrFull(w.root, layout.EntriesPath(index, uint8(width)), layout.EntriesPath(index, 0))
	if err != nil {
		return fmt.Errorf("entry bundle %d (%d entries) of the tree state's %d entries: %w", index, width, size, err)
	}
	end := 0
	for i := range width {
		first := index*tileWidth + uint64(i)
		if end+2 > len(raw) {
			return fmt.Errorf("entry bundle %s: ends before entry %d (%d bytes)", rel, first, len(raw))
		}
		n := int(binary.BigEndian.Uint16(raw[end:]))
		if end+2+n > len(raw) {
			return fmt.Errorf("entry bundle %s: entry %d runs past its end (%d bytes)", rel, first, len(raw))
		}
		if got := hasher.HashLeaf(raw[end+2 : end+2+n]); !bytes.Equal(got, w.edge[0][i]) {
			return fmt.Errorf("entry bundle %s: entry %d hashes to %x, its hash tile holds %x", rel, first, got, w.edge[0][i])
		}
		end += 2 + n
	}
	if rel == layout.EntriesPath(index, uint8(width)) && end != len(raw) {
		return fmt.Errorf("entry bundle %s: %d bytes after its %d entries", rel, len(raw)-end, width)
	}
	w.bundle = bytes.Clone(raw[:end])
	return nil
}

// readPartialOrFull reads the partial file, or the full one when the partial
// is gone (as Tessera's readers do: a full file starts with the partial's
// content). It returns the path it read, relative to root.
func readPartialOrFull(root, partial, full string) (string, []byte, error) {
	raw, err := os.ReadFile(filepath.Join(root, partial))
	if errors.Is(err, fs.ErrNotExist) {
		raw, err = os.ReadFile(filepath.Join(root, full))
		if err == nil {
			return full, raw, nil
		}
		if errors.Is(err, fs.ErrNotExist) {
			return partial, nil, fmt.Errorf("neither %s nor %s exists", partial, full)
		}
		return full, nil, err
	}
	return partial, raw, err
}

// rootOf is the RFC 6962 root of the tree r covers from index 0.
func rootOf(r *compact.Range) []byte {
	if r.End() == 0 {
		return hasher.EmptyRoot()
	}
	root, err := r.GetRootHash(nil)
	if err != nil {
		panic(err) // only for a range not starting at 0, which ours always do
	}
	return root
}

// Size is the number of entries in the log: what the last successful Append
// (or Open) left.
func (w *Writer) Size() uint64 {
	w.stateMu.Lock()
	defer w.stateMu.Unlock()
	return w.size
}

// Root is the RFC 6962 root of the first Size() entries (the empty-tree hash at 0).
func (w *Writer) Root() []byte {
	w.stateMu.Lock()
	defer w.stateMu.Unlock()
	return bytes.Clone(w.rootHash)
}

// file is one file an Append writes.
type file struct {
	rel  string // relative to the log folder, as layout names it
	what string // for errors: which bundle or tile, which entries
	data []byte
}

// Append writes entries at indices Size(), Size()+1, ...: the entry bundles and hash tiles they
// complete or extend (full and partial files, as Tessera names them), each synced, their folders
// synced, and then the new tree state, atomically (temporary file, sync, rename, folder sync).
// Only once Append returns nil are the entries in the log. After an error nothing is promised:
// the Writer is marked broken, every later call fails, and the caller opens a new Writer, which
// reads what is durable. Writing the same entries again at the same indices after a crash or an
// error gives the same files (Append is idempotent per index).
func (w *Writer) Append(entries [][]byte) (size uint64, root []byte, err error) {
	w.appendMu.Lock()
	defer w.appendMu.Unlock()
	if w.broken != nil {
		return 0, nil, fmt.Errorf("tilewriter: %s: writer broken by an earlier error (open a new one): %w", w.root, w.broken)
	}
	from := w.tree.End()
	for i, e := range entries {
		if len(e) > MaxEntrySize {
			return 0, nil, fmt.Errorf("tilewriter: %s: entry %d is %d bytes, over the %d an entry bundle can hold; nothing written", w.root, from+uint64(i), len(e), MaxEntrySize)
		}
	}
	if len(entries) == 0 {
		return from, bytes.Clone(rootOf(w.tree)), nil
	}
	size, root, err = w.append(from, entries)
	if err != nil {
		w.broken = err
		return 0, nil, err
	}
	w.stateMu.Lock()
	w.size, w.rootHash = size, root
	w.stateMu.Unlock()
	return size, bytes.Clone(root), nil
}

func (w *Writer) append(from uint64, entries [][]byte) (uint64, []byte, error) {
	if err := w.checkTreeState(from); err != nil {
		return 0, nil, err
	}
	if err := w.checkEdge(from); err != nil {
		return 0, nil, err
	}
	files, err := w.addEntries(from, entries)
	if err != nil {
		return 0, nil, err
	}
	size := w.tree.End()
	if files, err = w.appendPartialFiles(files, from, size); err != nil {
		return 0, nil, err
	}
	root := rootOf(w.tree)

	state, err := json.Marshal(treeState{Size: size, Root: root})
	if err != nil {
		return 0, nil, err
	}
	files = append(files, file{rel: treeStatePath, what: fmt.Sprintf("tree state of size %d", size), data: state})
	if err := w.writeFiles(files); err != nil {
		return 0, nil, fmt.Errorf("tilewriter: %s: entries %d to %d: %w", w.root, from, size-1, err)
	}
	return size, root, nil
}

// checkTreeState refuses to go on unless the tree state on disk is still
// the one this Writer continues, of size from: anything else means a
// second writer, and appending would fork the log.
func (w *Writer) checkTreeState(from uint64) error {
	size, root, err := readTreeState(w.root)
	if err != nil {
		return fmt.Errorf("tilewriter: %s: %w", w.root, err)
	}
	if size != from || !bytes.Equal(root, rootOf(w.tree)) {
		return fmt.Errorf("tilewriter: %s: %s holds size %d root %x, but this writer left size %d root %x: another writer appended to the log", w.root, treeStatePath, size, root, from, rootOf(w.tree))
	}
	return nil
}

// addEntries adds entries, the first at index from, to the partial bundle
// and to the tree, keeping the tree's tile nodes in w.edge. It returns the
// full entry bundles and full hash tiles they complete, in the order they
// fill.
func (w *Writer) addEntries(from uint64, entries [][]byte) ([]file, error) {
	var files []file
	var visitErr error
	// keepTileNodes sees every node the tree makes; those at heights that
	// are multiples of 8 are the hash tiles' nodes.
	keepTileNodes := func(id compact.NodeID, hash []byte) {
		if id.Level%tileHeight != 0 || visitErr != nil {
			return
		}
		level := int(id.Level / tileHeight)
		for len(w.edge) <= level {
			w.edge = append(w.edge, nil)
		}
		tileIndex, pos := id.Index/tileWidth, id.Index%tileWidth
		if pos != uint64(len(w.edge[level])) {
			visitErr = fmt.Errorf("tilewriter: %s: node %d at height %d comes after %d nodes of its tile: the writer's right edge is inconsistent", w.root, id.Index, id.Level, len(w.edge[level]))
			return
		}
		w.edge[level] = append(w.edge[level], hash)
		if len(w.edge[level]) == tileWidth {
			files = append(files, tileFile(level, tileIndex, w.edge[level], 0))
			w.edge[level] = w.edge[level][:0]
		}
	}

	for i, e := range entries {
		index := from + uint64(i)
		w.bundle = binary.BigEndian.AppendUint16(w.bundle, uint16(len(e)))
		w.bundle = append(w.bundle, e...)
		if (index+1)%tileWidth == 0 {
			b := index / tileWidth
			files = append(files, file{
				rel:  layout.EntriesPath(b, 0),
				what: fmt.Sprintf("entry bundle %d (entries %d to %d)", b, b*tileWidth, index),
				data: w.bundle,
			})
			w.bundle = make([]byte, 0, len(w.bundle))
		}
		leaf := event.LeafHash(e) // hasher.HashLeaf's, without a digest on the heap for each entry
		if err := w.tree.Append(leaf[:], keepTileNodes); err != nil {
			return nil, fmt.Errorf("tilewriter: %s: entry %d: %w", w.root, index, err)
		}
		if visitErr != nil {
			return nil, visitErr
		}
	}
	return files, nil
}

// appendPartialFiles appends to files the partial files of a tree grown
// from from to size entries: the partial entry bundle, if any, and each
// partial tile this Append gave a node (the node count at its level
// changed), as Tessera writes only the tiles it changes; full ones were
// written as they filled.
func (w *Writer) appendPartialFiles(files []file, from, size uint64) ([]file, error) {
	if width := size % tileWidth; width > 0 {
		b := size / tileWidth
		files = append(files, file{
			rel:  layout.EntriesPath(b, uint8(width)),
			what: fmt.Sprintf("entry bundle %d (entries %d to %d)", b, b*tileWidth, size-1),
			data: w.bundle,
		})
	}
	for level := range w.edge {
		before, after := from>>(tileHeight*level), size>>(tileHeight*level)
		if before == after || after%tileWidth == 0 {
			continue
		}
		if got := uint64(len(w.edge[level])); got != after%tileWidth {
			return nil, fmt.Errorf("tilewriter: %s: the partial tile at level %d holds %d nodes, want %d: the writer's right edge is inconsistent", w.root, level, got, after%tileWidth)
		}
		files = append(files, tileFile(level, after/tileWidth, w.edge[level], uint8(after%tileWidth)))
	}
	return files, nil
}

// ErrEdgeChanged: a file at the right edge of the tree state on disk (a
// partial hash tile or entry bundle) no longer holds what the Writer wrote
// there. The Writer would not build on it (it continues from memory), but
// readers are served that file: the log folder is damaged.
var ErrEdgeChanged = errors.New("a file of the log's right edge changed on disk")

// checkEdge reads back the right-edge files of a tree of size entries and
// compares them with what the Writer holds: a few small reads per Append,
// so that damage to the files readers are served is found at the next
// write, as Tessera, which reads them back to extend them, finds it.
func (w *Writer) checkEdge(size uint64) error {
	check := func(partial, full string, want []byte) error {
		rel, raw, err := readPartialOrFull(w.root, partial, full)
		if err != nil {
			return fmt.Errorf("tilewriter: %s: %w: %v", w.root, ErrEdgeChanged, err)
		}
		if len(raw) < len(want) || (rel == partial && len(raw) != len(want)) || !bytes.Equal(raw[:len(want)], want) {
			return fmt.Errorf("tilewriter: %s: %w: %s holds %d bytes that differ from the %d the writer wrote", w.root, ErrEdgeChanged, rel, len(raw), len(want))
		}
		return nil
	}
	for level, nodes := range w.edge {
		count := size >> (tileHeight * level)
		width := count % tileWidth
		if width == 0 || len(nodes) == 0 {
			continue
		}
		if err := check(layout.TilePath(uint64(level), count/tileWidth, uint8(width)), layout.TilePath(uint64(level), count/tileWidth, 0), bytes.Join(nodes, nil)); err != nil {
			return err
		}
	}
	if width := size % tileWidth; width > 0 {
		return check(layout.EntriesPath(size/tileWidth, uint8(width)), layout.EntriesPath(size/tileWidth, 0), w.bundle)
	}
	return nil
}

// tileFile is the hash tile at level, index holding nodes (partial width,
// or 0 when full): the nodes' 32-byte hashes concatenated.
func tileFile(level int, index uint64, nodes [][]byte, width uint8) file {
	data := make([]byte, 0, len(nodes)*hashSize)
	for _, n := range nodes {
		data = append(data, n...)
	}
	first := index * tileWidth
	return file{
		rel:  layout.TilePath(uint64(level), index, width),
		what: fmt.Sprintf("hash tile level %d index %d (nodes %d to %d at height %d)", level, index, first, first+uint64(len(nodes))-1, level*tileHeight),
		data: data,
	}
}

// maxParallelWrites bounds how many files an Append writes at once. Each
// write waits mostly on its sync: overlapping them lets the file system
// commit several in one journal transaction.
const maxParallelWrites = 16

// writeFiles makes files durable under their names, the last one (the
// tree state) only once all the others are. Each is written to a temporary
// file in its target's folder and synced; the others are renamed over
// their targets and each folder that got a new name is synced; then the
// last is renamed and its folder synced. The writes and syncs overlap, in
// no order: nothing names the other files before the tree state does. The
// tree state's temporary file is written with them, as its name is not
// yet the tree state's.
func (w *Writer) writeFiles(files []file) error {
	last := len(files) - 1
	files, crash := w.filesBeforeCrash(files)
	dirsToSync := map[string]struct{}{}
	targets, err := w.makeDirs(files, last, dirsToSync)
	if err != nil {
		return err
	}

	var lastTemp string
	err = parallel(len(files), func(i int) (err error) {
		if i == last {
			lastTemp, err = createTemp(targets[i], files[i].data)
		} else {
			err = replaceFile(targets[i], files[i].data)
		}
		if err != nil {
			return fmt.Errorf("writing %s, %s: %w", files[i].rel, files[i].what, err)
		}
		return nil
	})
	if err == nil {
		err = crash
	}
	if err == nil {
		dirs := make([]string, 0, len(dirsToSync))
		for dir := range dirsToSync {
			dirs = append(dirs, dir)
		}
		err = parallel(len(dirs), func(i int) error { return syncDir(dirs[i]) })
	}
	if err == nil {
		if err = os.Rename(lastTemp, targets[last]); err == nil {
			err = syncDir(filepath.Dir(targets[last]))
		}
		if err != nil {
			err = fmt.Errorf("writing %s, %s: %w", files[last].rel, files[last].what, err)
		}
	}
	if err != nil && lastTemp != "" {
		_ = os.Remove(lastTemp)
	}
	return err
}

// filesBeforeCrash is files cut where the test hook beforeWrite makes an
// Append crash, with the crash's error; files whole and nil without the
// hook. The hook decides up front how many files get written, so that a
// crash "after k files" is the first k, whatever the concurrency.
func (w *Writer) filesBeforeCrash(files []file) ([]file, error) {
	if w.beforeWrite == nil {
		return files, nil
	}
	for i, f := range files {
		if err := w.beforeWrite(f.rel); err != nil {
			return files[:i], fmt.Errorf("writing %s, %s: %w", f.rel, f.what, err)
		}
	}
	return files, nil
}

// makeDirs makes the folders of files, one at a time: parents before
// children, and each new one recorded in dirsToSync for its parent's sync,
// as is the folder of each file but the one at index last, which gets a new
// name there. It returns each file's path.
func (w *Writer) makeDirs(files []file, last int, dirsToSync map[string]struct{}) ([]string, error) {
	targets := make([]string, len(files))
	for i, f := range files {
		targets[i] = filepath.Join(w.root, filepath.FromSlash(f.rel))
		dir := filepath.Dir(targets[i])
		if err := ensureDir(dir, dirsToSync); err != nil {
			return nil, fmt.Errorf("writing %s, %s: %w", f.rel, f.what, err)
		}
		if i != last {
			dirsToSync[dir] = struct{}{}
		}
	}
	return targets, nil
}

// parallel runs do(0) to do(n-1), at most maxParallelWrites at a time, and
// returns the error of the lowest i that failed.
func parallel(n int, do func(i int) error) error {
	if n <= 1 {
		if n == 1 {
			return do(0)
		}
		return nil
	}
	errs := make([]error, n)
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(n, maxParallelWrites) {
		wg.Go(func() {
			for i := range next {
				errs[i] = do(i)
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// replaceFile puts data under target atomically: a temporary file, synced,
// renamed over it. The caller syncs the folder.
func replaceFile(target string, data []byte) error {
	tmp, err := createTemp(target, data)
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, target); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return nil
}

// createTemp writes data to a new file named target followed by random
// decimal digits, and syncs it. Ten digits, never starting with 0, so that
// the name is longer than any width a partial folder (NNN.p) holds: the
// kernel's cleaner tells them apart by length.
func createTemp(target string, data []byte) (string, error) {
	for range 100 {
		name := target + strconv.FormatUint(1_000_000_000+uint64(rand.Uint32N(3_000_000_000)), 10)
		f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_CLOEXEC, filePerm)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return "", err
		}
		_, err = f.Write(data)
		if err == nil {
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			_ = os.Remove(name)
			return "", err
		}
		return name, nil
	}
	return "", fmt.Errorf("no free temporary name for %s", target)
}

// ensureDir makes dir and any missing parents. Each folder it makes is
// recorded in its parent's entry, so the parent goes into dirsToSync.
func ensureDir(dir string, dirsToSync map[string]struct{}) error {
	fi, err := os.Lstat(dir)
	switch {
	case err == nil && fi.IsDir():
		return nil
	case err == nil:
		return fmt.Errorf("%s is not a folder", dir)
	case !errors.Is(err, fs.ErrNotExist):
		return err
	}
	parent := filepath.Dir(dir)
	if parent != dir {
		if err := ensureDir(parent, dirsToSync); err != nil {
			return err
		}
	}
	if err := os.Mkdir(dir, dirPerm); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	dirsToSync[parent] = struct{}{}
	return nil
}

// syncDir syncs the folder dir, so that the names created or renamed in it
// are durable.
func syncDir(dir string) error {
	if err := atomicfile.SyncDir(dir); err != nil {
		return fmt.Errorf("syncing folder %s: %w", dir, err)
	}
	return nil
}

// ReadTreeState returns the size and root hash of the tree the tiles under
// root hold (.state/treeState; the empty tree when there is none). It
// changes nothing: it is for readers beside the writer.
func ReadTreeState(root string) (size uint64, rootHash []byte, err error) {
	size, rootHash, err = readTreeState(root)
	if err != nil {
		return 0, nil, fmt.Errorf("tilewriter: %s: %w", root, err)
	}
	return size, rootHash, nil
}
