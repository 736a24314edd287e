package wal

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// fuzzFirst is the index the fuzzed segment is named by.
const fuzzFirst = 7

// validSegment is the segment named fuzzFirst holding n records, written
// three to a write, each write followed by its commit record.
func validSegment(n int) []byte {
	b := []byte(SegmentHeader)
	for start := 0; start < n; start += 3 {
		w := len(b)
		count := min(3, n-start)
		for i := start; i < start+count; i++ {
			idx := uint64(fuzzFirst + i)
			b = AppendRecord(b, idx, entryAt(idx), i == start)
		}
		b = appendCommit(b, uint64(fuzzFirst+start), uint32(count), b[w:])
	}
	return b
}

// validSegmentV2 is validSegment in the second version's format: no
// commit records.
func validSegmentV2(n int) []byte {
	b := []byte(SegmentHeaderV2)
	for i := range n {
		idx := uint64(fuzzFirst + i)
		b = AppendRecord(b, idx, entryAt(idx), i%3 == 0)
	}
	return b
}

// validSegmentV1 is validSegment in the first version's format.
func validSegmentV1(n int) []byte {
	b := []byte(SegmentHeaderV1)
	for i := range n {
		idx := uint64(fuzzFirst + i)
		b = appendRecordV1(b, idx, entryAt(idx))
	}
	return b
}

