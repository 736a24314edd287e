package wal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/annal-dev/annal/internal/durable"
)

// A process killed between a write's fdatasync and its commit record
// leaves the write whole and without one: the write was never
// acknowledged, but it is durable; its records are returned and Open
// writes the commit record Append would have written (Read only reports
// it). A grown segment, where the commit record's place is zeros, reads
// the same.
func TestUncommittedLastWrite(t *testing.T) {
	for _, opts := range []Options{exactLayout, {GrowBytes: 4096}} {
		dir := t.TempDir()
		end := writeLog(t, dir, 0, opts, 3, 4)
		name := segmentName(0)
		whole := []byte(snapshot(t, dir)[name])
		spans := layout(t, whole)
		commit := spans[len(spans)-1]
		uncommitted := slices.Clone(whole)
		if opts.GrowBytes < 0 {
			uncommitted = uncommitted[:commit.start]
		} else {
			clear(uncommitted[commit.start:commit.end])
		}
		restore(t, dir, map[string]string{name: string(uncommitted)})

		records, info, err := Read(dir, 0)
		if err != nil {
			t.Fatal(err)
		}
		checkRecords(t, records, 0, end)
		if info.UncommittedRecords != 4 || info.UncommittedFirst != 3 || info.TornBytes != 0 {
			t.Fatalf("Read: %+v, want the last write's 4 records from 3 reported without a commit record", info)
		}
		if got := snapshot(t, dir)[name]; got != string(uncommitted) {
			t.Fatal("Read wrote the commit record")
		}

		l, records, info := mustOpen(t, dir, 0, opts)
		checkRecords(t, records, 0, end)
		if info.UncommittedRecords != 4 || info.UncommittedFirst != 3 || info.TornBytes != 0 {
			t.Fatalf("Open: %+v", info)
		}
		if got := snapshot(t, dir)[name]; got != string(whole) {
			t.Fatalf("after Open the segment is not what Append writes (grow %d)", opts.GrowBytes)
		}
		// The log carries on; the last write's damage is now refused.
		if err := l.Append(end, entriesFrom(end, 2)); err != nil {
			t.Fatal(err)
		}
		l.Close()
		restore(t, dir, map[string]string{name: string(xorAt(whole, spans[3].start+20, 1))})
		if _, _, _, err := Open(dir, 0, opts); !errors.Is(err, ErrDamaged) {
			t.Fatalf("damage to a write whose commit record Open wrote: %v", err)
		}
	}
}

// A power loss during the write after W may keep that write's pages and
// lose W's commit record, which only that write's fdatasync would have
// made durable: W is kept and committed, the next write (never
// acknowledged) is cut. Had the next write's commit record landed, the
// next write was synced, and W's commit record with it: its absence is
// damage.
func TestPowerLossBeforeTheNextWritesSync(t *testing.T) {
	dir := t.TempDir()
	writeLog(t, dir, 0, exactLayout, 3, 2)
	name := segmentName(0)
	data := []byte(snapshot(t, dir)[name])
	spans := layout(t, data)
	firstCommit := spans[3]
	if !firstCommit.commit {
		t.Fatalf("layout %+v", spans)
	}
	for _, c := range []struct {
		what     string
		lost     func([]byte) []byte
		torn     int // records of the next write past the fault
		uncommit int
	}{
		{"the next write whole", func(b []byte) []byte { return b[:len(b)-commitRecordSize] }, 2, 3},
		{"its second record only", func(b []byte) []byte {
			b = b[:len(b)-commitRecordSize]
			clear(b[spans[4].start:spans[4].end])
			return b
		}, 1, 3},
	} {
		lost := c.lost(slices.Clone(data))
		clear(lost[firstCommit.start:firstCommit.end])
		restore(t, dir, map[string]string{name: string(lost)})
		l, records, info := mustOpen(t, dir, 0, exactLayout)
		checkRecords(t, records, 0, 3)
		if info.TornOffset != int64(firstCommit.start) || info.TornRecordsAfter != c.torn || info.UncommittedRecords != c.uncommit {
			t.Fatalf("%s: %+v", c.what, info)
		}
		l.Close()
		if got := snapshot(t, dir)[name]; got != string(data[:firstCommit.end]) {
			t.Fatalf("%s: the segment is not the first write and its commit record", c.what)
		}
	}
	// The next write's commit record landed: damage, nothing lost.
	damaged := slices.Clone(data)
	clear(damaged[firstCommit.start:firstCommit.end])
	restore(t, dir, map[string]string{name: string(damaged)})
	_, _, _, err := Open(dir, 0, exactLayout)
	var de *DamageError
	if !errors.As(err, &de) || de.Offset != int64(firstCommit.start) || de.First != 5 || de.End != 5 || !de.EndKnown ||
		!strings.Contains(err.Error(), "no entry is at risk") {
		t.Fatalf("a lost commit record before a committed write: %v", err)
	}
	// Nor is the next write's first record an excuse anywhere but where
	// the writer puts it: a write opening right after W's records, with
	// no room for W's commit record, was never written so.
	squeezed := append(slices.Clone(data[:firstCommit.start]), data[firstCommit.end:len(data)-commitRecordSize]...)
	restore(t, dir, map[string]string{name: string(squeezed)})
	if _, _, _, err := Open(dir, 0, exactLayout); !errors.Is(err, ErrDamaged) {
		t.Fatalf("a write opening where a commit record is due: %v", err)
	}
}

