package kernel

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/annal-dev/annal/kernel/event"
	"github.com/annal-dev/annal/kernel/internal/logstore"
	"github.com/annal-dev/annal/kernel/internal/wal"
)

// runCrashChild runs TestWriteAheadCrashChild on dir (release: whether the
// tiles may take entries before the kill) and returns the receipts it
// printed before it killed itself with SIGKILL.
func runCrashChild(t *testing.T, dir, release string) []crashReceipt {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestWriteAheadCrashChild$", "-test.v")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+dir, crashChildEnv+"_RELEASE="+release)
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	err := cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("the child should die of SIGKILL, got %v\n%s", err, stdout.String())
	}
	return parseReceipts(t, stdout.Bytes())
}

// parseReceipts reads the RECEIPT lines a child printed; a line the kill
// cut short is not a receipt.
func parseReceipts(t *testing.T, out []byte) []crashReceipt {
	t.Helper()
	var receipts []crashReceipt
	for _, line := range strings.Split(string(out), "\n") {
		rest, ok := strings.CutPrefix(line, "RECEIPT ")
		if !ok {
			continue
		}
		var r crashReceipt
		if err := json.Unmarshal([]byte(rest), &r); err != nil {
			continue // the last line, cut by the kill
		}
		receipts = append(receipts, r)
	}
	return receipts
}

// newestSegment returns the path and bytes of the newest write-ahead
// segment of a data folder.
func newestSegment(t *testing.T, dir string) (string, []byte) {
	t.Helper()
	segments, _ := filepath.Glob(filepath.Join(dir, logstore.WALDirName, "*.wal"))
	if len(segments) == 0 {
		t.Fatal("no write-ahead segment")
	}
	path := segments[len(segments)-1]
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return path, data
}

// walWrite is one write of a version 3 segment, as FORMATS.md lays it out.
type walWrite struct {
	start, commit int    // where its first record and its commit record start
	first, count  uint64 // what its commit record names
	lastRecord    int    // where its last record starts
}

// lastWALWrite reads a version 3 segment by FORMATS.md ("Write-ahead
// log") and returns its last write with a commit record, and where the
// records end (zeros may follow).
func lastWALWrite(t *testing.T, data []byte) (walWrite, int) {
	t.Helper()
	if !bytes.HasPrefix(data, []byte("annal/wal/v3\n")) {
		t.Fatalf("not a version 3 segment: %q", data[:min(16, len(data))])
	}
	var last, cur walWrite
	off := 16
	for off+16 <= len(data) {
		word := binary.BigEndian.Uint32(data[off:])
		switch {
		case word == 0 && bytes.Count(data[off:], []byte{0}) == len(data)-off:
			return last, off
		case word == 0x40000008:
			cur.commit = off
			cur.first, cur.count = binary.BigEndian.Uint64(data[off+8:]), uint64(binary.BigEndian.Uint32(data[off+16:]))
			last = cur
			off += 24
		default:
			if word&0x80000000 != 0 {
				cur = walWrite{start: off}
			}
			cur.lastRecord = off
			off += 16 + int(word&0x7fffffff)
		}
	}
	return last, off
}

