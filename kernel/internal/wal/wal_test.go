package wal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// entryAt is the test entry for index i: JSON-like text of varying length,
// empty for every tenth index.
func entryAt(i uint64) []byte {
	if i%10 == 2 {
		return []byte{}
	}
	return fmt.Appendf(nil, `{"i":%d,"pad":"%s"}`, i, strings.Repeat("x", int(i%13)))
}

func entriesFrom(first uint64, n int) [][]byte {
	es := make([][]byte, n)
	for i := range es {
		es[i] = entryAt(first + uint64(i))
	}
	return es
}

func mustOpen(t testing.TB, dir string, from uint64, opts Options) (*Log, []Record, OpenInfo) {
	t.Helper()
	l, records, info, err := Open(dir, from, opts)
	if err != nil {
		t.Fatalf("Open(%d): %v", from, err)
	}
	return l, records, info
}

// exactLayout makes segments that end with their last record, which
// the tests that cut, damage or append bytes by offset need: a segment
// whose writer grew it ahead of its records (Options.GrowBytes) ends with
// zeros, and has its own tests (TestGrownSegment).
var exactLayout = Options{GrowBytes: -1}

// writeLog appends groups of the given sizes from first and closes the
// log; it returns the index after the last entry.
func writeLog(t testing.TB, dir string, first uint64, opts Options, groups ...int) uint64 {
	t.Helper()
	l, _, _ := mustOpen(t, dir, first, opts)
	next := l.Next()
	for _, n := range groups {
		if err := l.Append(next, entriesFrom(next, n)); err != nil {
			t.Fatal(err)
		}
		next += uint64(n)
		if l.Next() != next {
			t.Fatalf("Next() = %d after an append up to %d", l.Next(), next-1)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return next
}

// checkRecords checks that records are entryAt(from), …, entryAt(end-1).
func checkRecords(t testing.TB, records []Record, from, end uint64) {
	t.Helper()
	if uint64(len(records)) != end-min(from, end) {
		t.Fatalf("%d records from %d, want %d (up to %d)", len(records), from, end-min(from, end), end)
	}
	for i, r := range records {
		idx := from + uint64(i)
		if r.Index != idx || !bytes.Equal(r.Entry, entryAt(idx)) {
			t.Fatalf("record %d is %d %q, want %d %q", i, r.Index, r.Entry, idx, entryAt(idx))
		}
	}
}

// snapshot is every file of dir and its bytes.
func snapshot(t testing.TB, dir string) map[string]string {
	t.Helper()
	files := map[string]string{}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		files[e.Name()] = string(b)
	}
	return files
}

func restore(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	os.RemoveAll(dir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(b), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

func segmentNames(t testing.TB, dir string) []string {
	t.Helper()
	var names []string
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if _, ok, _, _ := parseName(e.Name()); ok {
			names = append(names, e.Name())
		}
	}
	return names
}

// span is one record of a segment file where the file lays it out: an
// entry's record, or (version 3) a commit record.
type span struct {
	start, end int
	index      uint64 // an entry's index; a commit record's write's first
	commit     bool
}

// layout returns the records of a segment file that must read whole up to
// its end or to zeros that end it.
func layout(t testing.TB, data []byte) []span {
	t.Helper()
	var spans []span
	version := segmentVersion(data)
	for off := len(SegmentHeader); off < len(data) && !(version >= 2 && allZero(data[off:])); {
		r, problem := decodeRecord(data, off, version)
		if problem != "" {
			t.Fatalf("at %d: %s", off, problem)
		}
		spans = append(spans, span{start: off, end: off + r.size, index: r.index, commit: r.commit})
		off += r.size
	}
	return spans
}

// entrySpans and commitSpans are the entries' records and the commit
// records of a layout.
func entrySpans(spans []span) []span {
	return slices.DeleteFunc(slices.Clone(spans), func(s span) bool { return s.commit })
}

func commitSpans(spans []span) []span {
	return slices.DeleteFunc(slices.Clone(spans), func(s span) bool { return !s.commit })
}

func TestRoundTrip(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "wal")
	l, records, info := mustOpen(t, dir, 0, Options{})
	if len(records) != 0 || l.Next() != 0 || info.Segments != 0 {
		t.Fatalf("a new log: %d records, next %d, %+v", len(records), l.Next(), info)
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("the folder: %v, %v", fi, err)
	}
	l.Close()
	end := writeLog(t, dir, 0, Options{}, 1, 3, 16, 1, 7, 256)

	for _, from := range []uint64{0, 1, 2, 17, end - 1, end, end + 1, end + 1000} {
		l, records, info := mustOpen(t, dir, from, Options{})
		checkRecords(t, records, from, end)
		if want := max(end, from); l.Next() != want {
			t.Errorf("from %d: Next() = %d, want %d", from, l.Next(), want)
		}
		if info.TornBytes != 0 || info.Segments != 1 || info.SegmentsRead != 1 {
			t.Errorf("from %d: %+v", from, info)
		}
		l.Close()
	}

	// Wrong index, closed log.
	l, _, _ = mustOpen(t, dir, 0, Options{})
	if err := l.Append(end+1, entriesFrom(end+1, 1)); err == nil {
		t.Error("an append past Next() was taken")
	}
	if err := l.Append(end-1, entriesFrom(end-1, 1)); err == nil {
		t.Error("an append before Next() was taken")
	}
	if err := l.Append(end, nil); err != nil || l.Next() != end {
		t.Errorf("an empty append: %v, next %d", err, l.Next())
	}
	l.Close()
	if err := l.Append(end, entriesFrom(end, 1)); !errors.Is(err, ErrClosed) {
		t.Errorf("an append after Close: %v", err)
	}

	// The tile log is ahead of the WAL: the next append starts a segment
	// there, and the WAL carries on from it.
	ahead := end + 50
	writeLog(t, dir, ahead, Options{}, 2, 1)
	if names := segmentNames(t, dir); len(names) != 2 || names[1] != segmentName(ahead) {
		t.Fatalf("segments %v", names)
	}
	l, records, _ = mustOpen(t, dir, ahead, Options{})
	checkRecords(t, records, ahead, ahead+3)
	l.Close()
	l, records, _ = mustOpen(t, dir, ahead+1, Options{})
	checkRecords(t, records, ahead+1, ahead+3)
	l.Close()
}

func TestEntryLimits(t *testing.T) {
	dir := t.TempDir()
	l, _, _ := mustOpen(t, dir, 0, Options{})
	defer l.Close()
	big := make([]byte, MaxEntrySize+1)
	if err := l.Append(0, [][]byte{[]byte("a"), big}); !errors.Is(err, ErrEntryTooLarge) {
		t.Fatalf("an entry of %d bytes: %v", len(big), err)
	}
	if l.Next() != 0 || len(segmentNames(t, dir)) != 0 {
		t.Fatal("a refused append left something")
	}
	if err := l.Append(0, [][]byte{big[:MaxEntrySize], {}}); err != nil {
		t.Fatal(err)
	}
	l.Close()
	_, records, _ := mustOpen(t, dir, 0, Options{})
	if len(records) != 2 || len(records[0].Entry) != MaxEntrySize || len(records[1].Entry) != 0 {
		t.Fatalf("read back %d records", len(records))
	}
}

// Every cut inside the last write, as a crash during it leaves, keeps the
// whole records before the cut, cuts the rest off and writes the commit
// record of the records kept; a cut inside the commit record alone (a
// crash while it was written) gives back the file as it was. The log then
// carries on from there.
func TestTornTail(t *testing.T) {
	dir := t.TempDir()
	end := writeLog(t, dir, 0, exactLayout, 5, 4)
	orig := snapshot(t, dir)
	name := segmentName(0)
	data := []byte(orig[name])
	entries := entrySpans(layout(t, data))
	lastWrite := entries[5].start // after the first write's commit record

	for cut := lastWrite + 1; cut < len(data); cut++ {
		restore(t, dir, orig)
		if err := os.Truncate(filepath.Join(dir, name), int64(cut)); err != nil {
			t.Fatal(err)
		}
		// Whole records up to the cut.
		whole := 0
		for whole < len(entries) && entries[whole].end <= cut {
			whole++
		}
		good := lastWrite
		if whole > 5 {
			good = entries[whole-1].end
		}
		// What is left of the cut record is torn, and cut off, unless
		// it is zeros only: those end the records (a grown segment).
		torn, size := cut-good, good
		if allZero(data[good:cut]) {
			torn, size = 0, cut
		}
		if whole > 5 {
			size = max(size, good+commitRecordSize) // the commit record of the records kept
		}
		l, records, info := mustOpen(t, dir, 0, exactLayout)
		checkRecords(t, records, 0, uint64(whole))
		if info.TornBytes != int64(torn) || (torn != 0 && info.TornOffset != int64(good)) {
			t.Fatalf("cut at %d: %+v, want %d bytes torn at %d", cut, info, torn, good)
		}
		if info.UncommittedRecords != whole-5 || (whole > 5 && info.UncommittedFirst != 5) {
			t.Fatalf("cut at %d: %+v, want the %d records kept of the last write committed", cut, info, whole-5)
		}
		if l.Next() != uint64(whole) {
			t.Fatalf("cut at %d: Next() = %d", cut, l.Next())
		}
		got := []byte(snapshot(t, dir)[name])
		if len(got) != size {
			t.Fatalf("cut at %d: the file has %d bytes, want %d", cut, len(got), size)
		}
		if whole == len(entries) && !bytes.Equal(got, data) {
			t.Fatalf("cut at %d, in the commit record: the file is not what the writer wrote", cut)
		}
		// The log carries on where the cut was.
		if err := l.Append(uint64(whole), entriesFrom(uint64(whole), int(end)-whole)); err != nil {
			t.Fatal(err)
		}
		l.Close()
		l, records, info = mustOpen(t, dir, 0, exactLayout)
		checkRecords(t, records, 0, end)
		if info.TornBytes != 0 || info.UncommittedRecords != 0 {
			t.Fatalf("cut at %d: the second open found %+v", cut, info)
		}
		l.Close()
	}
}

// Bytes after the last commit record that a write cut short can leave
// are cut off; a damaged byte in the last write, which was committed, is
// refused; one in its commit record alone loses nothing.
func TestTornTailGarbage(t *testing.T) {
	dir := t.TempDir()
	end := writeLog(t, dir, 0, exactLayout, 3, 2)
	orig := snapshot(t, dir)
	name := segmentName(0)
	data := []byte(orig[name])

	rng := rand.New(rand.NewPCG(1, 2))
	random := make([]byte, 300)
	for i := range random {
		random[i] = byte(rng.Uint32())
	}
	badCRC := AppendRecord(nil, end, entryAt(end), true)
	badCRC[5] ^= 1
	// Zeros after the records end them: nothing is torn or cut.
	for _, zeros := range []int{1, 15, 16, 4096} {
		restore(t, dir, orig)
		grown := append(slices.Clone(data), make([]byte, zeros)...)
		if err := os.WriteFile(filepath.Join(dir, name), grown, 0o600); err != nil {
			t.Fatal(err)
		}
		l, records, info := mustOpen(t, dir, 0, exactLayout)
		checkRecords(t, records, 0, end)
		if info.TornBytes != 0 || l.Next() != end {
			t.Errorf("%d zeros: %+v, next %d", zeros, info, l.Next())
		}
		l.Close()
		if got := snapshot(t, dir)[name]; got != string(grown) {
			t.Errorf("%d zeros: the file changed", zeros)
		}
	}
	variants := map[string][]byte{
		"a one":                  {1},
		"zeros, then a one":      append(make([]byte, 15), 1),
		"zeros, 4096, then 0xff": append(make([]byte, 4096), 0xff),
		"random":                 random,
		"0xff":                   bytes.Repeat([]byte{0xff}, 40),
		"next record, bad CRC":   badCRC,
		"next record, cut":       AppendRecord(nil, end, []byte("a longer entry than that"), true)[:30],
		"huge length":            {0x7f, 0xff, 0xff, 0xff, 1, 2, 3, 4, 0, 0, 0, 0, 0, 0, 0, 5},
	}
	for what, garbage := range variants {
		restore(t, dir, orig)
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, append(slices.Clone(data), garbage...), 0o600); err != nil {
			t.Fatal(err)
		}
		l, records, info := mustOpen(t, dir, 0, exactLayout)
		checkRecords(t, records, 0, end)
		if info.TornBytes != int64(len(garbage)) || info.TornOffset != int64(len(data)) {
			t.Errorf("%s: %+v", what, info)
		}
		if l.Next() != end {
			t.Errorf("%s: Next() = %d", what, l.Next())
		}
		l.Close()
		if got := snapshot(t, dir)[name]; got != string(data) {
			t.Errorf("%s: the file was not cut back to its records", what)
		}
	}

	// A damaged byte in the last write, which was acknowledged (its commit
	// record follows it), is damage, whatever byte is hit: refused, naming
	// the file, the record's offset and the indices from it to the write's
	// end, and the file left as it was.
	spans := layout(t, data)
	commit := spans[len(spans)-1]
	path := filepath.Join(dir, name)
	for _, r := range entrySpans(spans)[end-2:] {
		for off := r.start; off < r.end; off++ {
			for _, flip := range []byte{0x01, 0x80} {
				damaged := xorAt(data, off, flip)
				restore(t, dir, map[string]string{name: string(damaged)})
				_, _, _, err := Open(dir, 0, exactLayout)
				var damage *DamageError
				if !errors.As(err, &damage) || !errors.Is(err, ErrDamaged) {
					t.Fatalf("byte %d of record %d ^%#x: %v, want a *DamageError", off-r.start, r.index, flip, err)
				}
				if damage.File != path || damage.Offset != int64(r.start) || damage.First != r.index || damage.End != end || !damage.EndKnown {
					t.Fatalf("byte %d of record %d ^%#x: %+v, want %s at offset %d, indices %d to %d", off-r.start, r.index, flip, damage, path, r.start, r.index, end-1)
				}
				if got := snapshot(t, dir)[name]; got != string(damaged) {
					t.Fatalf("byte %d of record %d: a refused Open changed the file", off-r.start, r.index)
				}
			}
		}
	}
	// A damaged byte in the commit record itself: every record reads
	// back and is kept, and the commit record is written again.
	for off := commit.start; off < commit.end; off++ {
		restore(t, dir, map[string]string{name: string(xorAt(data, off, 0x10))})
		l, records, info := mustOpen(t, dir, 0, exactLayout)
		checkRecords(t, records, 0, end)
		if info.TornBytes != commitRecordSize || info.UncommittedRecords != 2 {
			t.Fatalf("byte %d of the commit record: %+v", off-commit.start, info)
		}
		l.Close()
		if got := snapshot(t, dir)[name]; got != string(data) {
			t.Fatalf("byte %d of the commit record: the commit record was not written again", off-commit.start)
		}
	}

	// Zeros after a bare header, at index 0: a record of zeros does not
	// verify (its CRC would have to be that of eight zero bytes), so they
	// hold no record; then a one, which makes them a torn tail.
	zdir := t.TempDir()
	for _, c := range []struct {
		tail []byte
		torn int64
	}{{make([]byte, 64), 0}, {append(make([]byte, 64), 1), 65}} {
		if err := os.WriteFile(filepath.Join(zdir, segmentName(0)), append([]byte(SegmentHeader), c.tail...), 0o600); err != nil {
			t.Fatal(err)
		}
		l, records, info := mustOpen(t, zdir, 0, exactLayout)
		if len(records) != 0 || info.TornBytes != c.torn || l.Next() != 0 {
			t.Fatalf("zeros: %d records, %+v; want %d bytes torn", len(records), info, c.torn)
		}
		l.Close()
	}
}

