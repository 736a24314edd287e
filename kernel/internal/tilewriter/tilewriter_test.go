package tilewriter

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/annal-dev/annal/kernel/event"
	"github.com/transparency-dev/merkle/rfc6962"
	"github.com/transparency-dev/tessera"
	"github.com/transparency-dev/tessera/api/layout"
	"github.com/transparency-dev/tessera/storage/posix"
	"golang.org/x/mod/sumdb/note"
	"k8s.io/klog/v2"
)

// Tessera's appender logs through klog; its lines would break the
// benchmark output apart.
func init() {
	klog.LogToStderr(false)
	klog.SetOutput(io.Discard)
}

// testEntries are n distinct entries of varied lengths, the first at index
// from, one of them empty.
func testEntries(from, n int) [][]byte {
	entries := make([][]byte, n)
	for i := range entries {
		index := from + i
		if index == 3 {
			entries[i] = []byte{}
			continue
		}
		entries[i] = fmt.Appendf(nil, "entry %d %s", index, strings.Repeat("x", index*7%61))
	}
	return entries
}

// appendInBatches appends entries to w in batches whose sizes cycle through
// sizes, and checks each Append's answer.
func appendInBatches(tb testing.TB, w *Writer, entries [][]byte, sizes ...int) {
	tb.Helper()
	for i := 0; len(entries) > 0; i++ {
		n := min(sizes[i%len(sizes)], len(entries))
		want := w.Size() + uint64(n)
		size, root, err := w.Append(entries[:n])
		if err != nil {
			tb.Fatalf("Append(%d entries at %d): %v", n, w.Size(), err)
		}
		if size != want || size != w.Size() || !bytes.Equal(root, w.Root()) {
			tb.Fatalf("Append(%d entries) = size %d root %x; want size %d, Size() %d, Root() %x", n, size, root, want, w.Size(), w.Root())
		}
		entries = entries[n:]
	}
}

func openWriter(tb testing.TB, dir string) *Writer {
	tb.Helper()
	w, err := Open(dir)
	if err != nil {
		tb.Fatalf("Open(%s): %v", dir, err)
	}
	return w
}

// tesseraLog is Tessera's own POSIX appender on a folder: the reference.
type tesseraLog struct {
	add    tessera.AddFn
	cancel context.CancelFunc
}

func openTessera(tb testing.TB, dir string, batchSize uint, batchAge time.Duration) *tesseraLog {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	tb.Cleanup(cancel)
	driver, err := posix.New(ctx, posix.Config{Path: dir})
	if err != nil {
		tb.Fatalf("posix.New: %v", err)
	}
	skey, _, err := note.GenerateKey(rand.Reader, "tilewriter.test")
	if err != nil {
		tb.Fatal(err)
	}
	signer, err := note.NewSigner(skey)
	if err != nil {
		tb.Fatal(err)
	}
	// Checkpoints are not what is compared; publishing them rarely keeps
	// the folder quiet once the futures are in.
	opts := tessera.NewAppendOptions().
		WithCheckpointSigner(signer).
		WithBatching(batchSize, batchAge).
		WithCheckpointInterval(time.Hour).
		WithCheckpointRepublishInterval(0).
		WithGarbageCollectionInterval(0)
	appender, _, _, err := tessera.NewAppender(ctx, driver, opts)
	if err != nil {
		tb.Fatalf("tessera.NewAppender: %v", err)
	}
	return &tesseraLog{add: appender.Add, cancel: cancel}
}

// addAll adds entries, at most inFlight at a time without waiting, and
// returns the index Tessera gave each: its queue may order batches
// differently from the calls.
func (l *tesseraLog) addAll(tb testing.TB, entries [][]byte, inFlight int) []uint64 {
	tb.Helper()
	ctx := context.Background()
	indices := make([]uint64, 0, len(entries))
	for len(entries) > 0 {
		n := min(inFlight, len(entries))
		futures := make([]tessera.IndexFuture, n)
		for i, e := range entries[:n] {
			futures[i] = l.add(ctx, tessera.NewEntry(e))
		}
		for _, f := range futures {
			idx, err := f()
			if err != nil {
				tb.Fatalf("tessera Add: %v", err)
			}
			indices = append(indices, idx.Index)
		}
		entries = entries[n:]
	}
	return indices
}