// TestWriteAhead_FlippedByteInLastAcknowledgedWriteIsRefused is the
// issue's attack: after a kill -9, one byte of the newest acknowledged
// write of the write-ahead log is flipped (a disk that returns bad data).
// The start is refused, naming the segment, the offset and the receipt's
// index, and the repair route; nothing changes on disk, and no index is
// given again. Putting the byte back (the segment restored from a copy)
// starts the log with every receipt.
func TestWriteAhead_FlippedByteInLastAcknowledgedWriteIsRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child process")
	}
	dir := t.TempDir()
	receipts := runCrashChild(t, dir, "")
	if len(receipts) != 300 {
		t.Fatalf("%d receipts, want 300", len(receipts))
	}
	lastReceipt := receipts[len(receipts)-1]
	path, data := newestSegment(t, dir)
	w, _ := lastWALWrite(t, data)
	if w.first+w.count != lastReceipt.Index+1 {
		t.Fatalf("the last committed write holds %d to %d, the last receipt is %d", w.first, w.first+w.count-1, lastReceipt.Index)
	}
	flip := w.commit - 2 // in the last record's entry
	damaged := bytes.Clone(data)
	damaged[flip] ^= 0x01
	if err := os.WriteFile(path, damaged, 0o600); err != nil {
		t.Fatal(err)
	}

	k, err := Open(testConfig(t, dir))
	if err == nil {
		k.Close()
		t.Fatal("annald started on a write-ahead log whose last acknowledged write is damaged")
	}
	msg := err.Error()
	t.Logf("the refusal: %s", msg)
	for _, want := range []string{
		path,
		fmt.Sprintf("at offset %d", w.lastRecord),
		fmt.Sprintf("the entry at index %d is at risk", lastReceipt.Index),
		"a receipt may name it",
		"copy the whole data folder to a good disk",
		"restore this segment from a backup",
		"Never delete or truncate the segment",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("the refusal does not say %q:\n%s", want, msg)
		}
	}
	var damage *logstore.DamageError
	if !errors.Is(err, logstore.ErrDamaged) || !errors.As(err, &damage) || damage.File != path {
		t.Fatalf("the refusal is not a data folder damage naming %s: %v", path, err)
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(after, damaged) {
		t.Fatal("the refused start changed the segment")
	}
	// annald rebuild and annald audit refuse it too.
	if _, err := Rebuild(context.Background(), testConfig(t, dir)); !errors.Is(err, logstore.ErrDamaged) || !strings.Contains(err.Error(), path) {
		t.Fatalf("rebuild on the damaged folder: %v", err)
	}
	vkey, err := LocalVerifierKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Audit(context.Background(), LocalLog(dir), vkey, WithUnsignedTail(dir)); !errors.Is(err, logstore.ErrDamaged) || !strings.Contains(err.Error(), path) {
		t.Fatalf("audit of the damaged folder: %v", err)
	}

	// The repair route: the segment restored (here: the byte put back).
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	k = openTest(t, dir)
	defer k.Close()
	ctx := context.Background()
	for _, r := range []crashReceipt{receipts[0], lastReceipt} {
		entry, err := k.Entry(ctx, r.Index)
		if err != nil {
			t.Fatal(err)
		}
		if leaf := event.LeafHash(entry); hex.EncodeToString(leaf[:]) != r.LeafHash {
			t.Fatalf("receipt %d: another entry at its index", r.Index)
		}
	}
	rc, err := k.Submit(ctx, rootOf(t, k), ActionRequest{Type: event.Observe, Target: "after/repair"})
	if err != nil || rc.Index != lastReceipt.Index+1 {
		t.Fatalf("the next entry: %+v, %v; want index %d", rc, err, lastReceipt.Index+1)
	}
}