// Damage anywhere but at the end of the newest segment fails Open and
// leaves the disk as it was.
func TestDamage(t *testing.T) {
	expectDamage := func(t *testing.T, dir string, from uint64, what string, wantErr error) {
		t.Helper()
		before := snapshot(t, dir)
		l, records, _, err := Open(dir, from, exactLayout)
		if !errors.Is(err, wantErr) {
			if l != nil {
				l.Close()
			}
			t.Fatalf("%s: Open gives %d records, err %v; want %v", what, len(records), err, wantErr)
		}
		if l != nil || records != nil {
			t.Fatalf("%s: Open returned a log along with %v", what, err)
		}
		if after := snapshot(t, dir); !mapsEqual(before, after) {
			t.Fatalf("%s: a failed Open changed the disk", what)
		}
	}

	t.Run("a record before the last", func(t *testing.T) {
		dir := t.TempDir()
		writeLog(t, dir, 0, exactLayout, 4, 3)
		orig := snapshot(t, dir)
		name := segmentName(0)
		data := []byte(orig[name])
		entries := entrySpans(layout(t, data))
		// Every record of every write, the last included: its commit
		// record, or the next write, verifies after it.
		for r, sp := range entries {
			for off := sp.start; off < sp.end; off++ {
				for _, flip := range []byte{0x01, 0x80} {
					damaged := slices.Clone(data)
					damaged[off] ^= flip
					restore(t, dir, map[string]string{name: string(damaged)})
					expectDamage(t, dir, 0, fmt.Sprintf("record %d byte %d ^%#x", r, off-sp.start, flip), ErrDamaged)
				}
			}
		}
		// Below from, in a segment that is read: still damage.
		damaged := slices.Clone(data)
		damaged[len(SegmentHeader)+20] ^= 1
		restore(t, dir, map[string]string{name: string(damaged)})
		expectDamage(t, dir, 5, "a record below from", ErrDamaged)
		// A record missing from the middle.
		cut := append(slices.Clone(data[:entries[1].end]), data[entries[2].end:]...)
		restore(t, dir, map[string]string{name: string(cut)})
		expectDamage(t, dir, 0, "a record left out", ErrDamaged)
		// A record written twice.
		twice := append(slices.Clone(data[:entries[2].end]), data[entries[1].end:]...)
		restore(t, dir, map[string]string{name: string(twice)})
		expectDamage(t, dir, 0, "a record written twice", ErrDamaged)
		// The header.
		for off := range len(SegmentHeader) {
			damaged := slices.Clone(data)
			damaged[off] ^= 0x20
			restore(t, dir, map[string]string{name: string(damaged)})
			expectDamage(t, dir, 0, fmt.Sprintf("header byte %d", off), ErrDamaged)
		}
		restore(t, dir, map[string]string{name: SegmentHeader[:10]})
		expectDamage(t, dir, 0, "a short header", ErrDamaged)
		restore(t, dir, map[string]string{name: ""})
		expectDamage(t, dir, 0, "an empty file", ErrDamaged)
		// A segment named other than its first record.
		restore(t, dir, map[string]string{segmentName(1): string(data)})
		expectDamage(t, dir, 1, "a misnamed segment", ErrDamaged)
	})

	t.Run("a closed segment", func(t *testing.T) {
		dir := t.TempDir()
		writeLog(t, dir, 0, Options{SegmentBytes: 60, GrowBytes: -1}, 3, 3, 3, 3)
		orig := snapshot(t, dir)
		names := segmentNames(t, dir)
		if len(names) != 4 {
			t.Fatalf("segments %v", names)
		}
		closed := names[1]
		data := []byte(orig[closed])
		spans := layout(t, data)
		lastRecord := entrySpans(spans)[len(entrySpans(spans))-1]
		variants := map[string][]byte{
			"its commit record cut":   data[:len(data)-1],
			"its commit record gone":  data[:len(data)-commitRecordSize],
			"its commit record ^0x01": xorAt(data, len(data)-1, 1),
			"its last write gone":     data[:len(SegmentHeader)],
			"bytes after its last":    append(slices.Clone(data), 0, 0, 1),
			"its last record ^0x01":   xorAt(data, lastRecord.end-1, 1),
			"its first record ^0x01":  xorAt(data, len(SegmentHeader)+3, 1),
		}
		for what, b := range variants {
			files := maps(orig)
			files[closed] = string(b)
			restore(t, dir, files)
			if what == "its last write gone" {
				expectDamage(t, dir, 0, what, ErrGap)
				continue
			}
			expectDamage(t, dir, 0, what, ErrDamaged)
		}
		// A segment named within its predecessor.
		files := maps(orig)
		delete(files, names[2])
		first, _, _, _ := parseName(names[2])
		files[segmentName(first-1)] = orig[names[2]]
		restore(t, dir, files)
		expectDamage(t, dir, 0, "overlapping segments", ErrDamaged)

		// A damaged segment wholly below from is not read.
		files = maps(orig)
		files[names[0]] = string(xorAt([]byte(orig[names[0]]), len(SegmentHeader)+3, 1))
		restore(t, dir, files)
		second, _, _, _ := parseName(names[1])
		l, _, info, err := Open(dir, second, exactLayout)
		if err != nil || info.SegmentsRead != 3 {
			t.Fatalf("damage below from: %v, %+v", err, info)
		}
		l.Close()
	})
}