// inLogOrder puts entries where Tessera indexed them, from index from.
func inLogOrder(tb testing.TB, entries [][]byte, indices []uint64, from uint64) [][]byte {
	tb.Helper()
	ordered := make([][]byte, len(entries))
	for i, idx := range indices {
		if idx < from || idx-from >= uint64(len(entries)) || ordered[idx-from] != nil {
			tb.Fatalf("Tessera gave entry %d index %d, not a fresh one in [%d, %d)", i, idx, from, from+uint64(len(entries)))
		}
		ordered[idx-from] = entries[i]
	}
	return ordered
}

func readState(tb testing.TB, dir string) (raw []byte, ts treeState) {
	tb.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, treeStatePath))
	if err != nil {
		tb.Fatal(err)
	}
	if err := json.Unmarshal(raw, &ts); err != nil {
		tb.Fatalf("%s: %v", treeStatePath, err)
	}
	return raw, ts
}

// compareLogs checks that the files a tree of size entries names are the
// same bytes in both folders: the tree state, every full entry bundle and
// hash tile, and the right edge's partial ones. (Partial files of earlier
// sizes differ with how the entries were batched.)
func compareLogs(tb testing.TB, wantDir, gotDir string, size uint64) {
	tb.Helper()
	wantState, ts := readState(tb, wantDir)
	gotState, _ := readState(tb, gotDir)
	if ts.Size != size {
		tb.Fatalf("reference tree state has size %d, want %d", ts.Size, size)
	}
	if !bytes.Equal(gotState, wantState) {
		tb.Fatalf("tree state: got %s, want %s", gotState, wantState)
	}
	var files []string
	for b := uint64(0); b*layout.EntryBundleWidth < size; b++ {
		files = append(files, layout.EntriesPathForLogIndex(b*layout.EntryBundleWidth, size))
	}
	for level := uint64(0); size>>(8*level) > 0; level++ {
		nodes := size >> (8 * level)
		for index := uint64(0); index*layout.TileWidth < nodes; index++ {
			files = append(files, layout.TilePath(level, index, layout.PartialTileSize(level, index, size)))
		}
	}
	for _, f := range files {
		want, err := os.ReadFile(filepath.Join(wantDir, f))
		if err != nil {
			tb.Fatalf("reference: %v", err)
		}
		got, err := os.ReadFile(filepath.Join(gotDir, f))
		if err != nil {
			tb.Fatalf("writer: %v", err)
		}
		if !bytes.Equal(got, want) {
			tb.Fatalf("%s (tree size %d): got %d bytes, want %d bytes, differing", f, size, len(got), len(want))
		}
	}
}

// snapshot is every regular file under dir, by relative path.
func snapshot(tb testing.TB, dir string) map[string][]byte {
	tb.Helper()
	files := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		raw, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		files[rel] = raw
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	return files
}

func compareFolders(tb testing.TB, wantDir, gotDir string) {
	tb.Helper()
	want, got := snapshot(tb, wantDir), snapshot(tb, gotDir)
	for name, raw := range want {
		if g, ok := got[name]; !ok {
			tb.Errorf("%s: missing", name)
		} else if !bytes.Equal(g, raw) {
			tb.Errorf("%s: got %d bytes, want %d, differing", name, len(g), len(raw))
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			tb.Errorf("%s: not in the reference folder", name)
		}
	}
	if tb.Failed() {
		tb.FailNow()
	}
}

// linkFolder makes dst a copy of src by hard links, which is fast and
// safe because a Writer never changes a file in place: it renames a new
// file over the old name. Tests that damage a file use replaceTestFile.
func linkFolder(tb testing.TB, src, dst string) {
	tb.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), dirPerm)
		}
		return os.Link(p, filepath.Join(dst, rel))
	})
	if err != nil {
		tb.Fatal(err)
	}
}

