package testvectors

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash/crc32"
	"testing"
)

const walFile = "wal.json"

// walVectors are segments of the kernel's write-ahead log (FORMATS.md,
// "Write-ahead log"). A segment's first index and its records' indices and
// entries are inputs; the file name, each record's CRC and bytes, each
// commit record (version 3), and the segment's bytes are computed. The
// test writes them from FORMATS.md alone (the write-ahead log is
// kernel/internal/wal, which this package cannot import; that package's
// own test checks its encoder and Open against this file, readings
// included).
type walVectors struct {
	Description string `json:"description"`
	// HeaderHex, HeaderV2Hex, HeaderV1Hex: the 16-byte segment headers of
	// versions 3, 2 and 1. CRC32CCheck: CRC-32C of the ASCII "123456789",
	// to tell CRC-32C from the IEEE CRC-32.
	HeaderHex   string       `json:"header_hex"`
	HeaderV2Hex string       `json:"header_v2_hex"`
	HeaderV1Hex string       `json:"header_v1_hex"`
	CRC32CCheck string       `json:"crc32c_check"`
	Segments    []walSegment `json:"segments"`
	Readings    []walReading `json:"readings"`
}

type walSegment struct {
	Name    string      `json:"name"`
	Version int         `json:"version"`
	First   uint64      `json:"first,string"`
	File    string      `json:"file"`
	Records []walRecord `json:"records"`
	// ZeroTail counts zero bytes after the records (versions 2 and 3): a
	// writer grows a segment ahead of its records, and zeros end them.
	ZeroTail   int    `json:"zero_tail,omitempty"`
	SegmentHex string `json:"segment_hex"`
}

type walRecord struct {
	Index      uint64 `json:"index,string"`
	OpensWrite bool   `json:"opens_write,omitempty"`
	EntryHex   string `json:"entry_hex"`
	CRC        string `json:"crc"`
	RecordHex  string `json:"record_hex"`
	// Commit is, in version 3, the commit record that follows the last
	// record of each write (computed).
	Commit *walCommit `json:"commit,omitempty"`
}

type walCommit struct {
	First     uint64 `json:"first,string"`
	Count     uint32 `json:"count"`
	WriteCRC  string `json:"write_crc"`
	CRC       string `json:"crc"`
	RecordHex string `json:"record_hex"`
}

// walReading is what a reader does with a segment of the vectors changed
// as a crash or a bad disk changes it (FORMATS.md, "Reading after a
// crash"). The segment, the change and the expected reading are inputs;
// the changed bytes and the file the reader leaves are computed.
type walReading struct {
	Name    string `json:"name"`
	Segment string `json:"segment"` // the name of a segment of the vectors
	// The change, in this order: the bytes from CutTo on removed; the
	// bytes from ZeroFrom to ZeroTo zeroed; the byte at XorAt xored with
	// Xor.
	CutTo      *int   `json:"cut_to,omitempty"`
	ZeroFrom   int    `json:"zero_from,omitempty"`
	ZeroTo     int    `json:"zero_to,omitempty"`
	XorAt      *int   `json:"xor_at,omitempty"`
	Xor        string `json:"xor,omitempty"`
	SegmentHex string `json:"segment_hex"`
	// The reading, from the segment's first index. Damaged: the reader
	// fails, naming the offset and the indices at risk, and changes
	// nothing. Otherwise it returns Returns records; Good is where the
	// good records end; when Cut, the bytes from Good on are cut off (of
	// which RecordsCut verify, of the interrupted write); Commits counts
	// the good records of the last write that no commit record follows,
	// for which the reader writes one at Good. AfterHex is the file the
	// reader leaves (computed).
	Damaged    *walDamage `json:"damaged,omitempty"`
	Returns    int        `json:"returns"`
	Good       int        `json:"good,omitempty"`
	Cut        bool       `json:"cut,omitempty"`
	RecordsCut int        `json:"records_cut,omitempty"`
	Commits    int        `json:"commits,omitempty"`
	AfterHex   string     `json:"after_hex,omitempty"`
}

type walDamage struct {
	Offset int    `json:"offset"`
	First  uint64 `json:"first,string"` // the first index at risk
	End    uint64 `json:"end,string"`   // the index after the last at risk
}

// walHeaders are the segment headers of versions 1 to 3 as FORMATS.md
// gives them.
var walHeaders = map[int]string{
	1: "annal/wal/v1\n\x00\x00\x00",
	2: "annal/wal/v2\n\x00\x00\x00",
	3: "annal/wal/v3\n\x00\x00\x00",
}