func xorAt(b []byte, off int, x byte) []byte {
	b = slices.Clone(b)
	b[off] ^= x
	return b
}

func maps(m map[string]string) map[string]string {
	c := make(map[string]string, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func TestGap(t *testing.T) {
	t.Run("starts after from", func(t *testing.T) {
		dir := t.TempDir()
		end := writeLog(t, dir, 10, Options{}, 5)
		for _, from := range []uint64{0, 5, 9} {
			if _, _, _, err := Open(dir, from, Options{}); !errors.Is(err, ErrGap) {
				t.Errorf("from %d: %v", from, err)
			}
		}
		for _, from := range []uint64{10, 12, end, end + 3} {
			l, records, _ := mustOpen(t, dir, from, Options{})
			checkRecords(t, records, from, end)
			l.Close()
		}
	})
	t.Run("an empty segment after from", func(t *testing.T) {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, segmentName(10)), []byte(SegmentHeader), 0o600)
		if _, _, _, err := Open(dir, 9, Options{}); !errors.Is(err, ErrGap) {
			t.Errorf("%v", err)
		}
		l, records, _ := mustOpen(t, dir, 10, Options{})
		if len(records) != 0 || l.Next() != 10 {
			t.Errorf("%d records, next %d", len(records), l.Next())
		}
		l.Close()
	})
	t.Run("a missing segment", func(t *testing.T) {
		dir := t.TempDir()
		end := writeLog(t, dir, 0, Options{SegmentBytes: 100}, 3, 3, 3, 3)
		names := segmentNames(t, dir)
		os.Remove(filepath.Join(dir, names[1]))
		if _, _, _, err := Open(dir, 0, Options{}); !errors.Is(err, ErrGap) {
			t.Errorf("%v", err)
		}
		// From the segment after the missing one on, nothing is missing.
		third, _, _, _ := parseName(names[2])
		l, records, _ := mustOpen(t, dir, third, Options{})
		checkRecords(t, records, third, end)
		l.Close()
	})
}

