package kernel

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/annal-dev/annal/kernel/event"
	"github.com/annal-dev/annal/kernel/internal/logstore"
	"github.com/annal-dev/annal/kernel/internal/wal"
)

// crashChildEnv names the data folder a crash child writes to.
const crashChildEnv = "ANNAL_WAL_CRASH_CHILD"

type crashReceipt struct {
	Index    uint64 `json:"index"`
	LeafHash string `json:"leaf_hash"`
	EventID  string `json:"event_id"`
}

// TestWriteAheadCrashChild is the process TestWriteAhead_SIGKILLBeforeTiles
// kills: it takes actions while the tiles are held back, prints each
// receipt, and kills itself with entries in the write-ahead log only.
func TestWriteAheadCrashChild(t *testing.T) {
	dir := os.Getenv(crashChildEnv)
	if dir == "" {
		t.Skip("run by TestWriteAhead_SIGKILLBeforeTiles")
	}
	cfg := testConfig(t, dir)
	hold := make(chan struct{})
	if os.Getenv(crashChildEnv+"_RELEASE") != "" {
		close(hold) // a second round: the tiles take what they can before the kill
	}
	cfg.holdTiles = hold
	k, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	root := rootOf(t, k)
	out := bufio.NewWriter(os.Stdout)
	for i := range 300 {
		rc, err := k.Submit(context.Background(), root, ActionRequest{Type: event.Create, Target: fmt.Sprintf("crash/%d", i), Payload: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))})
		if err != nil {
			t.Fatal(err)
		}
		line, _ := json.Marshal(crashReceipt{rc.Index, rc.LeafHash, rc.EventID})
		fmt.Fprintf(out, "RECEIPT %s\n", line)
	}
	out.Flush()
	// The state cache folds what the tiles do not hold yet (its fold loop
	// runs every 50 ms): the restart must not take it for a state of
	// another log.
	time.Sleep(150 * time.Millisecond)
	syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {}
}

// TestWriteAhead_SIGKILLBeforeTiles kills a kernel whose receipts are in the
// write-ahead log but not in the tiles, twice: each start writes what the
// write-ahead log holds into the tiles, every receipt's index and bytes are
// in the log, nothing is written twice, and the state replays to the same
// ledger.
func TestWriteAhead_SIGKILLBeforeTiles(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	dir := t.TempDir()
	var receipts []crashReceipt
	for round, release := range []string{"", "1"} {
		got := runCrashChild(t, dir, release)
		receipts = append(receipts, got...)
		n := len(got)
		if n != 300 {
			t.Fatalf("round %d: %d receipts, want 300", round, n)
		}
		if round == 0 {
			if size, _, err := (logstore.DiskLog{Root: filepath.Join(dir, logstore.LogDirName)}).TreeState(); err != nil || size != 0 {
				t.Fatalf("the tiles should hold nothing before the restart, have %d (%v)", size, err)
			}
			checkAuditOfCrashedFolder(t, dir, uint64(1+n))
		}
	}

	ctx := context.Background()
	want := uint64(1 + len(receipts)) // genesis, then every receipt
	// annald rebuild, run first on the crashed folder, writes what the
	// write-ahead log holds into the tiles before it replays them.
	rep, err := Rebuild(ctx, testConfig(t, dir))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Size != want || len(rep.Differences) > 0 {
		t.Fatalf("rebuild of the crashed folder: %+v, want %d entries and no differences", rep, want)
	}
	k := openTest(t, dir)
	vkey, err := LocalVerifierKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	if audit, err := Audit(ctx, LocalLog(dir), vkey, WithUnsignedTail(dir)); err != nil || audit.UnsignedSkipped == "" || audit.Unsigned != 0 {
		t.Fatalf("an audit beside a running kernel should leave what is past the checkpoint to it: %+v, %v", audit, err)
	}
	info, err := k.Info(ctx)
	if err != nil || info.Size != want {
		t.Fatalf("log size %d (%v), want %d", info.Size, err, want)
	}
	ids := eventsOnce(t, k, want)
	for _, r := range receipts {
		entry, err := k.Entry(ctx, r.Index)
		if err != nil {
			t.Fatal(err)
		}
		leaf := event.LeafHash(entry)
		if hex.EncodeToString(leaf[:]) != r.LeafHash || ids[r.EventID] != r.Index {
			t.Fatalf("receipt %+v: the log has event %x at its index", r, leaf)
		}
	}
	// The tiles hold it all, under a signed checkpoint.
	if _, err := k.AwaitInclusionProof(ctx, want-1); err != nil {
		t.Fatal(err)
	}
	rc, err := k.Submit(ctx, rootOf(t, k), ActionRequest{Type: event.Observe, Target: "after"})
	if err != nil || rc.Index != want {
		t.Fatalf("the next action lands at %d (%v), want %d", rc.Index, err, want)
	}
	if err := k.Close(); err != nil {
		t.Fatal(err)
	}
	size, err := VerifyFolder(ctx, dir)
	if err != nil || size != want+1 {
		t.Fatalf("the folder's log: size %d, %v; want %d", size, err, want+1)
	}
	rep, err = Rebuild(ctx, testConfig(t, dir))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Size != want+1 || len(rep.Differences) > 0 {
		t.Fatalf("rebuild: %+v", rep)
	}
	audit, err := Audit(ctx, LocalLog(dir), vkey)
	if err != nil {
		t.Fatal(err)
	}
	if audit.Size != want+1 || audit.Folded != audit.Size || audit.Broken != nil {
		t.Fatalf("audit of the log after the crashes: %+v", audit)
	}
}

