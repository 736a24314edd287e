package wal

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// walJSON is testvectors/wal.json, as far as this package reads it.
type walJSON struct {
	HeaderHex   string `json:"header_hex"`
	HeaderV2Hex string `json:"header_v2_hex"`
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
			Commit     *struct {
				RecordHex string `json:"record_hex"`
			} `json:"commit"`
		} `json:"records"`
		ZeroTail   int    `json:"zero_tail"`
		SegmentHex string `json:"segment_hex"`
	} `json:"segments"`
	Readings []struct {
		Name       string `json:"name"`
		Segment    string `json:"segment"`
		SegmentHex string `json:"segment_hex"`
		Damaged    *struct {
			Offset int64  `json:"offset"`
			First  uint64 `json:"first,string"`
			End    uint64 `json:"end,string"`
		} `json:"damaged"`
		Returns    int    `json:"returns"`
		Good       int64  `json:"good"`
		Cut        bool   `json:"cut"`
		RecordsCut int    `json:"records_cut"`
		Commits    int    `json:"commits"`
		AfterHex   string `json:"after_hex"`
	} `json:"readings"`
}

// The package's encoder and Open agree with the known answers in
// testvectors/wal.json, which testvectors checks against FORMATS.md: each
// segment encodes as the file says and reads back whole, and each reading
// (a segment changed as a crash or a bad disk changes it) is refused, cut
// or committed as the file says, leaving the bytes it gives.
func TestVectors(t *testing.T) {
	raw, err := os.ReadFile("../../../testvectors/wal.json")
	if err != nil {
		t.Fatal(err)
	}
	var f walJSON
	if err := json.Unmarshal(raw, &f); err != nil {
		t.Fatal(err)
	}
	for header, want := range map[string]string{SegmentHeader: f.HeaderHex, SegmentHeaderV2: f.HeaderV2Hex, SegmentHeaderV1: f.HeaderV1Hex} {
		if got := hex.EncodeToString([]byte(header)); got != want {
			t.Errorf("header %q is %s, wal.json says %s", header, got, want)
		}
	}
	if len(f.Segments) == 0 || len(f.Readings) == 0 {
		t.Fatal("wal.json has no segments or no readings")
	}
	files := map[string]string{}
	for _, s := range f.Segments {
		files[s.Name] = s.File
		if segmentName(s.First) != s.File {
			t.Errorf("%s: named %s, wal.json says %s", s.Name, segmentName(s.First), s.File)
		}
		segment := []byte(map[int]string{1: SegmentHeaderV1, 2: SegmentHeaderV2, 3: SegmentHeader}[s.Version])
		writeStart, writeFirst := 0, uint64(0)
		for _, r := range s.Records {
			entry, _ := hex.DecodeString(r.EntryHex)
			if r.OpensWrite {
				writeStart, writeFirst = len(segment), r.Index
			}
			rec := AppendRecord(nil, r.Index, entry, r.OpensWrite)
			if s.Version == 1 {
				rec = appendRecordV1(nil, r.Index, entry)
			}
			if hex.EncodeToString(rec) != r.RecordHex {
				t.Errorf("%s: index %d encodes as %x, wal.json says %s", s.Name, r.Index, rec, r.RecordHex)
			}
			segment = append(segment, rec...)
			if r.Commit != nil {
				c := appendCommit(nil, writeFirst, uint32(r.Index-writeFirst+1), segment[writeStart:])
				if hex.EncodeToString(c) != r.Commit.RecordHex {
					t.Errorf("%s: the commit record after index %d encodes as %x, wal.json says %s", s.Name, r.Index, c, r.Commit.RecordHex)
				}
				segment = append(segment, c...)
			}
		}
		segment = append(segment, make([]byte, s.ZeroTail)...)
		if hex.EncodeToString(segment) != s.SegmentHex {
			t.Errorf("%s: the segment encodes as %x, wal.json says %s", s.Name, segment, s.SegmentHex)
		}

		// Open reads the file back, whole.
		dir := t.TempDir()
		b, _ := hex.DecodeString(s.SegmentHex)
		if err := os.WriteFile(filepath.Join(dir, s.File), b, 0o600); err != nil {
			t.Fatal(err)
		}
		l, records, info := mustOpen(t, dir, s.First, Options{})
		if len(records) != len(s.Records) || info.TornBytes != 0 || info.UncommittedRecords != 0 || l.Next() != s.First+uint64(len(s.Records)) {
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

	for _, rd := range f.Readings {
		file, ok := files[rd.Segment]
		if !ok {
			t.Fatalf("%s: no segment %q", rd.Name, rd.Segment)
		}
		first, _, _, _ := parseName(file)
		dir := t.TempDir()
		path := filepath.Join(dir, file)
		b, _ := hex.DecodeString(rd.SegmentHex)
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		l, records, info, err := Open(dir, first, Options{})
		after, _ := os.ReadFile(path)
		if d := rd.Damaged; d != nil {
			var de *DamageError
			if !errors.As(err, &de) || de.File != path || de.Offset != d.Offset || de.First != d.First || de.End != d.End || !de.EndKnown {
				t.Errorf("%s: Open gives %v, want damage at offset %d, indices %d to %d at risk", rd.Name, err, d.Offset, d.First, d.End)
			}
			if !bytes.Equal(after, b) {
				t.Errorf("%s: the refusal changed the file", rd.Name)
			}
			if l != nil {
				l.Close()
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", rd.Name, err)
			continue
		}
		l.Close()
		wantTorn := int64(0)
		if rd.Cut {
			wantTorn = int64(len(b)) - rd.Good
		}
		if len(records) != rd.Returns || info.TornBytes != wantTorn || (rd.Cut && info.TornOffset != rd.Good) ||
			info.TornRecordsAfter != rd.RecordsCut || info.UncommittedRecords != rd.Commits {
			t.Errorf("%s: %d records, %+v; want %d, cut at %d: %v, %d records cut, %d committed", rd.Name, len(records), info, rd.Returns, rd.Good, rd.Cut, rd.RecordsCut, rd.Commits)
		}
		if hex.EncodeToString(after) != rd.AfterHex {
			t.Errorf("%s: Open leaves %x, wal.json says %s", rd.Name, after, rd.AfterHex)
		}
	}
}
