package kernel

import (
	"context"
	"encoding/hex"
	"errors"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/annal-dev/annal/internal/servicestest"
	"github.com/annal-dev/annal/kernel/event"
	"github.com/annal-dev/annal/kernel/internal/history"
	"github.com/annal-dev/annal/kernel/internal/logstore"
	"github.com/annal-dev/annal/verifier"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

func awsConfig(t *testing.T, dir string, a servicestest.AWS) Config {
	cfg := testConfig(t, dir)
	cfg.CheckpointInterval = MinAWSCheckpointInterval
	cfg.Storage = logstore.Storage{AWS: &logstore.AWSStorage{DSN: a.DSN, Bucket: a.Bucket, Endpoint: a.Endpoint, AccessKey: a.AccessKey, SecretKey: a.SecretKey}}
	return cfg
}

// waitProof returns the tlog-proof of index once a checkpoint covers it.
func waitProof(t *testing.T, k *Kernel, index uint64) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := k.log.AwaitPublished(ctx, index); err != nil {
		t.Fatalf("await a checkpoint covering %d: %v", index, err)
	}
	p, err := k.InclusionProof(ctx, index)
	if err != nil {
		t.Fatal(err)
	}
	return p.Marshal()
}

// A log on Tessera's AWS driver (MariaDB and an S3 server): actions are
// committed and proven, the kernel restarts on its state, a second data
// folder holding only the log's key folds the whole log from the bucket,
// and a data folder of another log is refused before it writes.
func TestAWSStorage_ActionsProofsRestartAndFoldFromBucket(t *testing.T) {
	a := servicestest.NewAWS(t)
	dir := t.TempDir()
	k, err := Open(awsConfig(t, dir, a))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	root := rootOf(t, k)
	var last *Receipt
	for i := 0; i < 5; i++ {
		if last, err = k.Submit(ctx, root, ActionRequest{Type: event.Mutate, Target: "workspace/notes.md"}); err != nil {
			t.Fatal(err)
		}
	}
	entry, err := k.Entry(ctx, last.Index)
	if err != nil {
		t.Fatal(err)
	}
	res, err := verifier.VerifyProof(entry, waitProof(t, k, last.Index), k.dir.VerifierKey)
	if err != nil || res.Index != last.Index {
		t.Fatalf("the proof of a bucket-stored entry: %+v %v", res, err)
	}
	// Tiles and the checkpoint are in the bucket, where readers find them.
	for _, key := range []string{"checkpoint", "tile/0/000.p/" + itoa(last.Index+1), "tile/entries/000.p/" + itoa(last.Index+1)} {
		if _, err := a.S3().GetObject(ctx, s3Get(a.Bucket, key)); err != nil {
			t.Errorf("the bucket has no %s: %v", key, err)
		}
	}
	if err := k.Close(); err != nil {
		t.Fatal(err)
	}

	k, err = Open(awsConfig(t, dir, a))
	if err != nil {
		t.Fatal(err)
	}
	rc, err := k.Submit(ctx, rootOf(t, k), ActionRequest{Type: event.Mutate, Target: "workspace/after-restart"})
	if err != nil || rc.Index != last.Index+1 {
		t.Fatalf("after a restart: %+v %v", rc, err)
	}
	want, _ := k.Actor(RootID)
	if err := k.Close(); err != nil {
		t.Fatal(err)
	}

	// Another machine: the log's key and root credential, no state.
	other := copyKeys(t, dir)
	k2, err := Open(awsConfig(t, other, a))
	if err != nil {
		t.Fatal(err)
	}
	got, _ := k2.Actor(RootID)
	if got.Balance != want.Balance || got.Consumed != want.Consumed || k2.ledgerSize() != rc.Index+1 {
		t.Fatalf("folded from the bucket: root %+v, want %+v; size %d", got, want, k2.ledgerSize())
	}
	if diff, err := k2.stateMatchesReplay(ctx); err != nil || len(diff) > 0 {
		t.Fatalf("state differs from a replay: %v %v", diff, err)
	}
	if err := k2.Close(); err != nil {
		t.Fatal(err)
	}

	// A data folder of another log (its own key) is refused.
	if k3, err := Open(awsConfig(t, t.TempDir(), a)); err == nil {
		k3.Close()
		t.Fatal("a kernel with another log's key opened the bucket")
	}
}

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }

func s3Get(bucket, key string) *s3.GetObjectInput {
	return &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)}
}

func (k *Kernel) ledgerSize() uint64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.ledger.Size
}

// copyKeys gives a new data folder the log's identity and nothing else:
// another machine of the same log.
func copyKeys(t *testing.T, from string) string {
	t.Helper()
	to := t.TempDir()
	if err := logstore.CopyIdentity(from, to); err != nil {
		t.Fatal(err)
	}
	return to
}