// replaceTestFile gives the file rel under dir the content change makes of its
// current one, as a new file (the old one may be linked from elsewhere);
// nil removes it.
func replaceTestFile(tb testing.TB, dir, rel string, change func([]byte) []byte) {
	tb.Helper()
	p := filepath.Join(dir, rel)
	raw, err := os.ReadFile(p)
	if err != nil {
		tb.Fatal(err)
	}
	raw = change(bytes.Clone(raw))
	if err := os.Remove(p); err != nil {
		tb.Fatal(err)
	}
	if raw != nil {
		if err := os.WriteFile(p, raw, filePerm); err != nil {
			tb.Fatal(err)
		}
	}
}

// referenceLog writes entries with a Writer, in one batch per bundle, to a
// new folder: an independent computation of what the log must be.
func referenceLog(tb testing.TB, entries [][]byte) string {
	tb.Helper()
	dir := tb.TempDir()
	appendInBatches(tb, openWriter(tb, dir), entries, 256)
	return dir
}

// TestKnownAnswerAgainstTessera grows a log with Tessera's own appender and
// the same entries with a Writer batched differently, and compares the
// files at sizes crossing bundle and tile boundaries, up to one that needs
// a level-2 tile (65536 = 256*256 entries).
func TestKnownAnswerAgainstTessera(t *testing.T) {
	tessDir, writerDir := t.TempDir(), t.TempDir()
	w := openWriter(t, writerDir)
	// Small batches first, so that Tessera's batches vary in size and
	// straddle bundles; then larger ones, through a second appender on the
	// same folder, to reach a level-2 tile in reasonable time.
	phases := []struct {
		batchSize uint
		batchAge  time.Duration
		inFlight  int
		sizes     []uint64
	}{
		{7, time.Millisecond, 19, []uint64{1, 255, 256, 257, 520}},
		{997, 5 * time.Millisecond, 4000, []uint64{65535, 65536, 65537, 70000}},
	}
	batchSizes := []int{1, 3, 256, 300, 2, 1000, 255, 4097}
	size := uint64(0)
	for _, phase := range phases {
		tess := openTessera(t, tessDir, phase.batchSize, phase.batchAge)
		for _, target := range phase.sizes {
			entries := testEntries(int(size), int(target-size))
			ordered := inLogOrder(t, entries, tess.addAll(t, entries, phase.inFlight), size)
			appendInBatches(t, w, ordered, batchSizes...)
			size = target
			compareLogs(t, tessDir, writerDir, size)
		}
		tess.cancel()
	}
}

// TestReopen: a log written with Writers reopened between Appends is the
// same, file for file, as one written by a single Writer.
func TestReopen(t *testing.T) {
	entries := testEntries(0, 66000)
	batches := []int{1, 254, 1, 1, 256, 300, 65000, 187}
	straight := t.TempDir()
	appendInBatches(t, openWriter(t, straight), entries, batches...)

	reopened := t.TempDir()
	rest := entries
	for _, n := range batches {
		w := openWriter(t, reopened)
		appendInBatches(t, w, rest[:n], n)
		rest = rest[n:]
		if w2 := openWriter(t, reopened); w2.Size() != w.Size() || !bytes.Equal(w2.Root(), w.Root()) {
			t.Fatalf("reopened at size %d root %x, writer left size %d root %x", w2.Size(), w2.Root(), w.Size(), w.Root())
		}
	}
	compareFolders(t, straight, reopened)
}