// FuzzOpen writes a segment of arbitrary bytes (raw), or of valid records
// followed by arbitrary bytes, and opens it from some index. Whatever the
// bytes, Open does not panic, and either fails leaving the file as it was,
// or returns contiguous records from `from` and leaves a file that is
// exactly the header and the records that verify (in version 3, every
// write followed by its commit record; in versions 2 and 3, then perhaps
// zeros); opening it again gives the same, with nothing cut. A committed
// write is never cut: the valid records before the arbitrary bytes are all
// kept, or Open fails.
func FuzzOpen(f *testing.F) {
	whole := validSegment(4) // a write of 3 and a write of 1, each committed
	entries := func(b []byte) []span { return entrySpans(layout(f, b)) }
	lastWrite := entries(whole)[3]
	lastCommit := len(whole) - commitRecordSize
	uncommitted := whole[:lastCommit] // a crash between the last write's fdatasync and its commit record
	f.Add(uint8(0), false, []byte{}, uint8(0))
	f.Add(uint8(4), false, []byte{}, uint8(1))
	f.Add(uint8(4), false, []byte{}, uint8(9))
	f.Add(uint8(2), false, AppendRecord(nil, fuzzFirst+2, []byte("torn entry"), true)[:20], uint8(2))
	f.Add(uint8(2), false, make([]byte, 40), uint8(0))
	f.Add(uint8(2), false, append(make([]byte, 40), 1), uint8(0))
	f.Add(uint8(3), false, AppendRecord(nil, fuzzFirst+3, []byte(`{"x":1}`), true), uint8(3))
	f.Add(uint8(3), false, appendCommit(AppendRecord(nil, fuzzFirst+3, []byte(`{"x":1}`), true), fuzzFirst+3, 1, AppendRecord(nil, fuzzFirst+3, []byte(`{"x":1}`), true)), uint8(3))
	f.Add(uint8(3), false, AppendRecord(nil, fuzzFirst+2, entryAt(fuzzFirst+2), false), uint8(3)) // written twice
	// A write whose first page did not land but whose last did.
	f.Add(uint8(3), false, append(make([]byte, 30), AppendRecord(nil, fuzzFirst+4, entryAt(fuzzFirst+4), false)...), uint8(3))
	// The next write landed, the commit record before it did not (a
	// power loss before the next write's fdatasync).
	f.Add(uint8(0), true, append(append(slices.Clone(uncommitted), make([]byte, commitRecordSize)...), AppendRecord(nil, fuzzFirst+4, entryAt(fuzzFirst+4), true)...), uint8(0))
	f.Add(uint8(0), true, xorAt(whole, lastWrite.start+2, 0x40), uint8(0))       // in the last write, committed: damage
	f.Add(uint8(0), true, xorAt(uncommitted, lastWrite.start+2, 0x40), uint8(0)) // in the last write, uncommitted: torn
	f.Add(uint8(0), true, xorAt(whole, len(SegmentHeader)+2, 0x40), uint8(0))    // in a synced write
	f.Add(uint8(0), true, xorAt(whole, lastCommit+5, 0x01), uint8(0))            // in the last commit record
	f.Add(uint8(0), true, whole[:lastCommit+10], uint8(0))                       // the last commit record torn
	f.Add(uint8(0), true, uncommitted, uint8(1))
	f.Add(uint8(0), true, append(slices.Clone(uncommitted), make([]byte, 100)...), uint8(1))
	f.Add(uint8(0), true, validSegmentV2(4), uint8(2))
	f.Add(uint8(0), true, xorAt(validSegmentV2(6), len(validSegmentV2(4))+2, 0x40), uint8(0)) // in the last write of version 2: torn
	f.Add(uint8(0), true, validSegmentV1(4), uint8(2))
	f.Add(uint8(0), true, xorAt(validSegmentV1(4), len(validSegmentV1(2))+2, 0x40), uint8(0))
	f.Add(uint8(0), true, whole, uint8(1))
	f.Add(uint8(0), true, whole[:len(whole)-3], uint8(1))
	f.Add(uint8(0), true, whole[:lastWrite.start+2], uint8(1))
	f.Add(uint8(0), true, xorAt(whole, len(SegmentHeader)+5, 0x10), uint8(0)) // damaged first record
	f.Add(uint8(0), true, xorAt(whole, len(SegmentHeader)+1, 0x01), uint8(0)) // damaged length
	f.Add(uint8(0), true, []byte(SegmentHeader), uint8(0))
	f.Add(uint8(0), true, []byte(SegmentHeader[:7]), uint8(0))
	f.Add(uint8(0), true, []byte{}, uint8(0))
	f.Add(uint8(0), true, append([]byte(SegmentHeader), 0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff), uint8(0))

	f.Fuzz(func(t *testing.T, valid uint8, raw bool, tail []byte, fromSeed uint8) {
		var data []byte
		if raw {
			data = tail
		} else {
			data = append(validSegment(int(valid%16)), tail...)
		}
		// from runs from below the segment's name to past its end.
		from := uint64(fuzzFirst) - 1 + uint64(fromSeed%24)

		dir := t.TempDir()
		path := filepath.Join(dir, segmentName(fuzzFirst))
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		l, records, info, err := Open(dir, from, Options{})
		after, rerr := os.ReadFile(path)
		if rerr != nil {
			t.Fatal(rerr)
		}
		if err != nil {
			if l != nil || records != nil {
				t.Fatalf("Open failed (%v) and returned a log", err)
			}
			if !bytes.Equal(after, data) {
				t.Fatalf("Open failed (%v) and changed the file", err)
			}
			if from < fuzzFirst && !errors.Is(err, ErrGap) {
				t.Fatalf("from %d, below the segment: %v", from, err)
			}
			var damage *DamageError
			if errors.As(err, &damage) && (damage.File != path || damage.Offset < int64(len(SegmentHeader)) || damage.Offset >= int64(len(data))) {
				t.Fatalf("a damage error that does not name the fault: %+v", damage)
			}
			return
		}
		defer l.Close()
		if from < fuzzFirst {
			t.Fatalf("from %d, below the only segment, opened", from)
		}
		// The file is now the header and records that verify, from
		// fuzzFirst on; the ones returned are those from `from` on.
		all, encoded := parseWhole(t, after)
		var want []Record
		for _, r := range all {
			if r.Index >= from {
				want = append(want, r)
			}
		}
		if !sameRecords(records, want) {
			t.Fatalf("Open returned %d records from %d; the file holds %d", len(records), from, len(all))
		}
		// What Open kept is a prefix of the file; after it, only what Open
		// cut (TornBytes) and, if it wrote one, the commit record of the
		// last write's records.
		kept := encoded
		if info.UncommittedRecords > 0 {
			kept -= commitRecordSize
			if c, problem := decodeRecord(after, kept, 3); problem != "" || !c.commit || c.index != info.UncommittedFirst || int(c.count) != info.UncommittedRecords {
				t.Fatalf("%+v, but the records do not end with their commit record (%s)", info, problem)
			}
		}
		if !bytes.HasPrefix(data, after[:kept]) || (info.TornBytes > 0 && info.TornBytes != int64(len(data)-kept)) {
			t.Fatalf("%+v, but the file went from %d to %d bytes (%d kept)", info, len(data), len(after), kept)
		}
		wantNext := max(from, fuzzFirst+uint64(len(all)))
		if l.Next() != wantNext {
			t.Fatalf("Next() = %d, want %d", l.Next(), wantNext)
		}
		// Valid records before the tail, committed, are never cut.
		if !raw && uint64(len(all)) < uint64(valid%16) {
			t.Fatalf("%d valid records, %d left", valid%16, len(all))
		}
		// Again: the same, nothing cut or committed.
		l2, again, info2, err := Open(dir, from, Options{})
		if err != nil {
			t.Fatalf("the second Open: %v", err)
		}
		l2.Close()
		if !sameRecords(again, records) || info2.TornBytes != 0 || info2.UncommittedRecords != 0 {
			t.Fatalf("the second Open: %d records, %+v", len(again), info2)
		}
		// And the log carries on.
		if err := l.Append(l.Next(), [][]byte{[]byte("next")}); err != nil {
			t.Fatal(err)
		}
	})
}