// walCommitWord is the word of a commit record (FORMATS.md).
const walCommitWord = 0x40000008

func TestWALVectors(t *testing.T) {
	var f walVectors
	load(t, walFile, &f)
	if len(f.Segments) < 2 {
		t.Fatal("wal.json lacks segments")
	}
	castagnoli := crc32.MakeTable(crc32.Castagnoli)
	expect(t, walFile, "header", "header_hex", &f.HeaderHex, hex.EncodeToString([]byte(walHeaders[3])))
	expect(t, walFile, "header", "header_v2_hex", &f.HeaderV2Hex, hex.EncodeToString([]byte(walHeaders[2])))
	expect(t, walFile, "header", "header_v1_hex", &f.HeaderV1Hex, hex.EncodeToString([]byte(walHeaders[1])))
	versions := map[int]int{}
	expect(t, walFile, "crc", "crc32c_check", &f.CRC32CCheck, fmt.Sprintf("%08x", crc32.Checksum([]byte("123456789"), castagnoli)))
	segments := map[string]*walSegment{}
	for i := range f.Segments {
		s := &f.Segments[i]
		segments[s.Name] = s
		expect(t, walFile, s.Name, "file", &s.File, fmt.Sprintf("%020d.wal", s.First))
		header, ok := walHeaders[s.Version]
		if !ok {
			t.Fatalf("%s: version %d", s.Name, s.Version)
		}
		versions[s.Version]++
		segment := []byte(header)
		writeStart, writeFirst := -1, uint64(0)
		for j := range s.Records {
			r := &s.Records[j]
			if r.Index != s.First+uint64(j) {
				t.Fatalf("%s: record %d has index %d: indices run on from first", s.Name, j, r.Index)
			}
			entry, err := hex.DecodeString(r.EntryHex)
			if err != nil {
				t.Fatalf("%s: record %d: %v", s.Name, j, err)
			}
			if s.Version == 3 && j == 0 && !r.OpensWrite {
				t.Fatalf("%s: a version 3 segment's first record opens a write", s.Name)
			}
			// By hand, from FORMATS.md. Versions 2 and 3: the length
			// word (top bit: opens a write), CRC-32C of word || index
			// || entry, index, entry. Version 1: length, CRC-32C of
			// index || entry, index, entry. All big-endian.
			word := uint32(len(entry))
			if r.OpensWrite {
				if s.Version == 1 {
					t.Fatalf("%s: record %d: version 1 has no mark of a write's first record", s.Name, j)
				}
				word |= 0x80000000
				writeStart, writeFirst = len(segment), r.Index
			}
			indexAndEntry := binary.BigEndian.AppendUint64(nil, r.Index)
			indexAndEntry = append(indexAndEntry, entry...)
			crc := crc32.Checksum(indexAndEntry, castagnoli)
			if s.Version >= 2 {
				crc = crc32.Checksum(append(binary.BigEndian.AppendUint32(nil, word), indexAndEntry...), castagnoli)
			}
			record := binary.BigEndian.AppendUint32(nil, word)
			record = binary.BigEndian.AppendUint32(record, crc)
			record = append(record, indexAndEntry...)
			expect(t, walFile, s.Name, fmt.Sprintf("records[%d].crc", j), &r.CRC, fmt.Sprintf("%08x", crc))
			expect(t, walFile, s.Name, fmt.Sprintf("records[%d].record_hex", j), &r.RecordHex, hex.EncodeToString(record))
			segment = append(segment, record...)

			// Version 3: a commit record after each write's last record.
			lastOfWrite := j == len(s.Records)-1 || s.Records[j+1].OpensWrite
			if s.Version != 3 || !lastOfWrite {
				if r.Commit != nil {
					t.Fatalf("%s: record %d: a commit record only ends a write of version 3", s.Name, j)
				}
				continue
			}
			if r.Commit == nil {
				r.Commit = &walCommit{}
			}
			commit := walCommitRecord(writeFirst, uint32(r.Index-writeFirst+1), segment[writeStart:], castagnoli)
			c := r.Commit
			if c.First != writeFirst || c.Count != uint32(r.Index-writeFirst+1) {
				if !*update {
					t.Errorf("%s: record %d: the commit record names %d records from %d; the write is %d from %d", s.Name, j, c.Count, c.First, r.Index-writeFirst+1, writeFirst)
				}
				c.First, c.Count = writeFirst, uint32(r.Index-writeFirst+1)
			}
			expect(t, walFile, s.Name, fmt.Sprintf("records[%d].commit.write_crc", j), &c.WriteCRC, fmt.Sprintf("%08x", crc32.Checksum(segment[writeStart:], castagnoli)))
			expect(t, walFile, s.Name, fmt.Sprintf("records[%d].commit.crc", j), &c.CRC, hex.EncodeToString(commit[4:8]))
			expect(t, walFile, s.Name, fmt.Sprintf("records[%d].commit.record_hex", j), &c.RecordHex, hex.EncodeToString(commit))
			segment = append(segment, commit...)
		}
		if s.ZeroTail > 0 && s.Version == 1 {
			t.Fatalf("%s: zeros end the records of version 2 and 3 segments only", s.Name)
		}
		segment = append(segment, make([]byte, s.ZeroTail)...)
		expect(t, walFile, s.Name, "segment_hex", &s.SegmentHex, hex.EncodeToString(segment))

		// And back: parsing the segment's bytes gives the records.
		raw, err := hex.DecodeString(s.SegmentHex)
		if err != nil {
			t.Fatalf("%s: %v", s.Name, err)
		}
		got, uncommitted, err := parseWALSegment(raw, s.Version, s.First, castagnoli)
		if err != nil {
			t.Fatalf("%s: %v", s.Name, err)
		}
		if uncommitted > 0 {
			t.Fatalf("%s: its last write has no commit record", s.Name)
		}
		if len(got) != len(s.Records) {
			t.Fatalf("%s: parsed %d records, want %d", s.Name, len(got), len(s.Records))
		}
		for j, r := range s.Records {
			if got[j].index != r.Index || got[j].opensWrite != r.OpensWrite || hex.EncodeToString(got[j].entry) != r.EntryHex {
				t.Errorf("%s: record %d parses as %d %x", s.Name, j, got[j].index, got[j].entry)
			}
		}
	}
	if versions[1] == 0 || versions[2] == 0 || versions[3] == 0 {
		t.Errorf("wal.json has segments of versions %v; it needs all three", versions)
	}

	kinds := map[string]bool{}
	for i := range f.Readings {
		rd := &f.Readings[i]
		s, ok := segments[rd.Segment]
		if !ok {
			t.Fatalf("reading %q: no segment %q", rd.Name, rd.Segment)
		}
		b, _ := hex.DecodeString(s.SegmentHex)
		if rd.CutTo != nil {
			b = b[:*rd.CutTo]
		}
		clear(b[rd.ZeroFrom:rd.ZeroTo])
		if rd.XorAt != nil {
			x, err := hex.DecodeString(rd.Xor)
			if err != nil || len(x) != 1 {
				t.Fatalf("reading %q: xor %q", rd.Name, rd.Xor)
			}
			b[*rd.XorAt] ^= x[0]
		}
		expect(t, walFile, rd.Name, "segment_hex", &rd.SegmentHex, hex.EncodeToString(b))
		switch {
		case rd.Damaged != nil:
			kinds["damaged"] = true
			if rd.Cut || rd.Commits > 0 || rd.AfterHex != "" || rd.Returns != 0 {
				t.Fatalf("reading %q: a damaged segment is refused, nothing read or changed", rd.Name)
			}
			continue
		case rd.Cut:
			kinds["cut"] = true
		}
		if rd.Commits > 0 {
			kinds["committed by the reader"] = true
		}
		// What the reader leaves: the bytes up to where the good records
		// end, then the commit record of the last write's good records if
		// none follows them, then (if nothing was cut) the rest.
		after := cloneBytes(b[:rd.Good])
		parsed, uncommitted, err := parseWALSegment(after, s.Version, s.First, castagnoli)
		if err != nil {
			t.Fatalf("reading %q: the good records do not parse: %v", rd.Name, err)
		}
		if len(parsed) != rd.Returns || uncommitted != rd.Commits {
			t.Fatalf("reading %q: %d good records, %d without a commit record; it says %d and %d", rd.Name, len(parsed), uncommitted, rd.Returns, rd.Commits)
		}
		if rd.Commits > 0 {
			last := parsed[len(parsed)-rd.Commits:]
			if last[len(last)-1].end != rd.Good {
				t.Fatalf("reading %q: the good records end at %d, it says %d", rd.Name, last[len(last)-1].end, rd.Good)
			}
			after = append(after, walCommitRecord(last[0].index, uint32(rd.Commits), after[last[0].start:rd.Good], castagnoli)...)
		}
		if !rd.Cut && len(b) > len(after) {
			after = append(after, b[len(after):]...)
		}
		expect(t, walFile, rd.Name, "after_hex", &rd.AfterHex, hex.EncodeToString(after))
	}
	for _, k := range []string{"damaged", "cut", "committed by the reader"} {
		if !kinds[k] {
			t.Errorf("wal.json has no reading of this kind: %s", k)
		}
	}
	save(t, walFile, &f)
}