// A commit record that verifies but does not fit the write before it (its
// first index, its count or its CRC of the write's records) is damage: no
// writer makes one, and it shows that write was synced.
func TestCommitRecordMustNameItsWrite(t *testing.T) {
	dir := t.TempDir()
	writeLog(t, dir, 0, exactLayout, 3, 2)
	name := segmentName(0)
	data := []byte(snapshot(t, dir)[name])
	spans := layout(t, data)
	last := spans[len(spans)-1]
	writeRecords := data[spans[4].start:spans[5].end]
	for what, commit := range map[string][]byte{
		"another first index": appendCommit(nil, 4, 2, writeRecords),
		"another count":       appendCommit(nil, 3, 3, writeRecords),
		"another CRC":         appendCommit(nil, 3, 2, writeRecords[1:]),
	} {
		forged := append(slices.Clone(data[:last.start]), commit...)
		restore(t, dir, map[string]string{name: string(forged)})
		_, _, _, err := Open(dir, 0, exactLayout)
		var de *DamageError
		if !errors.As(err, &de) || de.Offset != int64(last.start) || !strings.Contains(err.Error(), "a commit record") {
			t.Fatalf("%s: %v", what, err)
		}
	}
	// And one with no write before it.
	stray := append(slices.Clone(data), appendCommit(nil, 5, 1, nil)...)
	restore(t, dir, map[string]string{name: string(stray)})
	if _, _, _, err := Open(dir, 0, exactLayout); !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), "where no write ends") {
		t.Fatalf("a commit record after a commit record: %v", err)
	}
}

// The refusal names the segment, the offset of the first record that does
// not read back and the indices at risk, in its text as in its fields.
func TestDamageErrorNamesFileOffsetAndIndices(t *testing.T) {
	dir := t.TempDir()
	writeLog(t, dir, 40, exactLayout, 2, 5)
	name := segmentName(40)
	data := []byte(snapshot(t, dir)[name])
	third := entrySpans(layout(t, data))[3] // index 43, in the last write (42 to 46)
	restore(t, dir, map[string]string{name: string(xorAt(data, third.end-1, 0x20))})
	_, _, _, err := Open(dir, 40, exactLayout)
	var de *DamageError
	if !errors.As(err, &de) {
		t.Fatalf("%v", err)
	}
	path := filepath.Join(dir, name)
	for _, want := range []string{path, fmt.Sprintf("at offset %d", third.start), "indices 43 to 46 are at risk", "of the write of indices 42 to 46"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not say %q", err, want)
		}
	}
	if de.File != path || de.Offset != int64(third.start) || de.First != 43 || de.End != 47 || !de.EndKnown {
		t.Errorf("%+v", de)
	}
}

// A segment that is closed has its last commit record synced before the
// next one is made; a closed segment without it is damage.
func TestRotationSyncsTheLastCommitRecord(t *testing.T) {
	dir := t.TempDir()
	l, _, _ := mustOpen(t, dir, 0, Options{SegmentBytes: 60, GrowBytes: -1, CommitSyncDelay: -1})
	var synced []*os.File
	realSync := l.syncData
	l.syncData = func(f *os.File) error {
		synced = append(synced, f)
		return realSync(f)
	}
	if err := l.Append(0, entriesFrom(0, 3)); err != nil {
		t.Fatal(err)
	}
	old := l.active
	synced = nil
	if err := l.Append(3, entriesFrom(3, 1)); err != nil {
		t.Fatal(err)
	}
	// The old segment's commit record, then the new segment's write.
	if len(synced) != 2 || synced[0] != old || synced[1] != l.active || old == l.active {
		t.Fatalf("synced %v; want the old segment %p, then the new %p", synced, old, l.active)
	}
	l.Close()
	// A closed segment whose last commit record is missing is damage.
	data := []byte(snapshot(t, dir)[segmentName(0)])
	if err := os.WriteFile(filepath.Join(dir, segmentName(0)), data[:len(data)-commitRecordSize], 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := Open(dir, 0, Options{}); !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), "has no commit record") {
		t.Fatalf("a closed segment without its last commit record: %v", err)
	}
}

