package witness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	fnote "github.com/transparency-dev/formats/note"
	"golang.org/x/mod/sumdb/note"
)

// crashStore drops a Store as a crash would: the journal is not copied
// into bbolt, nothing more is written.
func crashStore(t *testing.T, s *Store) {
	t.Helper()
	if err := errors.Join(s.journal.close(), s.db.Close()); err != nil {
		t.Fatal(err)
	}
}

// recordCheckpoint records cp as one commit group does.
func recordCheckpoint(t *testing.T, s *Store, cp *CosignedCheckpoint) {
	t.Helper()
	if err := s.commitGroup(func(g *groupTx) error { return g.putLatest(cp) }); err != nil {
		t.Fatal(err)
	}
}

func testCheckpoint(origin string, size uint64) *CosignedCheckpoint {
	return &CosignedCheckpoint{Origin: origin, Size: size, Root: bytes.Repeat([]byte{byte(size)}, 32),
		Note: fmt.Appendf(nil, "%s\n%d\n\n— x AAAAAAA=\n", origin, size)}
}

func storedSizeOf(t *testing.T, s *Store, origin string) int64 {
	t.Helper()
	cp, err := s.Latest(LogID(origin))
	if errors.Is(err, fs.ErrNotExist) {
		return -1
	}
	if err != nil {
		t.Fatal(err)
	}
	return int64(cp.Size)
}

// A journal reads back its records up to the first that does not check:
// a record torn by a crash ends it, and so does a record of an epoch
// before the last reset.
func TestJournal_ReadsUpToTheFirstBadRecord(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j")
	j, records, err := openJournal(path, 0)
	if err != nil || len(records) != 0 {
		t.Fatalf("new journal: %d records, %v", len(records), err)
	}
	if err := j.append([][]byte{[]byte("one"), []byte("two")}); err != nil {
		t.Fatal(err)
	}
	thirdAt := j.off
	if err := j.append([][]byte{[]byte("three")}); err != nil {
		t.Fatal(err)
	}
	j.close()

	j, records, err = openJournal(path, 0)
	if err != nil || fmt.Sprintf("%s", records) != "[one two three]" {
		t.Fatalf("reopened: %s, %v", records, err)
	}
	// A torn last record: its payload not all written.
	if _, err := j.f.WriteAt([]byte("\x00\x00\x00\x00thr\x00\x00"), thirdAt+journalFrameHeader); err != nil {
		t.Fatal(err)
	}
	j.close()
	j, records, err = openJournal(path, 0)
	if err != nil || fmt.Sprintf("%s", records) != "[one two]" {
		t.Fatalf("torn third record: %s, %v", records, err)
	}
	if j.off != thirdAt {
		t.Errorf("next record at %d, want %d (over the torn one)", j.off, thirdAt)
	}
	// Emptied: the old records stay on disk, of the epoch before.
	if err := j.reset(j.epoch + 1); err != nil {
		t.Fatal(err)
	}
	j.close()
	j, records, err = openJournal(path, 0)
	if err != nil || len(records) != 0 {
		t.Fatalf("after reset: %s, %v", records, err)
	}
	if err := j.append([][]byte{[]byte("four")}); err != nil {
		t.Fatal(err)
	}
	j.close()
	if _, records, err = openJournal(path, 0); err != nil || fmt.Sprintf("%s", records) != "[four]" {
		t.Fatalf("after reset and a record: %s, %v", records, err)
	}
}