// Two kernels on one log, each with its own lease: the second waits as a
// standby; when the first stops renewing (paused past its lease), the
// second takes over, and the first — still running, as if resumed — can no
// longer append: the fence refuses its batches inside the database. Every
// receipt the first gave is below every receipt of the second, and the log
// folds.
func TestAWSStorage_LeaseFencesAPausedKernel(t *testing.T) {
	a := servicestest.NewAWS(t)
	ctx := context.Background()
	ttl := 2 * time.Second
	leaseA, err := logstore.OpenLease(ctx, &logstore.AWSStorage{DSN: a.DSN}, "kernel-a", ttl, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer leaseA.Close()
	if err := leaseA.Acquire(ctx, nil); err != nil {
		t.Fatal(err)
	}
	dirA := t.TempDir()
	cfgA := awsConfig(t, dirA, a)
	cfgA.Storage.AWS.Lease = leaseA
	ka, err := Open(cfgA)
	if err != nil {
		t.Fatal(err)
	}
	defer ka.Close()
	rootA := rootOf(t, ka)
	var fromA []uint64
	for i := 0; i < 5; i++ {
		rc, err := ka.Submit(ctx, rootA, ActionRequest{Type: event.Mutate, Target: "workspace/a"})
		if err != nil {
			t.Fatal(err)
		}
		fromA = append(fromA, rc.Index)
	}

	leaseB, err := logstore.OpenLease(ctx, &logstore.AWSStorage{DSN: a.DSN}, "kernel-b", ttl, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer leaseB.Close()
	acquired := make(chan time.Time, 1)
	var waited []logstore.LeaseState
	go func() {
		if err := leaseB.Acquire(ctx, func(s logstore.LeaseState) { waited = append(waited, s) }); err == nil {
			acquired <- time.Now()
		}
	}()
	// A stops renewing here: paused. It keeps submitting until B takes over.
	var tookOver time.Time
	for tookOver.IsZero() {
		select {
		case tookOver = <-acquired:
		case <-time.After(100 * time.Millisecond):
			if rc, err := ka.Submit(ctx, rootA, ActionRequest{Type: event.Mutate, Target: "workspace/a"}); err == nil {
				fromA = append(fromA, rc.Index)
			}
		}
	}
	if len(waited) == 0 || waited[0].Holder != "kernel-a" {
		t.Errorf("the standby saw %+v while it waited", waited)
	}
	cfgB := awsConfig(t, copyKeys(t, dirA), a)
	cfgB.Storage.AWS.Lease = leaseB
	kb, err := Open(cfgB)
	if err != nil {
		t.Fatal(err)
	}
	defer kb.Close()
	rootB := rootOf(t, kb)
	var fromB []uint64
	for i := 0; i < 5; i++ {
		// A, resumed, tries too: refused by the fence.
		if rc, err := ka.Submit(ctx, rootA, ActionRequest{Type: event.Mutate, Target: "workspace/a-after"}); err == nil {
			t.Fatalf("the kernel that lost its lease appended at %d", rc.Index)
		}
		rc, err := kb.Submit(ctx, rootB, ActionRequest{Type: event.Mutate, Target: "workspace/b"})
		if err != nil {
			t.Fatal(err)
		}
		fromB = append(fromB, rc.Index)
	}
	if err := leaseA.Renew(ctx); !errors.Is(err, logstore.ErrLeaseLost) {
		t.Fatalf("A renews a lease B holds: %v", err)
	}
	if fromA[len(fromA)-1] >= fromB[0] {
		t.Fatalf("A appended at %v, B from %v: both appended", fromA, fromB)
	}
	if diff, err := kb.stateMatchesReplay(ctx); err != nil || len(diff) > 0 {
		t.Fatalf("B's state differs from a replay: %v %v", diff, err)
	}
	// Every receipt A gave is A's entry in the log.
	for _, i := range fromA {
		ev := mustEvent(t, kb, i)
		if ev.Action == nil || ev.Action.Target != "workspace/a" {
			t.Fatalf("entry %d, acknowledged by A, is %+v", i, ev)
		}
	}
}

func mustEvent(t *testing.T, k *Kernel, index uint64) *event.Event {
	t.Helper()
	entry, err := k.Entry(context.Background(), index)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := event.Parse(entry)
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

// loadRun submits actions as root from 4 goroutines until stopped, and
// keeps every receipt and every failure.
type loadRun struct {
	mu       sync.Mutex
	acks     map[uint64]string // index -> leaf hash
	failures []error
	stop     chan struct{}
	wg       sync.WaitGroup
}

func startLoad(k *Kernel, root *Actor) *loadRun {
	l := &loadRun{acks: map[uint64]string{}, stop: make(chan struct{})}
	for i := 0; i < 4; i++ {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for j := 0; j < 100000; j++ {
				select {
				case <-l.stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				rc, err := k.Submit(ctx, root, ActionRequest{Type: event.Mutate, Target: "workspace/load"})
				cancel()
				l.mu.Lock()
				if err != nil {
					l.failures = append(l.failures, err)
				} else {
					l.acks[rc.Index] = rc.LeafHash
				}
				l.mu.Unlock()
				if err != nil {
					time.Sleep(50 * time.Millisecond)
				}
			}
		}()
	}
	return l
}

func (l *loadRun) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.acks)
}

// waitMore waits until n more receipts than before came in.
func (l *loadRun) waitMore(t *testing.T, k *Kernel, before, n int, within time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(within); l.count() < before+n; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no writes for %v (%d receipts before); kernel: %v", within, before, k.Ready())
		}
	}
}