// The idle sync syncs the last commit record CommitSyncDelay after an
// Append that no other follows, never sooner after an Append began, and not
// again with nothing to sync; Close syncs a pending one too; an idle sync
// that fails breaks the Log.
func TestIdleSync(t *testing.T) {
	dir := t.TempDir()
	const delay = 20 * time.Millisecond
	l, _, _ := mustOpen(t, dir, 0, Options{CommitSyncDelay: delay})
	var mu sync.Mutex
	var idle []time.Time
	fail := false
	l.idleSyncData = func(f *os.File) error {
		mu.Lock()
		defer mu.Unlock()
		idle = append(idle, time.Now())
		if fail {
			return errors.New("injected")
		}
		return durable.Fdatasync(f)
	}
	idleSyncs := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(idle)
	}
	// Appends closer together than the delay, then a pause: an idle sync
	// comes only a delay or more after the last Append began (its timer
	// is set as it ends), and one comes in the pause.
	next := uint64(0)
	var began []time.Time
	for start := time.Now(); time.Since(start) < 5*delay; {
		began = append(began, time.Now())
		if err := l.Append(next, entriesFrom(next, 1)); err != nil {
			t.Fatal(err)
		}
		next++
		time.Sleep(delay / 10)
	}
	// The pending commit record is synced in the pause.
	waitFor(t, func() bool {
		l.syncMu.Lock()
		defer l.syncMu.Unlock()
		return l.pendingFile == nil
	})
	mu.Lock()
	for _, at := range idle {
		last := began[0]
		for _, b := range began {
			if b.Before(at) {
				last = b
			}
		}
		if at.Sub(last) < delay {
			t.Fatalf("an idle sync came %v after an Append began, before the delay %v", at.Sub(last), delay)
		}
	}
	mu.Unlock()
	before := idleSyncs()
	if before == 0 {
		t.Fatal("the commit record was synced, but not by the idle sync")
	}
	time.Sleep(3 * delay)
	if n := idleSyncs(); n != before {
		t.Fatalf("%d idle syncs with nothing to sync", n-before)
	}

	// A failing idle sync breaks the Log at the next Append, which writes
	// nothing.
	mu.Lock()
	fail = true
	mu.Unlock()
	if err := l.Append(next, entriesFrom(next, 1)); err != nil {
		t.Fatal(err)
	}
	next++
	size := l.activeSize
	waitFor(t, func() bool { return idleSyncs() > before })
	waitFor(t, func() bool { l.syncMu.Lock(); defer l.syncMu.Unlock(); return l.idleErr != nil })
	if err := l.Append(next, entriesFrom(next, 1)); !errors.Is(err, ErrBroken) || !strings.Contains(err.Error(), "injected") {
		t.Fatalf("an append after a failed idle sync: %v", err)
	}
	if l.activeSize != size || l.Next() != next {
		t.Fatal("the append after a failed idle sync wrote")
	}
	l.Close()

	// Close syncs a pending commit record.
	dir = t.TempDir()
	l, _, _ = mustOpen(t, dir, 0, Options{CommitSyncDelay: -1})
	var synced int
	realSync := l.syncData
	l.syncData = func(f *os.File) error { synced++; return realSync(f) }
	if err := l.Append(0, entriesFrom(0, 2)); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil || synced != 2 {
		t.Fatalf("Close: %v, %d syncs, want the append's and Close's", err, synced)
	}
}

func waitFor(t *testing.T, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatal("waited 5 s")
		}
		time.Sleep(time.Millisecond)
	}
}