func TestRotationAndRelease(t *testing.T) {
	dir := t.TempDir()
	opts := Options{SegmentBytes: 150}
	var groups []int
	for i := range 40 {
		groups = append(groups, 1+i%4)
	}
	end := writeLog(t, dir, 0, opts, groups...)
	names := segmentNames(t, dir)
	if len(names) < 20 {
		t.Fatalf("only %d segments", len(names))
	}
	for _, n := range names[:len(names)-1] {
		fi, _ := os.Stat(filepath.Join(dir, n))
		if fi.Size() < 150 {
			t.Errorf("%s was closed at %d bytes", n, fi.Size())
		}
	}
	firsts := make([]uint64, len(names))
	for i, n := range names {
		firsts[i], _, _, _ = parseName(n)
	}

	l, records, info := mustOpen(t, dir, 0, opts)
	checkRecords(t, records, 0, end)
	if info.Segments != len(names) || info.SegmentsRead != len(names) {
		t.Fatalf("%+v", info)
	}
	for _, upTo := range []uint64{0, 1, firsts[1] - 1, firsts[1], firsts[3] + 1, firsts[10], end - 1, end, end + 5} {
		if err := l.Release(upTo); err != nil {
			t.Fatal(err)
		}
		// Exactly the segments whose records are all below upTo are
		// gone, never the newest.
		var want []string
		for i, n := range names {
			if i == len(names)-1 || firsts[i+1] > upTo {
				want = append(want, n)
			}
		}
		if got := segmentNames(t, dir); !slices.Equal(got, want) {
			t.Fatalf("Release(%d) left %v, want %v", upTo, got, want)
		}
		from := min(upTo, end)
		l2, records, info := mustOpen(t, dir, from, opts)
		checkRecords(t, records, from, end)
		if info.Segments != len(want) {
			t.Fatalf("%+v", info)
		}
		l2.Close()
	}
	// The log goes on after a full release.
	if err := l.Append(end, entriesFrom(end, 3)); err != nil {
		t.Fatal(err)
	}
	l.Close()
	l, records, _ = mustOpen(t, dir, end, opts)
	checkRecords(t, records, end, end+3)
	l.Close()
}

// Release runs in the integrator's goroutine while the committer appends.
func TestReleaseDuringAppend(t *testing.T) {
	dir := t.TempDir()
	l, _, _ := mustOpen(t, dir, 0, Options{SegmentBytes: 200})
	var released sync.WaitGroup
	progress := make(chan uint64, 1000)
	released.Add(1)
	go func() {
		defer released.Done()
		for upTo := range progress {
			if err := l.Release(upTo); err != nil {
				t.Error(err)
			}
		}
	}()
	var next uint64
	for i := range 300 {
		n := 1 + i%5
		if err := l.Append(next, entriesFrom(next, n)); err != nil {
			t.Fatal(err)
		}
		next += uint64(n)
		progress <- next - uint64(i%7) // the tile log lags a little
	}
	close(progress)
	released.Wait()
	if err := l.Release(next); err != nil {
		t.Fatal(err)
	}
	if names := segmentNames(t, dir); len(names) != 1 {
		t.Fatalf("after releasing everything: %v", names)
	}
	l.Close()
	l, records, _ := mustOpen(t, dir, next, Options{})
	if len(records) != 0 || l.Next() != next {
		t.Fatalf("%d records, next %d", len(records), l.Next())
	}
	l.Close()
}

