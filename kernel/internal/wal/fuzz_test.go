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
// three to a write.
func validSegment(n int) []byte {
	b := []byte(SegmentHeader)
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
// exactly the header and the records that verify (in version 2, then
// perhaps zeros); opening it again gives the same, with nothing cut.
func FuzzOpen(f *testing.F) {
	whole := validSegment(4)
	lastStart := len(validSegment(3))
	f.Add(uint8(0), false, []byte{}, uint8(0))
	f.Add(uint8(4), false, []byte{}, uint8(1))
	f.Add(uint8(4), false, []byte{}, uint8(9))
	f.Add(uint8(2), false, AppendRecord(nil, fuzzFirst+2, []byte("torn entry"), false)[:20], uint8(2))
	f.Add(uint8(2), false, make([]byte, 40), uint8(0))
	f.Add(uint8(2), false, append(make([]byte, 40), 1), uint8(0))
	f.Add(uint8(3), false, AppendRecord(nil, fuzzFirst+3, []byte(`{"x":1}`), true), uint8(3))
	f.Add(uint8(3), false, AppendRecord(nil, fuzzFirst+2, entryAt(fuzzFirst+2), false), uint8(3)) // written twice
	// A write whose first page did not land but whose last did.
	f.Add(uint8(3), false, append(make([]byte, 30), AppendRecord(nil, fuzzFirst+4, entryAt(fuzzFirst+4), false)...), uint8(3))
	f.Add(uint8(0), true, xorAt(validSegment(6), len(validSegment(4))+2, 0x40), uint8(0)) // in the last write
	f.Add(uint8(0), true, xorAt(validSegment(6), len(validSegment(2))+2, 0x40), uint8(0)) // in a synced write
	f.Add(uint8(0), true, validSegmentV1(4), uint8(2))
	f.Add(uint8(0), true, xorAt(validSegmentV1(4), len(validSegmentV1(2))+2, 0x40), uint8(0))
	f.Add(uint8(0), true, whole, uint8(1))
	f.Add(uint8(0), true, whole[:len(whole)-3], uint8(1))
	f.Add(uint8(0), true, whole[:lastStart+2], uint8(1))
	f.Add(uint8(0), true, xorAt(whole, lastStart+9, 0x10), uint8(0))          // damaged last record
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
			return
		}
		defer l.Close()
		if from < fuzzFirst {
			t.Fatalf("from %d, below the only segment, opened", from)
		}
		// The file is now the header and records that verify, from
		// fuzzFirst on; the ones returned are those from `from` on.
		all := parseWhole(t, after)
		var want []Record
		for _, r := range all {
			if r.Index >= from {
				want = append(want, r)
			}
		}
		if !sameRecords(records, want) {
			t.Fatalf("Open returned %d records from %d; the file holds %d", len(records), from, len(all))
		}
		if info.TornBytes != int64(len(data)-len(after)) || !bytes.HasPrefix(data, after) {
			t.Fatalf("%+v, but the file went from %d to %d bytes", info, len(data), len(after))
		}
		wantNext := max(from, fuzzFirst+uint64(len(all)))
		if l.Next() != wantNext {
			t.Fatalf("Next() = %d, want %d", l.Next(), wantNext)
		}
		// Valid records before the tail are never cut.
		if !raw && uint64(len(all)) < uint64(valid%16) {
			t.Fatalf("%d valid records, %d left", valid%16, len(all))
		}
		// Again: the same, nothing cut.
		l2, again, info2, err := Open(dir, from, Options{})
		if err != nil {
			t.Fatalf("the second Open: %v", err)
		}
		l2.Close()
		if !sameRecords(again, records) || info2.TornBytes != 0 {
			t.Fatalf("the second Open: %d records, %+v", len(again), info2)
		}
		// And the log carries on.
		if err := l.Append(l.Next(), [][]byte{[]byte("next")}); err != nil {
			t.Fatal(err)
		}
	})
}

// parseWhole parses a segment named fuzzFirst that must be whole.
func parseWhole(t *testing.T, data []byte) []Record {
	t.Helper()
	var records []Record
	scan, err := scanSegment(data, fuzzFirst, func(index uint64, entry []byte) {
		records = append(records, Record{Index: index, Entry: slices.Clone(entry)})
	})
	if err != nil || scan.fault != "" {
		t.Fatalf("after a successful Open the segment is not whole: %v %s", err, scan.fault)
	}
	// Independently of scanSegment: the bytes are the encoding of the
	// records (with the marks of first records the file has).
	version := segmentVersion(data)
	enc := []byte(data[:len(SegmentHeader)])
	for i, r := range records {
		if r.Index != fuzzFirst+uint64(i) {
			t.Fatalf("record %d has index %d", i, r.Index)
		}
		if version == 1 {
			enc = appendRecordV1(enc, r.Index, r.Entry)
			continue
		}
		opensWrite := len(data) > len(enc) && data[len(enc)]&0x80 != 0
		enc = AppendRecord(enc, r.Index, r.Entry, opensWrite)
	}
	// A version 2 segment may end with zeros after its records.
	if !bytes.HasPrefix(data, enc) || (len(data) > len(enc) && (version != 2 || !allZero(data[len(enc):]))) {
		t.Fatal("the segment is not the encoding of its records (and zeros)")
	}
	return records
}

func sameRecords(a, b []Record) bool {
	return slices.EqualFunc(a, b, func(x, y Record) bool {
		return x.Index == y.Index && bytes.Equal(x.Entry, y.Entry)
	})
}