// checkAuditOfCrashedFolder audits a folder whose kernel was killed with
// its entries in the write-ahead log only: with WithUnsignedTail the audit
// replays them all past the signed checkpoint, none breaking a rule; and an
// entry in the write-ahead log that breaks one (added to a copy of the
// folder) is named, as past the checkpoint.
func checkAuditOfCrashedFolder(t *testing.T, dir string, answered uint64) {
	t.Helper()
	ctx := context.Background()
	vkey, err := LocalVerifierKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	audit, err := Audit(ctx, LocalLog(dir), vkey, WithUnsignedTail(dir))
	if err != nil {
		t.Fatal(err)
	}
	if audit.Broken != nil || audit.UnsignedSkipped != "" || audit.Size+audit.Unsigned != answered ||
		audit.UnsignedInWAL != answered-audit.Size || audit.Folded != answered {
		t.Fatalf("audit of the crashed folder: %+v; want the %d answered entries replayed, those past the checkpoint from the write-ahead log", audit, answered)
	}
	t.Logf("audit of the crashed folder: size %d, unsigned %d (%d in the write-ahead log), folded %d", audit.Size, audit.Unsigned, audit.UnsignedInWAL, audit.Folded)
	// Without the tail, the audit covers the signed checkpoint alone.
	if signed, err := Audit(ctx, LocalLog(dir), vkey); err != nil || signed.Unsigned != 0 || signed.Folded != signed.Size {
		t.Fatalf("audit without the tail: %+v, %v", signed, err)
	}

	// The same entries written into the tiles of a copy, as a start does
	// before its first checkpoint: past the checkpoint, from the tiles.
	inTiles := copyDir(t, dir)
	os.Remove(filepath.Join(inTiles, logstore.LockFileName))
	d, err := logstore.OpenExistingDataDir(testConfig(t, inTiles).DataDir)
	if err != nil {
		t.Fatal(err)
	}
	err = logstore.ReplayWriteAhead(d, testConfig(t, inTiles).Logger)
	d.Close()
	if err != nil {
		t.Fatal(err)
	}
	tiles, err := Audit(ctx, LocalLog(inTiles), vkey, WithUnsignedTail(inTiles))
	if err != nil || tiles.Broken != nil || tiles.Size+tiles.Unsigned != answered || tiles.UnsignedInWAL != 0 {
		t.Fatalf("audit with the entries in the tiles past the checkpoint: %+v, %v", tiles, err)
	}

	// A write a crash cut short at the end of the write-ahead log: named,
	// not replayed, and the folder left as it was.
	torn := copyDir(t, dir)
	os.Remove(filepath.Join(torn, logstore.LockFileName))
	segments, _ := filepath.Glob(filepath.Join(torn, logstore.WALDirName, "*.wal"))
	if len(segments) == 0 {
		t.Fatal("no write-ahead segment in the crashed folder")
	}
	newest := segments[len(segments)-1]
	// Where its records end: the segment may go on with zeros (the wal
	// package grows it ahead), and an entry ends with "}".
	written, err := os.ReadFile(newest)
	if err != nil {
		t.Fatal(err)
	}
	recordsEnd := len(bytes.TrimRight(written, "\x00"))
	f, err := os.OpenFile(newest, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(int64(recordsEnd)); err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte{0x80, 0, 0, 40, 1, 2, 3}, int64(recordsEnd)) // a record header cut short
	f.Close()
	before, _ := os.ReadFile(newest)
	tornAudit, err := Audit(ctx, LocalLog(torn), vkey, WithUnsignedTail(torn))
	if err != nil || tornAudit.Broken != nil || tornAudit.Size+tornAudit.Unsigned != answered ||
		!strings.Contains(tornAudit.WALTornTail, "a record header cut short") || !strings.Contains(tornAudit.WALTornTail, filepath.Base(newest)) {
		t.Fatalf("audit of a folder whose write-ahead log ends torn: %+v, %v", tornAudit, err)
	}
	if after, _ := os.ReadFile(newest); !bytes.Equal(after, before) {
		t.Fatal("the audit changed the write-ahead log")
	}

	bad := copyDir(t, dir)
	os.Remove(filepath.Join(bad, logstore.LockFileName))
	w, _, _, err := wal.Open(filepath.Join(bad, logstore.WALDirName), answered, wal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Append(answered, [][]byte{[]byte(`{"not":"an event"}`)}); err != nil {
		t.Fatal(err)
	}
	w.Close()
	audit, err = Audit(ctx, LocalLog(bad), vkey, WithUnsignedTail(bad))
	if err != nil {
		t.Fatal(err)
	}
	if b := audit.Broken; b == nil || b.Index != answered || !b.Unsigned || b.Gate != GateForm || audit.Folded != answered {
		t.Fatalf("a write-ahead entry that is no event: %+v, broken %+v; want entry %d named, past the checkpoint", audit, audit.Broken, answered)
	}
}

// TestWriteAhead_ReceiptReadableBeforeTiles: an answered entry is read,
// listed and counted at once, while the tiles do not hold it yet; a proof
// waits for them.
func TestWriteAhead_ReceiptReadableBeforeTiles(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir)
	hold := make(chan struct{})
	cfg.holdTiles = hold
	k, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	ctx := context.Background()
	root := rootOf(t, k)
	var last *Receipt
	for i := range 300 { // past one entry bundle
		if last, err = k.Submit(ctx, root, ActionRequest{Type: event.Create, Target: fmt.Sprintf("early/%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	if size, _, _ := (logstore.DiskLog{Root: k.LogPath()}).TreeState(); size != 0 {
		t.Fatalf("the tiles hold %d entries while held back", size)
	}
	entry, err := k.Entry(ctx, last.Index)
	if err != nil {
		t.Fatal(err)
	}
	if leaf := event.LeafHash(entry); hex.EncodeToString(leaf[:]) != last.LeafHash {
		t.Fatalf("entry %d read back is not the receipt's", last.Index)
	}
	if _, err := k.Entry(ctx, last.Index+1); !errors.Is(err, ErrNotFound) {
		t.Fatalf("an entry past the log: %v", err)
	}
	if info, _ := k.Info(ctx); info.Size != last.Index+1 {
		t.Fatalf("Info.Size %d, want %d", info.Size, last.Index+1)
	}
	if _, err := k.InclusionProof(ctx, last.Index); !errors.Is(err, ErrNotPublished) {
		t.Fatalf("a proof of an entry not in the tiles: %v", err)
	}
	close(hold)
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := k.AwaitInclusionProof(wctx, last.Index); err != nil {
		t.Fatal(err)
	}
}

// TestWriteAhead_TilesRefuseThenTake: when the tiles refuse the write-ahead
// log's entries, the kernel stops deciding (the answered entries stay
// readable), and resumes once the tiles take them.
func TestWriteAhead_TilesRefuseThenTake(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir)
	var refuse, refuseLanded atomic.Bool
	cfg.failTiles = func(landed bool) error {
		if landed && refuseLanded.CompareAndSwap(true, false) {
			return errors.New("sync the tile folder: input/output error (test)")
		}
		if !landed && refuse.Load() {
			return errors.New("disk full (test)")
		}
		return nil
	}
	k, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	ctx := context.Background()
	root := rootOf(t, k)
	refuse.Store(true)
	rc, err := k.Submit(ctx, root, ActionRequest{Type: event.Create, Target: "before/refusal"})
	if err != nil {
		t.Fatal(err) // durable in the write-ahead log
	}
	waitReadiness(t, k, "the kernel stops taking writes while the tiles refuse them", func(err error) bool { return err != nil })
	if _, err := k.Submit(ctx, root, ActionRequest{Type: event.Create, Target: "during/refusal"}); !errors.Is(err, logstore.ErrUnavailable) {
		t.Fatalf("an action while the tiles refuse: %v", err)
	}
	if _, err := k.Entry(ctx, rc.Index); err != nil {
		t.Fatalf("the answered entry is not readable: %v", err)
	}
	refuse.Store(false)
	waitReadiness(t, k, "the kernel resumes once the tiles take the entries", func(err error) bool { return err == nil })
	next, err := k.Submit(ctx, root, ActionRequest{Type: event.Create, Target: "after/refusal"})
	if err != nil || next.Index != rc.Index+1 {
		t.Fatalf("after resuming: %+v, %v", next, err)
	}

	// A write of the tiles that landed but reported failing: the entry is
	// found in the tiles on the retry, not written twice.
	refuseLanded.Store(true)
	landed, err := k.Submit(ctx, root, ActionRequest{Type: event.Create, Target: "landed/reported/failed"})
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := k.AwaitInclusionProof(wctx, landed.Index); err != nil {
		t.Fatal(err)
	}
	waitReadiness(t, k, "the kernel resumes after the landed write", func(err error) bool { return err == nil })
	after, err := k.Submit(ctx, root, ActionRequest{Type: event.Create, Target: "after/landed"})
	if err != nil || after.Index != landed.Index+1 {
		t.Fatalf("after the landed write: %+v, %v", after, err)
	}
	if size, _, err := (logstore.DiskLog{Root: k.LogPath()}).TreeState(); err != nil || size > after.Index+1 {
		t.Fatalf("the tiles hold %d entries (%v): something was written twice", size, err)
	}
}

// TestWriteAhead_DisabledStartWritesItFirst: a kernel started without the
// write-ahead log on a folder whose write-ahead log holds entries writes
// them into the tiles first, and Tessera continues after them.
func TestWriteAhead_DisabledStartWritesItFirst(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir)
	cfg.holdTiles = make(chan struct{}) // never released: Close leaves them in the write-ahead log
	k, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	root := rootOf(t, k)
	for i := range 10 {
		if _, err := k.Submit(context.Background(), root, ActionRequest{Type: event.Create, Target: fmt.Sprintf("held/%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	k.Close() // reports the entries left behind
	if size, _, _ := (logstore.DiskLog{Root: k.LogPath()}).TreeState(); size != 0 {
		t.Fatalf("the tiles hold %d entries", size)
	}
	cfg = testConfig(t, dir)
	cfg.DisableWriteAhead = true
	k = openTestConfig(t, cfg)
	defer k.Close()
	rc, err := k.Submit(context.Background(), rootOf(t, k), ActionRequest{Type: event.Observe, Target: "through/tessera"})
	if err != nil || rc.Index != 11 {
		t.Fatalf("the first action through Tessera: %+v, %v; want index 11", rc, err)
	}
}

func openTestConfig(t *testing.T, cfg Config) *Kernel {
	t.Helper()
	k, err := Open(cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return k
}

// TestWriteAhead_FromAnotherLogIsRefused: a write-ahead log copied from
// another data folder is refused at start, naming it, and nothing of it
// reaches this log's tiles.
func TestWriteAhead_FromAnotherLogIsRefused(t *testing.T) {
	ours, theirs := t.TempDir(), t.TempDir()
	k := openTest(t, ours)
	if err := k.Close(); err != nil {
		t.Fatal(err)
	}
	size, _, err := (logstore.DiskLog{Root: filepath.Join(ours, logstore.LogDirName)}).TreeState()
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t, theirs)
	cfg.holdTiles = make(chan struct{}) // their entries stay in their write-ahead log
	other, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if _, err := other.Submit(context.Background(), rootOf(t, other), ActionRequest{Type: event.Observe, Target: fmt.Sprintf("theirs/%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	other.Close()
	if err := os.RemoveAll(filepath.Join(ours, logstore.WALDirName)); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(filepath.Join(ours, logstore.WALDirName), os.DirFS(filepath.Join(theirs, logstore.WALDirName))); err != nil {
		t.Fatal(err)
	}
	_, err = Open(testConfig(t, ours))
	if !errors.Is(err, logstore.ErrDamaged) || !strings.Contains(err.Error(), filepath.Join(ours, logstore.WALDirName)) {
		t.Fatalf("a start with another log's write-ahead log: %v", err)
	}
	if after, _, _ := (logstore.DiskLog{Root: filepath.Join(ours, logstore.LogDirName)}).TreeState(); after != size {
		t.Fatalf("the tiles went from %d to %d entries", size, after)
	}
}

// waitReadiness waits up to 10 s for k's readiness (nil, or why it takes
// no writes) to satisfy ok, and fails the test with it otherwise.
func waitReadiness(t *testing.T, k *Kernel, want string, ok func(error) bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := k.Ready()
		if ok(err) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited 10 s for this: %s; readiness is %v", want, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// eventsOnce reads the first size entries of k's log and returns the index
// of each event id, failing the test if an event is in the log twice.
func eventsOnce(t *testing.T, k *Kernel, size uint64) map[string]uint64 {
	t.Helper()
	ids := map[string]uint64{}
	for i := range size {
		entry, err := k.Entry(context.Background(), i)
		if err != nil {
			t.Fatal(err)
		}
		ev, err := event.Parse(entry)
		if err != nil {
			t.Fatal(err)
		}
		if j, dup := ids[ev.ID]; dup {
			t.Fatalf("event %s is in the log twice: at %d and %d", ev.ID, j, i)
		}
		ids[ev.ID] = i
	}
	return ids
}