// A failed append is cut back; a failed cut-back breaks the Log.
func TestAppendFailure(t *testing.T) {
	injected := errors.New("injected")
	dir := t.TempDir()
	l, _, _ := mustOpen(t, dir, 0, exactLayout)
	if err := l.Append(0, entriesFrom(0, 4)); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, segmentName(0))
	size := func() int64 {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	before := size()
	realWrite, realSync, realTruncate := l.writeAt, l.syncData, l.truncate

	// A write that lands halfway.
	l.writeAt = func(f *os.File, b []byte, off int64) (int, error) {
		n, _ := realWrite(f, b[:len(b)/2], off)
		return n, injected
	}
	if err := l.Append(4, entriesFrom(4, 3)); !errors.Is(err, injected) {
		t.Fatalf("%v", err)
	}
	if size() != before || l.Next() != 4 {
		t.Fatalf("after a failed write: %d bytes (was %d), next %d", size(), before, l.Next())
	}
	// A short write without an error.
	l.writeAt = func(f *os.File, b []byte, off int64) (int, error) {
		return realWrite(f, b[:len(b)-1], off)
	}
	if err := l.Append(4, entriesFrom(4, 3)); err == nil || size() != before || l.Next() != 4 {
		t.Fatalf("a short write: %v, %d bytes", err, size())
	}
	// A write that lands, and a sync that fails.
	l.writeAt = realWrite
	fails := 1
	l.syncData = func(f *os.File) error {
		if fails > 0 {
			fails--
			return injected
		}
		return realSync(f)
	}
	if err := l.Append(4, entriesFrom(4, 3)); !errors.Is(err, injected) {
		t.Fatalf("%v", err)
	}
	if size() != before || l.Next() != 4 {
		t.Fatalf("after a failed sync: %d bytes (was %d), next %d", size(), before, l.Next())
	}
	// The log is not broken: the same entries go in.
	if err := l.Append(4, entriesFrom(4, 3)); err != nil {
		t.Fatal(err)
	}
	before = size()

	// A write and sync that succeed and a commit record that cannot be
	// written: the entries are durable but were never acknowledged, and
	// without their commit record damage to them would read as a torn
	// write: cut back like any failure.
	commitFails := func(short bool) func(f *os.File, b []byte, off int64) (int, error) {
		return func(f *os.File, b []byte, off int64) (int, error) {
			if len(b) != commitRecordSize {
				return realWrite(f, b, off)
			}
			if short {
				return realWrite(f, b[:commitRecordSize-1], off)
			}
			return 0, injected
		}
	}
	for _, short := range []bool{false, true} {
		l.writeAt = commitFails(short)
		if err := l.Append(7, entriesFrom(7, 2)); err == nil || !strings.Contains(err.Error(), "commit record") || (!short && !errors.Is(err, injected)) {
			t.Fatalf("a commit record that fails (short %v): %v", short, err)
		}
		if size() != before || l.Next() != 7 {
			t.Fatalf("after a failed commit record (short %v): %d bytes (was %d), next %d", short, size(), before, l.Next())
		}
	}
	// And if the cut-back fails too, the log is broken.
	l.writeAt, l.truncate = commitFails(false), func(*os.File, int64) error { return injected }
	if err := l.Append(7, entriesFrom(7, 2)); !errors.Is(err, ErrBroken) {
		t.Fatalf("a commit record that fails, and its cut-back: %v", err)
	}
	l.writeAt, l.truncate = realWrite, realTruncate
	l.Close()
	l, records, info := mustOpen(t, dir, 0, exactLayout)
	checkRecords(t, records, 0, 9) // durable, as after a crash before the receipt
	if info.UncommittedRecords != 2 || info.TornBytes != 0 {
		t.Fatalf("after a broken commit record: %+v", info)
	}
	// Put the log back as it was for what follows.
	l.Close()
	if err := os.Truncate(path, before); err != nil {
		t.Fatal(err)
	}
	l, _, _ = mustOpen(t, dir, 0, exactLayout)
	realWrite, realSync, realTruncate = l.writeAt, l.syncData, l.truncate

	// A failed write whose cut-back fails breaks the log. The write
	// lands but for its last 5 bytes: one whole record and a torn one.
	l.writeAt = func(f *os.File, b []byte, off int64) (int, error) {
		n, _ := realWrite(f, b[:len(b)-5], off)
		return n, injected
	}
	l.truncate = func(*os.File, int64) error { return injected }
	err := l.Append(7, entriesFrom(7, 2))
	if !errors.Is(err, ErrBroken) {
		t.Fatalf("%v", err)
	}
	l.writeAt, l.truncate = realWrite, realTruncate
	if err := l.Append(7, entriesFrom(7, 2)); !errors.Is(err, ErrBroken) {
		t.Fatalf("a broken log took an append: %v", err)
	}
	if size() <= before {
		t.Fatal("the injected write did not land")
	}
	l.Close()
	// Open decides from the disk: the whole record of the failed write is
	// returned (like any entry durable before its receipt went out), and
	// committed; the rest is a torn tail.
	l, records, info = mustOpen(t, dir, 0, exactLayout)
	checkRecords(t, records, 0, 8)
	rec7, rec8 := len(AppendRecord(nil, 7, entryAt(7), true)), len(AppendRecord(nil, 8, entryAt(8), false))
	if want := before + int64(rec7) + commitRecordSize; info.TornBytes != int64(rec8-5) || info.UncommittedRecords != 1 || size() != want {
		t.Fatalf("%+v, %d bytes (want %d)", info, size(), want)
	}
	l.Close()

	// A sync that fails after the cut-back truncated: broken too.
	l, _, _ = mustOpen(t, dir, 0, exactLayout)
	l.syncData = func(*os.File) error { return injected }
	if err := l.Append(8, entriesFrom(8, 1)); !errors.Is(err, ErrBroken) {
		t.Fatalf("%v", err)
	}
	l.Close()
}

// A failure in the first append of a segment leaves the segment empty; the
// next append uses it.
func TestAppendFailureInNewSegment(t *testing.T) {
	injected := errors.New("injected")
	dir := t.TempDir()
	l, _, _ := mustOpen(t, dir, 0, Options{SegmentBytes: 50})
	if err := l.Append(0, entriesFrom(0, 4)); err != nil {
		t.Fatal(err)
	}
	realWrite := l.writeAt
	l.writeAt = func(*os.File, []byte, int64) (int, error) { return 0, injected }
	if err := l.Append(4, entriesFrom(4, 1)); !errors.Is(err, injected) {
		t.Fatal(err)
	}
	if got := snapshot(t, dir)[segmentName(4)]; got != SegmentHeader {
		t.Fatalf("the new segment holds %q", got)
	}
	l.Close()
	// Reopened with the empty segment newest.
	l, records, _ := mustOpen(t, dir, 0, Options{SegmentBytes: 50})
	checkRecords(t, records, 0, 4)
	l.writeAt = realWrite
	if err := l.Append(4, entriesFrom(4, 2)); err != nil {
		t.Fatal(err)
	}
	l.Close()
	if names := segmentNames(t, dir); len(names) != 2 {
		t.Fatalf("segments %v", names)
	}
	l, records, _ = mustOpen(t, dir, 0, Options{})
	checkRecords(t, records, 0, 6)
	l.Close()
}

// An empty newest segment left behind when the tile log moves ahead is
// removed, not closed: a closed segment always has records.
func TestEmptySegmentSkipped(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, segmentName(5)), []byte(SegmentHeader), 0o600); err != nil {
		t.Fatal(err)
	}
	l, _, _ := mustOpen(t, dir, 9, Options{})
	if err := l.Append(9, entriesFrom(9, 2)); err != nil {
		t.Fatal(err)
	}
	l.Close()
	if names := segmentNames(t, dir); !slices.Equal(names, []string{segmentName(9)}) {
		t.Fatalf("segments %v", names)
	}
}