// parseWhole parses a segment named fuzzFirst that must be whole (in
// version 3, every write committed), and returns its records and where
// they end (zeros may follow).
func parseWhole(t *testing.T, data []byte) ([]Record, int) {
	t.Helper()
	var records []Record
	scan, err := scanSegment(data, fuzzFirst, func(index uint64, entry []byte) {
		records = append(records, Record{Index: index, Entry: slices.Clone(entry)})
	})
	if err != nil || scan.fault != "" || scan.open.count > 0 {
		t.Fatalf("after a successful Open the segment is not whole: %v %s (a write of %d records without its commit record)", err, scan.fault, scan.open.count)
	}
	// Independently of scanSegment: the bytes are the encoding of the
	// records (with the marks of first records the file has, and in
	// version 3 a commit record after each write).
	version := segmentVersion(data)
	enc := []byte(data[:len(SegmentHeader)])
	writeStart, writeFirst := -1, uint64(0)
	for i, r := range records {
		if r.Index != fuzzFirst+uint64(i) {
			t.Fatalf("record %d has index %d", i, r.Index)
		}
		if version == 1 {
			enc = appendRecordV1(enc, r.Index, r.Entry)
			continue
		}
		if version == 3 && writeStart >= 0 && len(data) > len(enc) && data[len(enc)] == commitWord>>24 {
			// The file has a commit record here: the write before ends.
			enc = appendCommit(enc, writeFirst, uint32(r.Index-writeFirst), enc[writeStart:])
		}
		opensWrite := len(data) > len(enc) && data[len(enc)]&0x80 != 0
		if opensWrite {
			writeStart, writeFirst = len(enc), r.Index
		}
		enc = AppendRecord(enc, r.Index, r.Entry, opensWrite)
	}
	if version == 3 && writeStart >= 0 {
		enc = appendCommit(enc, writeFirst, uint32(fuzzFirst+uint64(len(records))-writeFirst), enc[writeStart:])
	}
	// A version 2 or 3 segment may end with zeros after its records.
	if !bytes.HasPrefix(data, enc) || (len(data) > len(enc) && (version == 1 || !allZero(data[len(enc):]))) {
		t.Fatal("the segment is not the encoding of its records (and zeros)")
	}
	return records, len(enc)
}

func sameRecords(a, b []Record) bool {
	return slices.EqualFunc(a, b, func(x, y Record) bool {
		return x.Index == y.Index && bytes.Equal(x.Entry, y.Entry)
	})
}