// finish stops the load and checks every receipt against the log and the
// state against a replay.
func (l *loadRun) finish(t *testing.T, k *Kernel) {
	t.Helper()
	close(l.stop)
	l.wg.Wait()
	ctx := context.Background()
	for index, leaf := range l.acks {
		entry, err := k.Entry(ctx, index)
		if err != nil {
			t.Fatalf("acknowledged entry %d: %v", index, err)
		}
		h := event.LeafHash(entry)
		if hex.EncodeToString(h[:]) != leaf {
			t.Fatalf("acknowledged entry %d is not in the log", index)
		}
	}
	if diff, err := k.stateMatchesReplay(ctx); err != nil || len(diff) > 0 {
		t.Fatalf("state differs from a replay: %v %v", diff, err)
	}
	for _, f := range l.failures[:min(2, len(l.failures))] {
		t.Logf("a failed request: %v", f)
	}
	t.Logf("%d receipts, %d failures", len(l.acks), len(l.failures))
}

// openLeased opens a kernel on a with a lease it keeps renewing.
func openLeased(t *testing.T, a servicestest.AWS, holder string) *Kernel {
	t.Helper()
	k, _ := openLeasedWith(t, a, holder, 5*time.Second, nil, true)
	return k
}

// The database restarts under load: requests meanwhile fail with an error
// that says so, no acknowledged entry is lost, and the kernel takes writes
// again by itself once the database is back.
// databaseRestartTTL is the lease of TestAWSStorage_DatabaseRestartUnderLoad.
const databaseRestartTTL = 20 * time.Second

func TestAWSStorage_DatabaseRestartUnderLoad(t *testing.T) {
	db := servicestest.StartMariaDB(t)
	a := servicestest.NewAWSOn(t, db.ServerDSN)
	// The database is away for 2 s plus its restart, which takes seconds
	// more on a loaded machine: the lease outlasts that by far, so that a
	// restart is what is tested, not a lease expiring (lease_test.go).
	k, _ := openLeasedWith(t, a, "kernel-a", databaseRestartTTL, nil, true)
	l := startLoad(k, rootOf(t, k))
	time.Sleep(time.Second)
	db.Stop(t)
	time.Sleep(2 * time.Second)
	before := l.count()
	db.Start(t)
	l.waitMore(t, k, before, 20, 60*time.Second)
	if len(l.failures) == 0 {
		t.Error("no request failed while the database was down")
	}
	l.finish(t, k)
}

// The object store is away for 10 s under load: batches are still
// sequenced durably in the database (receipts keep coming until Tessera
// pushes back), the tree catches up once the store is back, and every
// receipt is in the log.
func TestAWSStorage_ObjectStoreAwayUnderLoad(t *testing.T) {
	store := servicestest.StartS3(t)
	a := servicestest.NewAWSAt(t, "", store.Endpoint)
	k := openLeased(t, a, "kernel-a")
	l := startLoad(k, rootOf(t, k))
	time.Sleep(time.Second)
	store.Stop(t)
	time.Sleep(10 * time.Second)
	before := l.count()
	store.Start(t)
	l.waitMore(t, k, before, 20, 60*time.Second)
	l.finish(t, k)
}

// A standby follows the log while it waits: its state cache folds what the
// active kernel logs, reading the bucket and the database only.
func TestAWSStorage_FollowKeepsAStandbyWarm(t *testing.T) {
	a, dirA, k, last := awsWriterWith(t, 30)
	defer k.Close()
	dirB := copyKeys(t, dirA)
	cfgB := awsConfig(t, dirB, a)
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Follow(ctx, cfgB, 100*time.Millisecond) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		time.Sleep(300 * time.Millisecond)
		stop()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		cache, err := history.OpenStateCache(filepath.Join(dirB, logstore.StateFileName), k.Origin())
		if err != nil {
			t.Fatal(err)
		}
		size := cache.Ledger.Size
		cache.Store.Close()
		if size > last.Index {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the follower folded %d of %d events", size, last.Index+1)
		}
		ctx, stop = context.WithCancel(context.Background())
		go func() { done <- Follow(ctx, cfgB, 100*time.Millisecond) }()
	}
	stop()
}

// awsWriterWith opens a kernel on a fresh log on shared storage and has
// root log n actions; it returns the storage, the kernel's data folder,
// the kernel and the receipt of the last action.
func awsWriterWith(t *testing.T, n int) (servicestest.AWS, string, *Kernel, *Receipt) {
	t.Helper()
	a := servicestest.NewAWS(t)
	dirA := t.TempDir()
	k, err := Open(awsConfig(t, dirA, a))
	if err != nil {
		t.Fatal(err)
	}
	root := rootOf(t, k)
	var last *Receipt
	for range n {
		if last, err = k.Submit(context.Background(), root, ActionRequest{Type: event.Mutate, Target: "workspace/x"}); err != nil {
			k.Close()
			t.Fatal(err)
		}
	}
	return a, dirA, k, last
}