func TestOtherFiles(t *testing.T) {
	dir := t.TempDir()
	end := writeLog(t, dir, 0, Options{}, 3)
	others := []string{"README", "00000000000000000001.wal.bak", "0000000000000000001.wal", "x0000000000000000001.wal"}
	for _, n := range others {
		os.WriteFile(filepath.Join(dir, n), []byte("keep"), 0o600)
	}
	tmp := fmt.Sprintf("%020d%s", end, tempSuffix)
	os.WriteFile(filepath.Join(dir, tmp), []byte(SegmentHeader[:5]), 0o600)
	l, records, info := mustOpen(t, dir, 0, Options{})
	checkRecords(t, records, 0, end)
	if info.TempFilesRemoved != 1 || info.Segments != 1 {
		t.Fatalf("%+v", info)
	}
	files := snapshot(t, dir)
	if _, ok := files[tmp]; ok {
		t.Error("the stale temporary file is still there")
	}
	for _, n := range others {
		if files[n] != "keep" {
			t.Errorf("%s was touched", n)
		}
	}
	l.Close()

	// A name of twenty digits past 2^64-1.
	os.WriteFile(filepath.Join(dir, "99999999999999999999.wal"), []byte(SegmentHeader), 0o600)
	if _, _, _, err := Open(dir, 0, Options{}); !errors.Is(err, ErrDamaged) {
		t.Errorf("%v", err)
	}
}

func TestRecordCRCCoversTheIndex(t *testing.T) {
	// The check value of CRC-32C (Castagnoli), not of the IEEE CRC-32.
	if got := crc32.Checksum([]byte("123456789"), castagnoli); got != 0xe3069283 {
		t.Errorf("CRC-32C check value %08x", got)
	}
	if got := recordCRC(make([]byte, 4), make([]byte, 8)); got == 0 {
		t.Error("a record of zeros would verify")
	}
	if got := recordCRCV1(make([]byte, 8)); got == 0 {
		t.Error("a version 1 record of zeros would verify")
	}
	a := AppendRecord(nil, 1, []byte("x"), false)
	b := AppendRecord(nil, 2, []byte("x"), false)
	if bytes.Equal(a[4:8], b[4:8]) {
		t.Error("the CRC does not depend on the index")
	}
	// The mark of a write's first record is covered too: flipping it
	// fails the CRC.
	c := AppendRecord(nil, 1, []byte("x"), true)
	if !bytes.Equal(a[:4], xorAt(c[:4], 0, 0x80)) || bytes.Equal(a[4:8], c[4:8]) {
		t.Errorf("marked %x, unmarked %x: the CRC does not cover the mark", c[:8], a[:8])
	}
	if _, problem := decodeRecord(xorAt(c, 0, 0x80), 0, 2); problem == "" {
		t.Error("a record whose mark flipped verifies")
	}
}

// appendRecordV1 is AppendRecord in the first version's format, which the
// package reads but no longer writes: no mark, and a CRC of the index and
// the entry only.
func appendRecordV1(dst []byte, index uint64, entry []byte) []byte {
	start := len(dst)
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(entry)))
	dst = binary.BigEndian.AppendUint32(dst, 0)
	dst = binary.BigEndian.AppendUint64(dst, index)
	dst = append(dst, entry...)
	binary.BigEndian.PutUint32(dst[start+4:], recordCRCV1(dst[start+8:]))
	return dst
}