// What a commit group recorded survives a crash before the journal is
// copied into bbolt, and is copied at the next open.
func TestJournal_RecordedCheckpointsSurviveACrash(t *testing.T) {
	path := filepath.Join(t.TempDir(), StateFileName)
	s, err := OpenStore(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	recordCheckpoint(t, s, testCheckpoint("example.com/a", 5))
	recordCheckpoint(t, s, testCheckpoint("example.com/b", 7))
	recordCheckpoint(t, s, testCheckpoint("example.com/a", 9))
	if got := storedSizeOf(t, s, "example.com/a"); got != 9 {
		t.Fatalf("before the crash: size %d, want 9", got)
	}
	crashStore(t, s)

	s, err = OpenStore(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	if a, b := storedSizeOf(t, s, "example.com/a"), storedSizeOf(t, s, "example.com/b"); a != 9 || b != 7 {
		t.Fatalf("after the crash: sizes %d and %d, want 9 and 7", a, b)
	}
	if s.journal.used() != 0 || len(s.recent) != 0 {
		t.Errorf("journal not copied at open: %d bytes, %d recent", s.journal.used(), len(s.recent))
	}
	crashStore(t, s)
	s, err = OpenStore(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := storedSizeOf(t, s, "example.com/a"); got != 9 {
		t.Fatalf("from bbolt: size %d, want 9", got)
	}
}

// A full journal is copied into bbolt and emptied; reads see the latest
// checkpoint of every log throughout, and after a crash.
func TestJournal_FullJournalIsCopied(t *testing.T) {
	path := filepath.Join(t.TempDir(), StateFileName)
	s, err := OpenStore(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	// A small journal, so that it fills many times.
	s.journal.close()
	if s.journal, _, err = openJournal(path+".small", 0); err != nil {
		t.Fatal(err)
	}
	copies := 0
	for i := range 3000 {
		used := s.journal.used()
		recordCheckpoint(t, s, testCheckpoint(fmt.Sprintf("example.com/%d", i%10), uint64(i)))
		if s.journal.used() < used {
			copies++
		}
		if got := storedSizeOf(t, s, fmt.Sprintf("example.com/%d", i%10)); got != int64(i) {
			t.Fatalf("record %d: stored size %d", i, got)
		}
	}
	if copies < 3 || s.journal.size > journalHeaderSize+64<<10 {
		t.Errorf("journal copied %d times, %d bytes: want a small journal copied again and again", copies, s.journal.size)
	}
	crashStore(t, s)
	if err := os.Rename(path+".small", path+journalSuffix); err != nil {
		t.Fatal(err)
	}
	s, err = OpenStore(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := 2990; i < 3000; i++ {
		if got := storedSizeOf(t, s, fmt.Sprintf("example.com/%d", i%10)); got != int64(i) {
			t.Errorf("after the crash, log %d: size %d, want %d", i%10, got, i)
		}
	}
}

// A log removed with its state forgotten is not brought back by the
// journal after a crash.
func TestJournal_ForgottenStateStaysForgotten(t *testing.T) {
	path := filepath.Join(t.TempDir(), StateFileName)
	s, err := OpenStore(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	l := newTestLog(t, "example.com/forgotten")
	if err := s.AddLog(l.config()); err != nil {
		t.Fatal(err)
	}
	recordCheckpoint(t, s, testCheckpoint(l.origin, 3))
	recordCheckpoint(t, s, testCheckpoint("example.com/kept", 4))
	if err := s.RemoveLog(l.origin, true); err != nil {
		t.Fatal(err)
	}
	if got := storedSizeOf(t, s, l.origin); got != -1 {
		t.Fatalf("forgotten state still read: size %d", got)
	}
	crashStore(t, s)
	s, err = OpenStore(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := storedSizeOf(t, s, l.origin); got != -1 {
		t.Errorf("forgotten state back after a crash: size %d", got)
	}
	if got := storedSizeOf(t, s, "example.com/kept"); got != 4 {
		t.Errorf("other log: size %d, want 4", got)
	}
}

// The stored note has the Ed25519 cosignature; after a restart, the
// monitoring endpoint adds an ML-DSA-44 line made then, which verifies,
// and serves that same line again rather than sign once per reader.
func TestMLDSA_ServedAfterRestartWithItsLine(t *testing.T) {
	l := newTestLog(t, "example.com/pq-restart").growTo(10)
	tw := startMLDSAWitness(t, "witness.test/pq")
	dir := tw.dir
	tw.addLog(l)
	tw.mustCosign(l.request(0, 10))
	mkey := tw.w.Cosigner().MLDSAVerifierKey()
	stored, err := tw.store.Latest(LogID(l.origin))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(stored.Note), "\n— "); n != 1+1 {
		t.Fatalf("stored note has %d signature lines, want the log's and the Ed25519 cosignature:\n%s", n, stored.Note)
	}
	tw.stop()

	// The same folder, keys and state, in a new Witness.
	skey, _, err := LoadOrCreateKey(filepath.Join(dir, KeyFileName), "witness.test/pq")
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewCosigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	mskey, _, err := LoadOrCreateMLDSAKey(filepath.Join(dir, MLDSAKeyFileName), "witness.test/pq")
	if err != nil {
		t.Fatal(err)
	}
	if c, err = c.WithMLDSA(mskey); err != nil || c.MLDSAVerifierKey() != mkey {
		t.Fatalf("ML-DSA-44 key after restart: %v", err)
	}
	s, err := OpenStore(filepath.Join(dir, StateFileName), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	w, err := New(s, c, Options{Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	served, err := w.servedNote(LogID(l.origin), mustLatest(t, s, l.origin))
	if err != nil {
		t.Fatal(err)
	}
	v, err := fnote.NewVerifierForCosignatureV1(mkey)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := note.Open(served, note.VerifierList(v)); err != nil {
		t.Fatalf("served note after restart has no ML-DSA-44 cosignature that verifies: %v\n%s", err, served)
	}
	again, err := w.servedNote(LogID(l.origin), mustLatest(t, s, l.origin))
	if err != nil || !bytes.Equal(again, served) {
		t.Errorf("second read signed again (or failed: %v)", err)
	}
	// And the witness goes on from the recorded state.
	if _, err := w.AddCheckpoint(context.Background(), l.growTo(12).request(10, 12)); err != nil {
		t.Fatal(err)
	}
}

func mustLatest(t *testing.T, s *Store, origin string) *CosignedCheckpoint {
	t.Helper()
	cp, err := s.Latest(LogID(origin))
	if err != nil {
		t.Fatal(err)
	}
	return cp
}

// A journal whose header is damaged (not merely unwritten) is refused, not
// made anew: its records may hold checkpoints the witness answered for.
// One whose creation stopped before its header was written is made anew.
func TestJournal_DamagedHeaderIsRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j")
	j, _, err := openJournal(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := j.append([][]byte{[]byte("cosigned")}); err != nil {
		t.Fatal(err)
	}
	if _, err := j.f.WriteAt([]byte{'A'}, 3); err != nil { // a byte of the magic
		t.Fatal(err)
	}
	j.close()
	if _, _, err := openJournal(path, 0); !errors.Is(err, ErrJournalDamaged) {
		t.Fatalf("a damaged header: %v, want ErrJournalDamaged", err)
	}
	raw, err := os.ReadFile(path)
	if err != nil || !bytes.Contains(raw, []byte("cosigned")) {
		t.Fatalf("the refused journal was changed: %v", err)
	}

	// Creation cut short: zeros where the header goes.
	if err := os.WriteFile(path, make([]byte, journalHeaderSize+100), 0o600); err != nil {
		t.Fatal(err)
	}
	j, records, err := openJournal(path, 0)
	if err != nil || len(records) != 0 {
		t.Fatalf("an unwritten header: %d records, %v", len(records), err)
	}
	j.close()
}

// A frame that does not read with a frame of its epoch after it is damage,
// not a tear (a group is written only once the one before is synced): the
// journal is refused rather than read short, which would forget the later
// group's acknowledged checkpoints.
func TestJournal_DamageBeforeTheLastFrameIsRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j")
	j, _, err := openJournal(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	firstAt := j.off
	for _, group := range [][][]byte{{[]byte("one"), []byte("two")}, {[]byte("three")}} {
		if err := j.append(group); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := j.f.WriteAt([]byte{'X'}, firstAt+journalFrameHeader+5); err != nil { // a byte of "one"
		t.Fatal(err)
	}
	j.close()
	if _, records, err := openJournal(path, 0); !errors.Is(err, ErrJournalDamaged) {
		t.Fatalf("damage before the last frame: %s, %v; want ErrJournalDamaged", records, err)
	}
}
