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
// entries are inputs; the file name, each record's CRC and bytes, and the
// segment's bytes are computed. The test writes them from FORMATS.md alone
// (the write-ahead log is kernel/internal/wal, which this package cannot
// import; that package's own test checks its encoder and Open against this
// file).
type walVectors struct {
	Description string `json:"description"`
	// HeaderHex, HeaderV1Hex: the 16-byte segment headers of versions 2
	// and 1. CRC32CCheck: CRC-32C of the ASCII "123456789", to tell
	// CRC-32C from the IEEE CRC-32.
	HeaderHex   string       `json:"header_hex"`
	HeaderV1Hex string       `json:"header_v1_hex"`
	CRC32CCheck string       `json:"crc32c_check"`
	Segments    []walSegment `json:"segments"`
}

type walSegment struct {
	Name    string      `json:"name"`
	Version int         `json:"version"`
	First   uint64      `json:"first,string"`
	File    string      `json:"file"`
	Records []walRecord `json:"records"`
	// ZeroTail counts zero bytes after the records (version 2): a writer
	// grows a segment ahead of its records, and zeros end them.
	ZeroTail   int    `json:"zero_tail,omitempty"`
	SegmentHex string `json:"segment_hex"`
}

type walRecord struct {
	Index      uint64 `json:"index,string"`
	OpensWrite bool   `json:"opens_write,omitempty"`
	EntryHex   string `json:"entry_hex"`
	CRC        string `json:"crc"`
	RecordHex  string `json:"record_hex"`
}

// walHeaders are the segment headers of versions 1 and 2 as FORMATS.md
// gives them.
var walHeaders = map[int]string{
	1: "annal/wal/v1\n\x00\x00\x00",
	2: "annal/wal/v2\n\x00\x00\x00",
}

func TestWALVectors(t *testing.T) {
	var f walVectors
	load(t, walFile, &f)
	if len(f.Segments) < 2 {
		t.Fatal("wal.json lacks segments")
	}
	castagnoli := crc32.MakeTable(crc32.Castagnoli)
	expect(t, walFile, "header", "header_hex", &f.HeaderHex, hex.EncodeToString([]byte(walHeaders[2])))
	expect(t, walFile, "header", "header_v1_hex", &f.HeaderV1Hex, hex.EncodeToString([]byte(walHeaders[1])))
	versions := map[int]int{}
	expect(t, walFile, "crc", "crc32c_check", &f.CRC32CCheck, fmt.Sprintf("%08x", crc32.Checksum([]byte("123456789"), castagnoli)))
	for i := range f.Segments {
		s := &f.Segments[i]
		expect(t, walFile, s.Name, "file", &s.File, fmt.Sprintf("%020d.wal", s.First))
		header, ok := walHeaders[s.Version]
		if !ok {
			t.Fatalf("%s: version %d", s.Name, s.Version)
		}
		versions[s.Version]++
		segment := []byte(header)
		for j := range s.Records {
			r := &s.Records[j]
			if r.Index != s.First+uint64(j) {
				t.Fatalf("%s: record %d has index %d: indices run on from first", s.Name, j, r.Index)
			}
			entry, err := hex.DecodeString(r.EntryHex)
			if err != nil {
				t.Fatalf("%s: record %d: %v", s.Name, j, err)
			}
			// By hand, from FORMATS.md. Version 2: the length word
			// (top bit: opens a write), CRC-32C of word || index ||
			// entry, index, entry. Version 1: length, CRC-32C of index
			// || entry, index, entry. All big-endian.
			word := uint32(len(entry))
			if r.OpensWrite {
				if s.Version == 1 {
					t.Fatalf("%s: record %d: version 1 has no mark of a write's first record", s.Name, j)
				}
				word |= 0x80000000
			}
			indexAndEntry := binary.BigEndian.AppendUint64(nil, r.Index)
			indexAndEntry = append(indexAndEntry, entry...)
			crc := crc32.Checksum(indexAndEntry, castagnoli)
			if s.Version == 2 {
				crc = crc32.Checksum(append(binary.BigEndian.AppendUint32(nil, word), indexAndEntry...), castagnoli)
			}
			record := binary.BigEndian.AppendUint32(nil, word)
			record = binary.BigEndian.AppendUint32(record, crc)
			record = append(record, indexAndEntry...)
			expect(t, walFile, s.Name, fmt.Sprintf("records[%d].crc", j), &r.CRC, fmt.Sprintf("%08x", crc))
			expect(t, walFile, s.Name, fmt.Sprintf("records[%d].record_hex", j), &r.RecordHex, hex.EncodeToString(record))
			segment = append(segment, record...)
		}
		if s.ZeroTail > 0 && s.Version != 2 {
			t.Fatalf("%s: zeros end the records of version 2 segments only", s.Name)
		}
		segment = append(segment, make([]byte, s.ZeroTail)...)
		expect(t, walFile, s.Name, "segment_hex", &s.SegmentHex, hex.EncodeToString(segment))

		// And back: parsing the segment's bytes gives the records.
		raw, err := hex.DecodeString(s.SegmentHex)
		if err != nil {
			t.Fatalf("%s: %v", s.Name, err)
		}
		got, err := parseWALSegment(raw, s.Version, s.First, castagnoli)
		if err != nil {
			t.Fatalf("%s: %v", s.Name, err)
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
	if versions[1] == 0 || versions[2] == 0 {
		t.Errorf("wal.json has segments of versions %v; it needs both", versions)
	}
	save(t, walFile, &f)
}

type walParsed struct {
	index      uint64
	opensWrite bool
	entry      []byte
}

// parseWALSegment reads a whole segment of the given version strictly: the
// header, then records whose CRC holds and whose indices run on from
// first, to the last byte or, in version 2, to where only zeros are left.
func parseWALSegment(b []byte, version int, first uint64, table *crc32.Table) ([]walParsed, error) {
	if !bytes.HasPrefix(b, []byte(walHeaders[version])) {
		return nil, fmt.Errorf("no version %d segment header", version)
	}
	var out []walParsed
	for off := len(walHeaders[version]); off < len(b); {
		if version == 2 && bytes.Count(b[off:], []byte{0}) == len(b)-off {
			break
		}
		if len(b)-off < 16 {
			return nil, fmt.Errorf("offset %d: a record header cut short", off)
		}
		length := binary.BigEndian.Uint32(b[off:])
		opensWrite := version == 2 && length&0x80000000 != 0
		if version == 2 {
			length &^= 0x80000000
		}
		stored := binary.BigEndian.Uint32(b[off+4:])
		index := binary.BigEndian.Uint64(b[off+8:])
		if length > 16<<20 || uint64(len(b)-off-16) < uint64(length) {
			return nil, fmt.Errorf("offset %d: length %d", off, length)
		}
		end := off + 16 + int(length)
		crc := crc32.Checksum(b[off+8:end], table)
		if version == 2 {
			crc = crc32.Update(crc32.Checksum(b[off:off+4], table), table, b[off+8:end])
		}
		if crc != stored {
			return nil, fmt.Errorf("offset %d: CRC mismatch", off)
		}
		if want := first + uint64(len(out)); index != want {
			return nil, fmt.Errorf("offset %d: index %d, want %d", off, index, want)
		}
		out = append(out, walParsed{index: index, opensWrite: opensWrite, entry: b[off+16 : end]})
		off = end
	}
	return out, nil
}