// Read returns what Open would, and changes nothing: a torn tail is
// reported, not cut; temporary segments stay; a missing folder holds no
// records and is not made; damage is an error as for Open.
func TestReadChangesNothing(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "wal")
	if records, info, err := Read(dir, 0); err != nil || len(records) != 0 || info.Segments != 0 {
		t.Fatalf("Read of a missing folder = %d records, %+v, %v", len(records), info, err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Read made the folder: %v", err)
	}
	end := writeLog(t, dir, 0, Options{SegmentBytes: 200, GrowBytes: -1}, 5, 4, 3)
	name := segmentNames(t, dir)[len(segmentNames(t, dir))-1]
	f, err := os.OpenFile(filepath.Join(dir, name), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte{0, 0, 0, 9, 1, 2}); err != nil { // a write cut short
		t.Fatal(err)
	}
	f.Close()
	if err := os.WriteFile(filepath.Join(dir, segmentName(end)+".tmp"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, dir)
	for _, from := range []uint64{0, 3, end - 1, end, end + 5} {
		records, info, err := Read(dir, from)
		if err != nil {
			t.Fatalf("Read(%d): %v", from, err)
		}
		checkRecords(t, records, from, end)
		if info.TornBytes != 6 {
			t.Fatalf("Read(%d) reports %d torn bytes, want 6", from, info.TornBytes)
		}
	}
	if after := snapshot(t, dir); !mapsEqual(before, after) {
		t.Fatal("Read changed the folder")
	}
	// Open then cuts the tail and returns the same records.
	l, records, info := mustOpen(t, dir, 0, exactLayout)
	checkRecords(t, records, 0, end)
	if info.TornBytes != 6 {
		t.Fatalf("Open cut %d bytes, want 6", info.TornBytes)
	}
	l.Close()

	// Damage in a segment that is not the newest is an error.
	first := segmentNames(t, dir)[0]
	data := []byte(snapshot(t, dir)[first])
	if err := os.WriteFile(filepath.Join(dir, first), xorAt(data, len(SegmentHeader)+9, 0xff), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Read(dir, 0); !errors.Is(err, ErrDamaged) {
		t.Fatalf("Read of a damaged segment: %v, want ErrDamaged", err)
	}
}

// A crash during a write may keep any of its pages: a later record of the
// write can land where an earlier one did not. That write was never
// acknowledged: it has no commit record, and its records carry no mark of
// a write's first record past the first: the fault and all after it are a
// torn tail, cut off, whatever record of the last write is hit, and the
// records before the fault are committed. The writes before it are whole.
// The same faults with the write's commit record after them are damage:
// that write was synced, and may have been acknowledged.
func TestTornWriteOutOfOrder(t *testing.T) {
	dir := t.TempDir()
	writeLog(t, dir, 0, exactLayout, 3, 5)
	committed := []byte(snapshot(t, dir)[segmentName(0)])
	name := segmentName(0)
	// The crash came before the last write's commit record.
	data := committed[:len(committed)-commitRecordSize]
	entries := entrySpans(layout(t, data))
	const lastWrite = 3 // the index of the last write's first record
	for r := lastWrite; r < len(entries); r++ {
		start, end := entries[r].start, entries[r].end
		for what, damage := range map[string]func([]byte){
			"zeros":     func(b []byte) { clear(b[start:end]) },
			"a bit":     func(b []byte) { b[start+17] ^= 0x04 },
			"its mark":  func(b []byte) { b[start] ^= 0x80 },
			"a garbage": func(b []byte) { copy(b[start:], bytes.Repeat([]byte{0xa5}, end-start)) },
		} {
			// With the commit record: damage, the indices from r to the
			// write's end named.
			damaged := slices.Clone(committed)
			damage(damaged)
			restore(t, dir, map[string]string{name: string(damaged)})
			_, _, _, err := Open(dir, 0, exactLayout)
			var de *DamageError
			if !errors.As(err, &de) || de.Offset != int64(start) || de.First != uint64(r) || de.End != uint64(len(entries)) || !de.EndKnown ||
				!strings.Contains(err.Error(), "so this is damage, not a torn tail") {
				t.Fatalf("record %d (%s), committed: %v, want damage at offset %d, indices %d to %d", r, what, err, start, r, len(entries)-1)
			}

			// Without it: a torn write.
			damaged = slices.Clone(data)
			damage(damaged)
			restore(t, dir, map[string]string{name: string(damaged)})
			l, records, info, err := Open(dir, 0, exactLayout)
			if err != nil {
				t.Fatalf("record %d (%s): %v", r, what, err)
			}
			checkRecords(t, records, 0, uint64(r))
			switch {
			case allZero(damaged[start:]):
				// The last record zeroed: zeros end the records.
				if info.TornBytes != 0 {
					t.Fatalf("record %d (%s): %+v", r, what, info)
				}
			case info.TornOffset != int64(start) || info.TornBytes != int64(len(data)-start) || info.TornRecordsAfter != len(entries)-1-r:
				t.Fatalf("record %d (%s): %+v", r, what, info)
			}
			if info.TornRecordsAfter > 0 && !strings.Contains(info.TornReason, "of the interrupted write") {
				t.Errorf("record %d (%s): the reason does not say what was cut: %q", r, what, info.TornReason)
			}
			if info.UncommittedRecords != r-lastWrite {
				t.Fatalf("record %d (%s): %d records of the last write committed at Open, want %d", r, what, info.UncommittedRecords, r-lastWrite)
			}
			// The log carries on from the fault, and reads back whole.
			if err := l.Append(uint64(r), entriesFrom(uint64(r), 2)); err != nil {
				t.Fatal(err)
			}
			l.Close()
			l, records, info = mustOpen(t, dir, 0, exactLayout)
			checkRecords(t, records, 0, uint64(r)+2)
			if info.TornBytes != 0 || info.UncommittedRecords != 0 {
				t.Fatalf("record %d (%s): reopened with %+v", r, what, info)
			}
			l.Close()
		}
	}
	// Records missing from the middle of the last write, with its end
	// landed, as a crash that kept its first and last pages leaves.
	hole := slices.Clone(data)
	clear(hole[entries[lastWrite+1].start:entries[len(entries)-2].end])
	restore(t, dir, map[string]string{name: string(hole)})
	l, records, info := mustOpen(t, dir, 0, exactLayout)
	checkRecords(t, records, 0, lastWrite+1)
	if info.TornRecordsAfter != 1 {
		t.Fatalf("a hole in the last write: %+v", info)
	}
	l.Close()
}

// The same faults in a write before the last are damage whether or not
// the last write has its commit record: the write's own commit record, or
// the next write's first record, marked, verifies after them, so they had
// been synced.
func TestDamageBeforeALaterWrite(t *testing.T) {
	dir := t.TempDir()
	writeLog(t, dir, 0, exactLayout, 3, 5, 1)
	orig := snapshot(t, dir)
	name := segmentName(0)
	committed := []byte(orig[name])
	for _, data := range [][]byte{committed, committed[:len(committed)-commitRecordSize]} {
		entries := entrySpans(layout(t, data))
		for r := range entries[:len(entries)-1] { // every record of the first two writes
			damaged := slices.Clone(data)
			clear(damaged[entries[r].start:entries[r].end])
			restore(t, dir, map[string]string{name: string(damaged)})
			if _, _, _, err := Open(dir, 0, exactLayout); !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), "so this is damage, not a torn tail") {
				t.Fatalf("record %d zeroed: %v, want ErrDamaged", r, err)
			}
			if got := snapshot(t, dir)[name]; got != string(damaged) {
				t.Fatalf("record %d: a failed Open changed the file", r)
			}
		}
	}
}

// Segments of the first version are read by its rules (a record that
// verifies after a fault is damage, whatever wrote it), and the log goes on
// in a new segment of version 2; an empty version 1 segment where that
// segment goes is replaced.
func TestVersion1Segments(t *testing.T) {
	v1 := func(first uint64, n int) []byte {
		b := []byte(SegmentHeaderV1)
		for i := range n {
			b = appendRecordV1(b, first+uint64(i), entryAt(first+uint64(i)))
		}
		return b
	}
	dir := t.TempDir()
	restore(t, dir, map[string]string{segmentName(0): string(v1(0, 5))})
	l, records, _ := mustOpen(t, dir, 0, Options{})
	checkRecords(t, records, 0, 5)
	if err := l.Append(5, entriesFrom(5, 3)); err != nil {
		t.Fatal(err)
	}
	l.Close()
	files := snapshot(t, dir)
	if !strings.HasPrefix(files[segmentName(0)], SegmentHeaderV1) || !strings.HasPrefix(files[segmentName(5)], SegmentHeader) || len(files) != 2 {
		t.Fatalf("after an append to a version 1 log: %v", slices.Sorted(func(yield func(string) bool) {
			for n := range files {
				if !yield(n) {
					return
				}
			}
		}))
	}
	if files[segmentName(0)] != string(v1(0, 5)) {
		t.Fatal("the version 1 segment changed")
	}
	l, records, _ = mustOpen(t, dir, 0, Options{})
	checkRecords(t, records, 0, 8)
	l.Close()

	// Old rules in an old segment: a zeroed record before one that
	// verifies is damage, even within what may have been one write.
	data := v1(0, 5)
	v1Records := layout(t, data)
	damaged := slices.Clone(data)
	clear(damaged[v1Records[3].start:v1Records[3].end])
	restore(t, dir, map[string]string{segmentName(0): string(damaged)})
	if _, _, _, err := Open(dir, 0, Options{}); !errors.Is(err, ErrDamaged) {
		t.Fatalf("a version 1 fault before a record that verifies: %v", err)
	}
	// A torn last record of a version 1 segment is cut as before.
	restore(t, dir, map[string]string{segmentName(0): string(data[:len(data)-3])})
	l, records, info := mustOpen(t, dir, 0, Options{})
	checkRecords(t, records, 0, 4)
	if info.TornBytes != int64(len(data)-3-v1Records[3].end) {
		t.Fatalf("%+v", info)
	}
	l.Close()

	// An empty version 1 segment named where the next goes.
	restore(t, dir, map[string]string{segmentName(0): string(v1(0, 3)), segmentName(3): SegmentHeaderV1})
	l, records, _ = mustOpen(t, dir, 0, Options{})
	checkRecords(t, records, 0, 3)
	if err := l.Append(3, entriesFrom(3, 2)); err != nil {
		t.Fatal(err)
	}
	l.Close()
	if got := snapshot(t, dir)[segmentName(3)]; !strings.HasPrefix(got, SegmentHeader) {
		t.Fatalf("the empty version 1 segment was not replaced: %q", got[:16])
	}
	l, records, _ = mustOpen(t, dir, 0, Options{})
	checkRecords(t, records, 0, 5)
	l.Close()
}