// TestContinuesTesseraAndBack: a Writer continues a log Tessera wrote, and
// Tessera's appender continues what the Writer wrote.
func TestContinuesTesseraAndBack(t *testing.T) {
	dir := t.TempDir()
	tess := openTessera(t, dir, 7, time.Millisecond)
	first := testEntries(0, 300)
	first = inLogOrder(t, first, tess.addAll(t, first, 19), 0)
	tess.cancel()

	w := openWriter(t, dir)
	if w.Size() != 300 {
		t.Fatalf("Writer opened on Tessera's log of 300 entries: Size() = %d", w.Size())
	}
	second := testEntries(300, 700)
	appendInBatches(t, w, second, 1, 3, 256, 100)

	tess = openTessera(t, dir, 7, time.Millisecond)
	last := testEntries(1000, 1)
	if idx := tess.addAll(t, last, 1); idx[0] != 1000 {
		t.Fatalf("Tessera gave the entry after the Writer's 1000 index %d", idx[0])
	}
	tess.cancel()

	all := slices.Concat(first, second, last)
	ref := referenceLog(t, all)
	compareLogs(t, ref, dir, 1001)
	_, ts := readState(t, dir)
	if want := openWriter(t, ref).Root(); !bytes.Equal(ts.Root, want) {
		t.Fatalf("root after Tessera's Add: %x, want %x", ts.Root, want)
	}
}

var errInjected = errors.New("injected crash")

// TestCrashIdempotent interrupts an Append after each number of the files
// it writes: the tree state stays as it was, the Writer is broken, and a
// new Writer appending the same entries ends with the folder of a clean run.
func TestCrashIdempotent(t *testing.T) {
	const baseSize = 65530
	base := t.TempDir()
	// Short entries: hashing, not their bytes, is what the test is about.
	short := make([][]byte, baseSize+300)
	for i := range short {
		short[i] = fmt.Appendf(nil, "%d", i)
	}
	appendInBatches(t, openWriter(t, base), short[:baseSize], 65000, 530)
	batch := short[baseSize:]

	clean := t.TempDir()
	linkFolder(t, base, clean)
	w := openWriter(t, clean)
	var written []string
	w.beforeWrite = func(rel string) error { written = append(written, rel); return nil }
	appendInBatches(t, w, batch, len(batch))
	// Entries 65530..65829: bundles 255 and 256 (full) and 257 (partial),
	// their level-0 tiles, level-1 tiles 0 (full) and 1, level-2 tile 0, and
	// the tree state.
	if len(written) != 10 || written[len(written)-1] != treeStatePath {
		t.Fatalf("the Append wrote %q, want 9 files then %s", written, treeStatePath)
	}

	for k := range written {
		t.Run(fmt.Sprintf("after_%d_files", k), func(t *testing.T) {
			dir := t.TempDir()
			linkFolder(t, base, dir)
			stateBefore, _ := readState(t, dir)
			w := openWriter(t, dir)
			n := 0
			w.beforeWrite = func(string) error {
				if n == k {
					return errInjected
				}
				n++
				return nil
			}
			if _, _, err := w.Append(batch); !errors.Is(err, errInjected) {
				t.Fatalf("Append with a crash after %d files: %v, want the injected error", k, err)
			}
			if stateAfter, _ := readState(t, dir); !bytes.Equal(stateAfter, stateBefore) {
				t.Fatalf("tree state changed by a failed Append: %s, was %s", stateAfter, stateBefore)
			}
			if w.Size() != baseSize {
				t.Fatalf("Size() after a failed Append = %d, want %d", w.Size(), baseSize)
			}
			if _, _, err := w.Append(batch[:1]); err == nil || !strings.Contains(err.Error(), "broken") {
				t.Fatalf("Append after a failed one: %v, want the writer broken", err)
			}
			w = openWriter(t, dir)
			if w.Size() != baseSize {
				t.Fatalf("reopened after a crash: Size() = %d, want %d", w.Size(), baseSize)
			}
			appendInBatches(t, w, batch, len(batch))
			compareFolders(t, clean, dir)
		})
	}
}