func cloneBytes(b []byte) []byte { return append([]byte(nil), b...) }

// walCommitRecord is a version 3 commit record by hand, from FORMATS.md:
// the word 0x40000008, CRC-32C of (word || u64 first || u32 count || u32
// write CRC), then first, count and the write CRC (CRC-32C of the write's
// records), all big-endian.
func walCommitRecord(first uint64, count uint32, records []byte, table *crc32.Table) []byte {
	body := binary.BigEndian.AppendUint64(nil, first)
	body = binary.BigEndian.AppendUint32(body, count)
	body = binary.BigEndian.AppendUint32(body, crc32.Checksum(records, table))
	word := binary.BigEndian.AppendUint32(nil, walCommitWord)
	c := binary.BigEndian.AppendUint32(word, crc32.Checksum(append(cloneBytes(word), body...), table))
	return append(c, body...)
}

type walParsed struct {
	index      uint64
	opensWrite bool
	entry      []byte
	start, end int // the record's place in the segment
}

// parseWALSegment reads a whole segment of the given version strictly: the
// header, then records whose CRC holds and whose indices run on from
// first (in version 3, each write followed by its commit record, which
// must name it), to the last byte or, in versions 2 and 3, to where only
// zeros are left. A version 3 segment may end with a write that no commit
// record follows: uncommitted counts its records (the caller decides
// whether it may).
func parseWALSegment(b []byte, version int, first uint64, table *crc32.Table) (records []walParsed, uncommitted int, err error) {
	if !bytes.HasPrefix(b, []byte(walHeaders[version])) {
		return nil, 0, fmt.Errorf("no version %d segment header", version)
	}
	var out []walParsed
	writeStart, writeCount := -1, 0
	for off := len(walHeaders[version]); off < len(b); {
		if version >= 2 && bytes.Count(b[off:], []byte{0}) == len(b)-off {
			break
		}
		if len(b)-off < 16 {
			return nil, 0, fmt.Errorf("offset %d: a record header cut short", off)
		}
		word := binary.BigEndian.Uint32(b[off:])
		if version == 3 && word == walCommitWord {
			if writeCount == 0 || len(b)-off < 24 {
				return nil, 0, fmt.Errorf("offset %d: a commit record where no write ends, or cut short", off)
			}
			want := walCommitRecord(out[len(out)-writeCount].index, uint32(writeCount), b[writeStart:off], table)
			if !bytes.Equal(b[off:off+24], want) {
				return nil, 0, fmt.Errorf("offset %d: the commit record is not that of the write before it", off)
			}
			writeStart, writeCount = -1, 0
			off += 24
			continue
		}
		length := word
		opensWrite := version >= 2 && length&0x80000000 != 0
		if version >= 2 {
			length &^= 0x80000000
		}
		stored := binary.BigEndian.Uint32(b[off+4:])
		index := binary.BigEndian.Uint64(b[off+8:])
		if length > 16<<20 || uint64(len(b)-off-16) < uint64(length) {
			return nil, 0, fmt.Errorf("offset %d: length %d", off, length)
		}
		end := off + 16 + int(length)
		crc := crc32.Checksum(b[off+8:end], table)
		if version >= 2 {
			crc = crc32.Update(crc32.Checksum(b[off:off+4], table), table, b[off+8:end])
		}
		if crc != stored {
			return nil, 0, fmt.Errorf("offset %d: CRC mismatch", off)
		}
		if want := first + uint64(len(out)); index != want {
			return nil, 0, fmt.Errorf("offset %d: index %d, want %d", off, index, want)
		}
		if version == 3 {
			switch {
			case opensWrite && writeCount > 0:
				return nil, 0, fmt.Errorf("offset %d: a write opens before the one before it has its commit record", off)
			case !opensWrite && writeCount == 0:
				return nil, 0, fmt.Errorf("offset %d: a write's first record is not marked", off)
			case opensWrite:
				writeStart = off
			}
			writeCount++
		}
		out = append(out, walParsed{index: index, opensWrite: opensWrite, entry: b[off+16 : end], start: off, end: end})
		off = end
	}
	return out, writeCount, nil
}