// A segment grows ahead of its records (Options.GrowBytes): the zeros
// after them end the records, an Append that fits lands inside the file
// and leaves its size alone, closed segments end with zeros too, and a
// crash during a write inside the zeros, or damage to a synced write
// before it, reads as at the end of a file that was not grown.
func TestGrownSegment(t *testing.T) {
	dir := t.TempDir()
	const segmentBytes, grow = 64 << 10, 8 << 10
	opts := Options{SegmentBytes: segmentBytes, GrowBytes: grow}
	size := func(name string) int64 {
		t.Helper()
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	first := segmentName(0)
	l, _, _ := mustOpen(t, dir, 0, opts)
	if err := l.Append(0, entriesFrom(0, 3)); err != nil {
		t.Fatal(err)
	}
	next := uint64(3)
	if got, want := size(first), l.activeSize+grow; got != want {
		t.Fatalf("after the first append the segment has %d bytes, want its records and %d zeros (%d)", got, grow, want)
	}
	grown, fits := size(first), 0
	for l.activeSize+200 < grown {
		if err := l.Append(next, entriesFrom(next, 2)); err != nil {
			t.Fatal(err)
		}
		next += 2
		fits++
		if got := size(first); got != grown {
			t.Fatalf("an append inside the zeros changed the size %d -> %d", grown, got)
		}
	}
	if fits < 10 {
		t.Fatalf("only %d appends fitted in %d bytes", fits, grow)
	}
	// One that does not fit grows the file again.
	if err := l.Append(next, entriesFrom(next, 8)); err != nil {
		t.Fatal(err)
	}
	next += 8
	if got := size(first); got != l.activeSize+grow {
		t.Fatalf("growing again: %d bytes, want %d", got, l.activeSize+grow)
	}
	l.Close()

	// Opened again: every record, nothing torn, and appends go on where
	// the records end, inside the zeros.
	l, records, info := mustOpen(t, dir, 0, opts)
	checkRecords(t, records, 0, next)
	if info.TornBytes != 0 || l.Next() != next {
		t.Fatalf("reopened: %+v, next %d", info, l.Next())
	}
	before := size(first)
	if err := l.Append(next, entriesFrom(next, 2)); err != nil {
		t.Fatal(err)
	}
	next += 2
	if got := size(first); got != before {
		t.Fatalf("after reopening, an append that fits grew the file %d -> %d", before, got)
	}

	// On to more segments: a closed one may end with zeros, never past
	// the size limit but for its last write's records.
	for len(segmentNames(t, dir)) < 3 {
		if err := l.Append(next, entriesFrom(next, 7)); err != nil {
			t.Fatal(err)
		}
		next += 7
	}
	l.Close()
	names := segmentNames(t, dir)
	for _, name := range names[:len(names)-1] {
		data, _ := os.ReadFile(filepath.Join(dir, name))
		spans := layout(t, data)
		last := spans[len(spans)-1]
		if !last.commit || !allZero(data[last.end:]) || len(data) > max(last.end, segmentBytes) {
			t.Fatalf("closed segment %s: %d bytes, its records end at %d (a commit record: %v)", name, len(data), last.end, last.commit)
		}
	}
	l, records, info = mustOpen(t, dir, 0, opts)
	checkRecords(t, records, 0, next)
	if info.TornBytes != 0 {
		t.Fatalf("three segments: %+v", info)
	}
	l.Close()
	// Zeros after a closed segment's records end them there too (a
	// segment closes when a restart finds the tile log ahead of it).
	files := snapshot(t, dir)
	files[names[0]] += string(make([]byte, 5000))
	restore(t, dir, files)
	l, records, _ = mustOpen(t, dir, 0, opts)
	checkRecords(t, records, 0, next)
	l.Close()

	// A crash during a write inside the zeros: its first page lost, its
	// last landed, its commit record not written. The write is a torn
	// tail, cut off with the zeros.
	orig := snapshot(t, dir)
	newest := names[len(names)-1]
	l, _, _ = mustOpen(t, dir, 0, opts)
	at := l.activeSize
	if err := l.Append(next, entriesFrom(next, 4)); err != nil {
		t.Fatal(err)
	}
	l.Close()
	written := []byte(snapshot(t, dir)[newest])
	writtenSpans := layout(t, written)
	lastCommit := writtenSpans[len(writtenSpans)-1]
	torn := slices.Clone(written)
	clear(torn[at : at+20])
	clear(torn[lastCommit.start:lastCommit.end])
	restore(t, dir, map[string]string{})
	for name, b := range orig {
		if name == newest {
			b = string(torn)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(b), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	l, records, info = mustOpen(t, dir, 0, opts)
	checkRecords(t, records, 0, next)
	if info.TornOffset != at || info.TornBytes != int64(len(torn))-at || info.TornRecordsAfter != 3 || size(newest) != at {
		t.Fatalf("a torn write inside the zeros: %+v, the file %d bytes", info, size(newest))
	}
	// The log carries on, growing the file again.
	if err := l.Append(next, entriesFrom(next, 2)); err != nil {
		t.Fatal(err)
	}
	l.Close()
	l, records, _ = mustOpen(t, dir, 0, opts)
	checkRecords(t, records, 0, next+2)
	l.Close()

	// Damage to a synced write with a later one after it, inside the
	// zeros: Open fails and changes nothing. (At the last write itself,
	// without its commit record, it is a torn tail, as above.)
	synced := entrySpans(layout(t, written[:at]))
	damaged := slices.Clone(written)
	crc := synced[len(synced)-1].start + 4 // the CRC of the record before the last write
	clear(damaged[crc : crc+4])
	restore(t, dir, map[string]string{newest: string(damaged)})
	from := segmentsFirst(t, newest)
	if l, _, _, err := Open(dir, from, opts); !errors.Is(err, ErrDamaged) {
		if l != nil {
			l.Close()
		}
		t.Fatalf("a damaged synced write before the last: %v, want ErrDamaged", err)
	}
	if got := snapshot(t, dir)[newest]; got != string(damaged) {
		t.Fatal("the failed Open changed the segment")
	}
}

func segmentsFirst(t testing.TB, name string) uint64 {
	t.Helper()
	first, ok, _, err := parseName(name)
	if !ok || err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return first
}