// TestOpenFallsBackToFullFiles: when a right-edge partial file is gone but
// the full one is there (an interrupted Append wrote it), Open reads the
// start of the full one, as Tessera's readers do.
func TestOpenFallsBackToFullFiles(t *testing.T) {
	dir := t.TempDir()
	entries := testEntries(0, 260)
	w := openWriter(t, dir)
	appendInBatches(t, w, entries[:250], 250)
	var written []string
	w.beforeWrite = func(rel string) error {
		if len(written) == 2 {
			return errInjected
		}
		written = append(written, rel)
		return nil
	}
	if _, _, err := w.Append(entries[250:]); !errors.Is(err, errInjected) {
		t.Fatalf("Append with a crash after 2 files: %v", err)
	}
	if want := []string{layout.EntriesPath(0, 0), layout.TilePath(0, 0, 0)}; !slices.Equal(written, want) {
		t.Fatalf("the interrupted Append wrote %q, want %q", written, want)
	}
	for _, rel := range []string{layout.EntriesPath(0, 250), layout.TilePath(0, 0, 250)} {
		if err := os.Remove(filepath.Join(dir, rel)); err != nil {
			t.Fatal(err)
		}
	}
	w = openWriter(t, dir)
	if w.Size() != 250 {
		t.Fatalf("Size() = %d, want 250", w.Size())
	}
	appendInBatches(t, w, entries[250:], 10)
	compareLogs(t, referenceLog(t, entries), dir, 260)
}

// TestOpenRefusesDamage: Open refuses a right edge that does not hash to the
// tree state's root, or a partial bundle that does not hash to its tile.
func TestOpenRefusesDamage(t *testing.T) {
	const size = 65536 + 300
	good := t.TempDir()
	appendInBatches(t, openWriter(t, good), testEntries(0, size), 4096)

	flipByte := func(raw []byte) []byte { raw[len(raw)/2] ^= 1; return raw }
	changeState := func(change func(*treeState)) func([]byte) []byte {
		return func(raw []byte) []byte {
			var ts treeState
			if err := json.Unmarshal(raw, &ts); err != nil {
				t.Fatal(err)
			}
			change(&ts)
			raw, _ = json.Marshal(ts)
			return raw
		}
	}
	partialTile := layout.TilePath(0, size/256, size%256)
	partialBundle := layout.EntriesPath(size/256, size%256)
	for _, tc := range []struct {
		name    string
		file    string
		change  func([]byte) []byte
		mention string
	}{
		{"tree state root", treeStatePath, changeState(func(ts *treeState) { ts.Root[0] ^= 1 }), "hash to root"},
		{"tree state size", treeStatePath, changeState(func(ts *treeState) { ts.Size-- }), ""},
		{"level-0 partial tile", partialTile, flipByte, "hash to root"},
		{"level-1 partial tile", layout.TilePath(1, 1, 1), flipByte, "hash to root"},
		{"level-2 partial tile", layout.TilePath(2, 0, 1), flipByte, "hash to root"},
		{"partial entry bundle", partialBundle, flipByte, partialBundle},
		{"missing tile", layout.TilePath(1, 1, 1), func([]byte) []byte { return nil }, layout.TilePath(1, 1, 1)},
		{"truncated tile", partialTile, func(raw []byte) []byte { return raw[:64] }, partialTile},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			linkFolder(t, good, dir)
			replaceTestFile(t, dir, tc.file, tc.change)
			_, err := Open(dir)
			if err == nil {
				t.Fatal("Open accepted a damaged log")
			}
			if !strings.Contains(err.Error(), tc.mention) {
				t.Fatalf("Open: %v; want it to mention %q", err, tc.mention)
			}
		})
	}
}

// TestEntryTooLarge: an entry over 65535 bytes is refused before anything
// is written, and the Writer goes on.
func TestEntryTooLarge(t *testing.T) {
	dir := t.TempDir()
	w := openWriter(t, dir)
	appendInBatches(t, w, testEntries(0, 10), 10)
	before := snapshot(t, dir)
	entries := slices.Concat(testEntries(10, 5), [][]byte{make([]byte, MaxEntrySize+1)})
	_, _, err := w.Append(entries)
	if err == nil || !strings.Contains(err.Error(), "entry 15 ") {
		t.Fatalf("Append with a %d-byte entry: %v, want it refused naming entry 15", MaxEntrySize+1, err)
	}
	if w.Size() != 10 {
		t.Fatalf("Size() = %d after a refused Append, want 10", w.Size())
	}
	compareFolders(t, dirOf(t, before), dir)
	// The largest entry a bundle holds goes in, and the Writer still works.
	appendInBatches(t, w, [][]byte{make([]byte, MaxEntrySize)}, 1)
	ref := referenceLog(t, slices.Concat(testEntries(0, 10), [][]byte{make([]byte, MaxEntrySize)}))
	compareLogs(t, ref, dir, 11)
}