// TestWriteAhead_TornUnacknowledgedWriteIsCut: after a kill -9, a write
// that a crash cut short (never acknowledged: no commit record) ends the
// write-ahead log, as a crash during its write leaves it: the start cuts
// it and serves every receipt, and the next entry takes the torn write's
// index, which no receipt names.
func TestWriteAhead_TornUnacknowledgedWriteIsCut(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child process")
	}
	dir := t.TempDir()
	receipts := runCrashChild(t, dir, "")
	lastReceipt := receipts[len(receipts)-1]
	path, data := newestSegment(t, dir)
	_, end := lastWALWrite(t, data)
	next := lastReceipt.Index + 1
	for _, torn := range []struct {
		what  string
		bytes []byte
	}{
		{"a write cut short mid-record", wal.AppendRecord(nil, next, []byte(`{"torn":"write, never acknowledged"}`), true)[:30]},
		{"a write whose first page did not land", append(make([]byte, 20), wal.AppendRecord(nil, next+1, []byte(`{"x":1}`), false)...)},
		{"garbage where the file grew", bytes.Repeat([]byte{0xa5}, 40)},
	} {
		t.Run(torn.what, func(t *testing.T) {
			crashed := copyDir(t, dir)
			os.Remove(filepath.Join(crashed, logstore.LockFileName))
			seg := filepath.Join(crashed, logstore.WALDirName, filepath.Base(path))
			b := append(bytes.Clone(data[:end]), torn.bytes...)
			if err := os.WriteFile(seg, b, 0o600); err != nil {
				t.Fatal(err)
			}
			var logs bytes.Buffer
			cfg := testConfig(t, crashed)
			cfg.Logger = slogTo(&logs)
			k, err := Open(cfg)
			if err != nil {
				t.Fatalf("the start refused a torn unacknowledged write: %v", err)
			}
			defer k.Close()
			if !strings.Contains(logs.String(), "cut off the unacknowledged tail") || !strings.Contains(logs.String(), fmt.Sprintf("offset=%d", end)) {
				t.Errorf("the start does not say what it cut:\n%s", logs.String())
			}
			ctx := context.Background()
			entry, err := k.Entry(ctx, lastReceipt.Index)
			if err != nil {
				t.Fatal(err)
			}
			if leaf := event.LeafHash(entry); hex.EncodeToString(leaf[:]) != lastReceipt.LeafHash {
				t.Fatal("the last receipt's entry changed")
			}
			rc, err := k.Submit(ctx, rootOf(t, k), ActionRequest{Type: event.Observe, Target: "after/torn"})
			if err != nil || rc.Index != next {
				t.Fatalf("the next entry: %+v, %v; want index %d", rc, err, next)
			}
		})
	}
}

// loadChildEnv names the data folder a load child writes to.
const loadChildEnv = "ANNAL_WAL_LOAD_CHILD"

// TestWriteAheadLoadChild is the process that
// TestWriteAhead_KillNineUnderLoadLosesNoReceipt kills: it opens the data
// folder (recovering what the last kill left), prints READY, and submits
// actions from several goroutines at once, printing each receipt as it is
// acknowledged, until it is killed.
func TestWriteAheadLoadChild(t *testing.T) {
	dir := os.Getenv(loadChildEnv)
	if dir == "" {
		t.Skip("run by TestWriteAhead_KillNineUnderLoadLosesNoReceipt")
	}
	cfg := testConfig(t, dir)
	if os.Getenv(loadChildEnv+"_HOLD") != "" {
		cfg.holdTiles = make(chan struct{}) // the receipts stay in the write-ahead log only
	}
	var logs bytes.Buffer
	cfg.Logger = slogTo(&logs)
	k, err := Open(cfg)
	if err != nil {
		fmt.Printf("OPEN FAILED %v\n", err)
		t.Fatal(err)
	}
	// What the start found the last kill left, for the parent's log.
	for _, what := range []string{"cut off the unacknowledged tail", "had no commit record"} {
		if strings.Contains(logs.String(), what) {
			fmt.Printf("RECOVERY %s\n", what)
		}
	}
	root := rootOf(t, k)
	var mu sync.Mutex
	emit := func(line []byte) {
		mu.Lock()
		os.Stdout.Write(line) // unbuffered: the parent has it before any kill
		mu.Unlock()
	}
	emit([]byte("READY\n"))
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				rc, err := k.Submit(context.Background(), root, ActionRequest{Type: event.Create, Target: fmt.Sprintf("load/%d/%d", g, i)})
				if err != nil {
					emit(fmt.Appendf(nil, "ERROR %v\n", err))
					return
				}
				line, _ := json.Marshal(crashReceipt{rc.Index, rc.LeafHash, rc.EventID})
				emit(fmt.Appendf(nil, "RECEIPT %s\n", line))
			}
		}()
	}
	wg.Wait()
	select {}
}

