package main

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestSyncProbeWritesEachFormInPlace: every form is measured n times;
// the overwriting forms keep their preallocated size (an overwrite that
// grew the file would measure a different write) and only the append
// form grows, by exactly its writes; close removes the files.
func TestSyncProbeWritesEachFormInPlace(t *testing.T) {
	dir := t.TempDir()
	p, err := newSyncProbe(dir, 300)
	if err != nil {
		t.Fatal(err)
	}
	syncs := map[string][]time.Duration{}
	const n = 20
	if err := p.measure(n, syncs); err != nil {
		t.Fatal(err)
	}
	if len(p.forms) < 3 {
		t.Fatalf("%d forms measured, want append, overwrite and dsync at least", len(p.forms))
	}
	for _, s := range p.forms {
		if got := len(syncs[s.name]); got != n {
			t.Errorf("%s: %d writes measured, want %d", s.name, got, n)
		}
		fi, err := os.Stat(s.path)
		if err != nil {
			t.Fatal(err)
		}
		want := int64(probeSpace)
		if s.name == "append" {
			want = n * 300
		}
		if fi.Size() != want {
			t.Errorf("%s: file of %d bytes, want %d", s.name, fi.Size(), want)
		}
	}
	p.close()
	if left, _ := filepath.Glob(filepath.Join(dir, "bench-sync-probe-*")); len(left) > 0 {
		t.Errorf("close left %v", left)
	}
}

// TestSyncProbeDirectWritesWholeBlocks: the direct form writes the
// aligned blocks that hold the bytes, so that a write crossing a block
// boundary writes two.
func TestSyncProbeDirectWritesWholeBlocks(t *testing.T) {
	p, err := newSyncProbe(t.TempDir(), 3000)
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	for _, s := range p.forms {
		if s.name != "direct" {
			continue
		}
		for range 3 { // offsets 0, 3000 (crosses 4096), 6000
			if _, err := s.write(3000); err != nil {
				t.Fatal(err)
			}
		}
		raw, err := os.ReadFile(s.path)
		if err != nil {
			t.Fatal(err)
		}
		if raw[8999] != byte('a'+2999%26) || raw[9000] != 0 {
			t.Errorf("direct writes end at the wrong place: %q %q", raw[8999], raw[9000])
		}
		return
	}
	t.Skip("this file system refuses O_DIRECT")
}

// TestLastWALWriteBytesIsTheLastWrite: a segment of two writes (two
// records, then one), each with its commit record, then zeros: the size
// is the last write's, its record and its commit record.
func TestLastWALWriteBytesIsTheLastWrite(t *testing.T) {
	dir := t.TempDir()
	seg := make([]byte, 16, 4096)
	record := func(n int, first bool) {
		word := uint32(n)
		if first {
			word |= 1 << 31
		}
		seg = binary.BigEndian.AppendUint32(seg, word)
		seg = append(seg, make([]byte, 12)...) // CRC and index
		seg = append(seg, bytes.Repeat([]byte{'e'}, n)...)
	}
	commit := func() {
		seg = binary.BigEndian.AppendUint32(seg, 0x40000008)
		seg = append(seg, make([]byte, 20)...)
	}
	record(300, true)
	record(280, false)
	commit()
	record(250, true)
	commit()
	seg = append(seg, make([]byte, 1000)...)
	if err := os.WriteFile(filepath.Join(dir, "00000000000000000000.wal"), seg, 0o600); err != nil {
		t.Fatal(err)
	}
	if got, want := lastWALWriteBytes(dir), 16+250+24; got != want {
		t.Errorf("lastWALWriteBytes = %d, want %d", got, want)
	}
	if got := lastWALWriteBytes(t.TempDir()); got != 512 {
		t.Errorf("no segment: %d, want the fallback 512", got)
	}
}