// dirOf writes a snapshot to a new folder.
func dirOf(tb testing.TB, files map[string][]byte) string {
	tb.Helper()
	dir := tb.TempDir()
	for name, raw := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), dirPerm); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(p, raw, filePerm); err != nil {
			tb.Fatal(err)
		}
	}
	return dir
}

// TestEmpty: a new folder is the empty tree, and an empty Append writes nothing.
func TestEmpty(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "log")
	w := openWriter(t, dir)
	if w.Size() != 0 || !bytes.Equal(w.Root(), rfc6962.DefaultHasher.EmptyRoot()) {
		t.Fatalf("new log: size %d root %x", w.Size(), w.Root())
	}
	if fi, err := os.Stat(filepath.Join(dir, stateDir)); err != nil || !fi.IsDir() {
		t.Fatalf("Open did not make %s: %v", stateDir, err)
	}
	size, root, err := w.Append(nil)
	if err != nil || size != 0 || !bytes.Equal(root, rfc6962.DefaultHasher.EmptyRoot()) {
		t.Fatalf("Append(nil) = %d, %x, %v", size, root, err)
	}
	if files := snapshot(t, dir); len(files) != 0 {
		t.Fatalf("an empty Append wrote %d files", len(files))
	}
	// Reopening a log with no tree state yet gives the empty tree too.
	if w := openWriter(t, dir); w.Size() != 0 {
		t.Fatalf("reopened: size %d", w.Size())
	}
}

// TestRefusesSecondWriter: Append stops if the tree state changed under it.
func TestRefusesSecondWriter(t *testing.T) {
	dir := t.TempDir()
	a := openWriter(t, dir)
	b := openWriter(t, dir)
	appendInBatches(t, a, testEntries(0, 3), 3)
	if _, _, err := b.Append(testEntries(3, 1)); err == nil || !strings.Contains(err.Error(), "another writer") {
		t.Fatalf("Append by a second writer: %v, want refused", err)
	}
	appendInBatches(t, a, testEntries(3, 1), 1)
}

// TestTempFileNames: temporary files have the shape the kernel's cleaner
// (kernel/logcheck.go, tempFileName and the partial-folder rule) removes.
func TestTempFileNames(t *testing.T) {
	cleanerPattern := regexp.MustCompile(`^(?:[0-9]{3}[0-9]+|(?:checkpoint|treeState|gcState|version)[0-9]+)$`)
	dir := t.TempDir()
	for _, rel := range []string{"tile/entries/000", "tile/0/x001/234", treeStatePath, "tile/0/000.p/1", "tile/entries/007.p/255"} {
		target := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(target), dirPerm); err != nil {
			t.Fatal(err)
		}
		for range 50 {
			name, err := createTemp(target, []byte("x"))
			if err != nil {
				t.Fatal(err)
			}
			base := filepath.Base(name)
			if !strings.HasPrefix(base, filepath.Base(target)) {
				t.Fatalf("temporary file %s does not start with its target's name", base)
			}
			if filepath.Ext(filepath.Dir(name)) == ".p" {
				if len(base) <= 3 {
					t.Fatalf("temporary file %s in a partial folder is no longer than a width", base)
				}
			} else if !cleanerPattern.MatchString(base) {
				t.Fatalf("temporary file %s does not match the cleaner's pattern", base)
			}
			os.Remove(name)
		}
	}
}

func benchEntries(n int) [][]byte {
	entries := make([][]byte, n)
	for i := range entries {
		e := make([]byte, 300)
		rand.Read(e)
		entries[i] = e
	}
	return entries
}

var benchBatches = []int{1, 64, 1024}