// TestWriteAhead_KillNineUnderLoadLosesNoReceipt kills a kernel under load
// (eight concurrent writers, groups of several entries a write) with
// SIGKILL at random moments, seeded, again and again on the same data
// folder: each start recovers what the kill left, and in the end every
// receipt any child printed is in the log at its index with its leaf hash,
// no event twice. Half the rounds hold the tiles back, so that receipts
// live in the write-ahead log alone.
func TestWriteAhead_KillNineUnderLoadLosesNoReceipt(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(20261127, 9))
	const rounds = 12
	var receipts []crashReceipt
	started := time.Now()
	for round := range rounds {
		hold := ""
		if rng.IntN(2) == 0 {
			hold = "1"
		}
		delay := time.Duration(5+rng.IntN(120)) * time.Millisecond
		got, recovered := killUnderLoad(t, dir, hold, delay)
		receipts = append(receipts, got...)
		t.Logf("round %d: started after %v, killed %v after READY (tiles held: %v), %d receipts", round, recovered, delay, hold != "", len(got))
	}
	t.Logf("%d rounds, %d receipts, %v", rounds, len(receipts), time.Since(started).Round(time.Millisecond))
	if len(receipts) < rounds {
		t.Fatalf("only %d receipts in %d rounds: the load did not run", len(receipts), rounds)
	}

	k := openTest(t, dir)
	defer k.Close()
	ctx := context.Background()
	byIndex := map[uint64]crashReceipt{}
	for _, r := range receipts {
		if other, dup := byIndex[r.Index]; dup {
			t.Fatalf("index %d was receipted twice: %+v and %+v", r.Index, other, r)
		}
		byIndex[r.Index] = r
		entry, err := k.Entry(ctx, r.Index)
		if err != nil {
			t.Fatalf("receipt %+v: %v", r, err)
		}
		if leaf := event.LeafHash(entry); hex.EncodeToString(leaf[:]) != r.LeafHash {
			t.Fatalf("receipt %+v: the log has %x at its index", r, leaf)
		}
	}
	info, err := k.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	eventsOnce(t, k, info.Size)
}

// killUnderLoad starts TestWriteAheadLoadChild on dir, kills it with
// SIGKILL delay after it is ready, and returns the receipts it printed and
// what its start recovered.
func killUnderLoad(t *testing.T, dir, hold string, delay time.Duration) ([]crashReceipt, []string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestWriteAheadLoadChild$", "-test.v")
	cmd.Env = append(os.Environ(), loadChildEnv+"="+dir, loadChildEnv+"_HOLD="+hold)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan struct{})
	out := make(chan []byte, 1)
	go func() {
		var b bytes.Buffer
		r := bufio.NewReader(stdout)
		for {
			line, err := r.ReadBytes('\n')
			b.Write(line)
			if bytes.Equal(line, []byte("READY\n")) {
				close(ready)
			}
			if err != nil {
				break
			}
		}
		out <- b.Bytes()
	}()
	select {
	case <-ready:
	case printed := <-out:
		cmd.Wait()
		t.Fatalf("the child stopped before it was ready:\n%s\n%s", printed, stderr.String())
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("the child did not start:\n%s\n%s", <-out, stderr.String())
	}
	time.Sleep(delay)
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	printed := <-out
	cmd.Wait()
	if bytes.Contains(printed, []byte("OPEN FAILED")) || bytes.Contains(printed, []byte("ERROR ")) {
		t.Fatalf("the child failed:\n%s", printed)
	}
	var recovered []string
	for _, line := range strings.Split(string(printed), "\n") {
		if what, ok := strings.CutPrefix(line, "RECOVERY "); ok {
			recovered = append(recovered, what)
		}
	}
	return parseReceipts(t, printed), recovered
}

// slogTo is a text logger writing to w, for tests that read what a start
// logged.
func slogTo(w io.Writer) *slog.Logger { return slog.New(slog.NewTextHandler(w, nil)) }