// Segments of version 2 are read by their rules: no commit records; damage
// to the last write reads as a torn tail and is cut; a marked record of a
// later write past a fault is damage. The log goes on in a new segment of
// version 3, and an empty version 2 segment where it goes is replaced.
func TestVersion2Segments(t *testing.T) {
	v2 := func(first uint64, groups ...int) []byte {
		b := []byte(SegmentHeaderV2)
		idx := first
		for _, n := range groups {
			for i := range n {
				b = AppendRecord(b, idx, entryAt(idx), i == 0)
				idx++
			}
		}
		return b
	}
	dir := t.TempDir()
	data := v2(0, 3, 2)
	restore(t, dir, map[string]string{segmentName(0): string(data)})
	l, records, info := mustOpen(t, dir, 0, Options{})
	checkRecords(t, records, 0, 5)
	if info.UncommittedRecords != 0 || info.TornBytes != 0 {
		t.Fatalf("a whole version 2 segment: %+v", info)
	}
	if err := l.Append(5, entriesFrom(5, 2)); err != nil {
		t.Fatal(err)
	}
	l.Close()
	files := snapshot(t, dir)
	if files[segmentName(0)] != string(data) || !strings.HasPrefix(files[segmentName(5)], SegmentHeader) {
		t.Fatal("the log did not go on in a version 3 segment, leaving the version 2 one as it was")
	}
	l, records, _ = mustOpen(t, dir, 0, Options{})
	checkRecords(t, records, 0, 7)
	l.Close()

	spans := layout(t, data)
	// A damaged last write of a version 2 segment is cut, as before.
	restore(t, dir, map[string]string{segmentName(0): string(xorAt(data, spans[3].start+18, 1))})
	l, records, info = mustOpen(t, dir, 0, Options{})
	checkRecords(t, records, 0, 3)
	if info.TornOffset != int64(spans[3].start) || info.TornRecordsAfter != 1 {
		t.Fatalf("%+v", info)
	}
	l.Close()
	// Damage before a later write is refused.
	restore(t, dir, map[string]string{segmentName(0): string(xorAt(data, spans[1].start+18, 1))})
	if _, _, _, err := Open(dir, 0, Options{}); !errors.Is(err, ErrDamaged) {
		t.Fatalf("a version 2 fault before a later write: %v", err)
	}
	// A commit record means nothing in version 2.
	restore(t, dir, map[string]string{segmentName(0): string(appendCommit(slices.Clone(data), 3, 2, data[spans[3].start:]))})
	l, records, info = mustOpen(t, dir, 0, Options{})
	checkRecords(t, records, 0, 5)
	if info.TornBytes != commitRecordSize {
		t.Fatalf("a commit record in version 2: %+v", info)
	}
	l.Close()

	// An empty version 2 segment named where the next goes.
	restore(t, dir, map[string]string{segmentName(0): string(v2(0, 3)), segmentName(3): SegmentHeaderV2})
	l, records, _ = mustOpen(t, dir, 0, Options{})
	checkRecords(t, records, 0, 3)
	if err := l.Append(3, entriesFrom(3, 2)); err != nil {
		t.Fatal(err)
	}
	l.Close()
	if got := snapshot(t, dir)[segmentName(3)]; !strings.HasPrefix(got, SegmentHeader) {
		t.Fatalf("the empty version 2 segment was not replaced: %q", got[:16])
	}
	l, records, _ = mustOpen(t, dir, 0, Options{})
	checkRecords(t, records, 0, 5)
	l.Close()
}

// A commit record of zeros does not verify, and its CRC covers its word,
// its first index, its count and its CRC of the write.
func TestCommitRecordCRC(t *testing.T) {
	if _, problem := decodeRecord(append([]byte(SegmentHeader), make([]byte, commitRecordSize)...), len(SegmentHeader), 3); problem == "" {
		t.Fatal("a record of zeros verifies")
	}
	c := appendCommit(nil, 7, 3, []byte("records"))
	if len(c) != commitRecordSize || binary.BigEndian.Uint32(c) != 0x40000008 {
		t.Fatalf("commit record %x", c)
	}
	if r, problem := decodeRecord(c, 0, 3); problem != "" || !r.commit || r.index != 7 || r.count != 3 {
		t.Fatalf("%+v %s", r, problem)
	}
	for off := range c {
		if off >= 4 && off < 8 {
			continue // the CRC itself
		}
		if _, problem := decodeRecord(xorAt(c, off, 0x01), 0, 3); problem == "" {
			t.Errorf("byte %d of a commit record flips unseen", off)
		}
	}
	if bytes.Equal(appendCommit(nil, 7, 3, []byte("records")), appendCommit(nil, 7, 3, []byte("recordz"))) {
		t.Error("the commit record does not depend on the write's bytes")
	}
}