// BenchmarkAppend: one Append of a batch of ~300-byte entries per iteration.
func BenchmarkAppend(b *testing.B) {
	for _, n := range benchBatches {
		b.Run(fmt.Sprintf("batch=%d", n), func(b *testing.B) {
			w := openWriter(b, b.TempDir())
			entries := benchEntries(n)
			b.SetBytes(int64(n * 300))
			b.ResetTimer()
			for b.Loop() {
				if _, _, err := w.Append(entries); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "entries/s")
		})
	}
}

// BenchmarkTesseraAdd is the same-run baseline: the same batches through
// Tessera's POSIX appender, its batch size set to the batch so that each
// batch is one flush, waiting every future.
func BenchmarkTesseraAdd(b *testing.B) {
	for _, n := range benchBatches {
		b.Run(fmt.Sprintf("batch=%d", n), func(b *testing.B) {
			tess := openTessera(b, b.TempDir(), uint(n), time.Second)
			entries := benchEntries(n)
			ctx := context.Background()
			futures := make([]tessera.IndexFuture, n)
			b.SetBytes(int64(n * 300))
			b.ResetTimer()
			for b.Loop() {
				for i, e := range entries {
					futures[i] = tess.add(ctx, tessera.NewEntry(e))
				}
				for _, f := range futures {
					if _, err := f(); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "entries/s")
			tess.cancel()
		})
	}
}

// A right-edge file damaged under an open Writer is found at its next
// Append, which writes nothing: the Writer continues from memory, but
// readers are served that file.
func TestAppendFindsDamagedEdge(t *testing.T) {
	for _, damaged := range []string{
		layout.TilePath(0, 1, 44), // the partial level-0 tile of 300 entries
		layout.TilePath(1, 0, 1),  // the partial level-1 tile
		layout.EntriesPath(1, 44), // the partial entry bundle
	} {
		t.Run(damaged, func(t *testing.T) {
			dir := t.TempDir()
			w, err := Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			if _, _, err := w.Append(testEntries(0, 300)); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, damaged)
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, raw[:len(raw)-3], 0o644); err != nil {
				t.Fatal(err)
			}
			before, _ := os.ReadFile(filepath.Join(dir, ".state", "treeState"))
			if _, _, err := w.Append(testEntries(300, 1)); !errors.Is(err, ErrEdgeChanged) || !strings.Contains(err.Error(), damaged) {
				t.Fatalf("an Append onto a damaged %s: %v", damaged, err)
			}
			if after, _ := os.ReadFile(filepath.Join(dir, ".state", "treeState")); !bytes.Equal(before, after) {
				t.Fatal("the tree state changed")
			}
		})
	}
}

// The writer's hashes, summed over buffers rather than digests made for
// each, are RFC 6962's: leaves of every size (event.LeafHash, one after
// another through its pooled buffers), and interior nodes of two hashes
// (or of anything else, which the hasher takes).
func TestHashesAreRFC6962(t *testing.T) {
	rng := mrand.New(mrand.NewPCG(3, 4))
	random := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	for _, n := range []int{0, 1, 63, 64, 65, 600, 5000, 2, 0, MaxEntrySize} {
		e := random(n)
		if got, want := event.LeafHash(e), hasher.HashLeaf(e); !bytes.Equal(got[:], want) {
			t.Fatalf("leaf of %d bytes: %x, RFC 6962 gives %x", n, got, want)
		}
	}
	for _, sizes := range [][2]int{{32, 32}, {32, 32}, {0, 32}, {31, 33}, {64, 0}} {
		l, r := random(sizes[0]), random(sizes[1])
		if got, want := hashChildren(l, r), hasher.HashChildren(l, r); !bytes.Equal(got, want) {
			t.Fatalf("node of %d and %d bytes: %x, RFC 6962 gives %x", sizes[0], sizes[1], got, want)
		}
	}
	a, b := hashChildren(random(32), random(32)), hashChildren(random(32), random(32))
	if bytes.Equal(a, b) || &a[0] == &b[0] {
		t.Fatal("two nodes share their hash's storage")
	}
}
