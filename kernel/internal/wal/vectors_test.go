package wal

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// The package's encoder and Open agree with the known answers in
// testvectors/wal.json, which testvectors checks against FORMATS.md.
func TestVectors(t *testing.T) {
	raw, err := os.ReadFile("../../../testvectors/wal.json")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		HeaderHex   string `json:"header_hex"`
		HeaderV1Hex string `json:"header_v1_hex"`
		Segments    []struct {
			Name    string `json:"name"`
			Version int    `json:"version"`
			First   uint64 `json:"first,string"`
			File    string `json:"file"`
			Records []struct {
				Index      uint64 `json:"index,string"`
				OpensWrite bool   `json:"opens_write"`
				EntryHex   string `json:"entry_hex"`
				RecordHex  string `json:"record_hex"`
			} `json:"records"`
			ZeroTail   int    `json:"zero_tail"`
			SegmentHex string `json:"segment_hex"`
		} `json:"segments"`
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		t.Fatal(err)
	}
	if got := hex.EncodeToString([]byte(SegmentHeader)); got != f.HeaderHex {
		t.Errorf("SegmentHeader is %s, wal.json says %s", got, f.HeaderHex)
	}
	if got := hex.EncodeToString([]byte(SegmentHeaderV1)); got != f.HeaderV1Hex {
		t.Errorf("SegmentHeaderV1 is %s, wal.json says %s", got, f.HeaderV1Hex)
	}
	if len(f.Segments) == 0 {
		t.Fatal("wal.json has no segments")
	}
	for _, s := range f.Segments {
		if segmentName(s.First) != s.File {
			t.Errorf("%s: named %s, wal.json says %s", s.Name, segmentName(s.First), s.File)
		}
		segment := []byte(SegmentHeader)
		if s.Version == 1 {
			segment = []byte(SegmentHeaderV1)
		}
		for _, r := range s.Records {
			entry, _ := hex.DecodeString(r.EntryHex)
			rec := AppendRecord(nil, r.Index, entry, r.OpensWrite)
			if s.Version == 1 {
				rec = appendRecordV1(nil, r.Index, entry)
			}
			if hex.EncodeToString(rec) != r.RecordHex {
				t.Errorf("%s: index %d encodes as %x, wal.json says %s", s.Name, r.Index, rec, r.RecordHex)
			}
			segment = append(segment, rec...)
		}
		segment = append(segment, make([]byte, s.ZeroTail)...)
		if hex.EncodeToString(segment) != s.SegmentHex {
			t.Errorf("%s: the segment encodes as %x, wal.json says %s", s.Name, segment, s.SegmentHex)
		}

		// Open reads the file back.
		dir := t.TempDir()
		b, _ := hex.DecodeString(s.SegmentHex)
		if err := os.WriteFile(filepath.Join(dir, s.File), b, 0o600); err != nil {
			t.Fatal(err)
		}
		l, records, info := mustOpen(t, dir, s.First, Options{})
		if len(records) != len(s.Records) || info.TornBytes != 0 || l.Next() != s.First+uint64(len(s.Records)) {
			t.Fatalf("%s: Open gives %d records, %+v, next %d", s.Name, len(records), info, l.Next())
		}
		for i, r := range s.Records {
			entry, _ := hex.DecodeString(r.EntryHex)
			if records[i].Index != r.Index || !bytes.Equal(records[i].Entry, entry) {
				t.Errorf("%s: record %d reads as %d %x", s.Name, i, records[i].Index, records[i].Entry)
			}
		}
		l.Close()
	}
}
