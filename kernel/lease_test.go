package kernel

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/annal-dev/annal/internal/servicestest"
	"github.com/annal-dev/annal/kernel/event"
	"github.com/annal-dev/annal/kernel/internal/logstore"
	"github.com/go-sql-driver/mysql"
)

// The write lease on shared storage (logstore/lease.go), against the real
// MariaDB and S3 server: the lease does not depend on the object store, an
// expired lease is taken and never renewed, and a refusal that wrote
// nothing is answered as one.

// leaseChildEnv carries a leaseChild to the test binary run as a child
// process (TestLeaseChildKernel), so that a test can freeze it (SIGSTOP)
// or kill it (SIGKILL) the way an operating system does.
const leaseChildEnv = "ANNAL_TEST_LEASE_CHILD"

type leaseChild struct {
	AWS    servicestest.AWS
	Dir    string
	Holder string
	TTL    time.Duration
}

// TestLeaseChildKernel is the child: a leased kernel under load from 8
// goroutines, printing READY once open, ACK <index> <leaf hash> for each
// receipt, and LOST (then exiting 3) once its lease is lost.
func TestLeaseChildKernel(t *testing.T) {
	raw := os.Getenv(leaseChildEnv)
	if raw == "" {
		t.Skip("runs only as the child process of a lease test")
	}
	var c leaseChild
	if err := json.Unmarshal([]byte(raw), &c); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	lease, err := logstore.OpenLease(ctx, &logstore.AWSStorage{DSN: c.AWS.DSN}, c.Holder, c.TTL, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := lease.Acquire(ctx, nil); err != nil {
		t.Fatal(err)
	}
	var out sync.Mutex
	say := func(format string, args ...any) {
		out.Lock()
		fmt.Printf(format+"\n", args...)
		out.Unlock()
	}
	go lease.Keep(ctx, func(err error) {
		say("LOST %v", err)
		os.Exit(3)
	})
	cfg := awsConfig(t, c.Dir, c.AWS)
	cfg.Storage.AWS.Lease = lease
	k, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	root := rootOf(t, k)
	say("READY")
	for i := 0; i < 8; i++ {
		go func() {
			for {
				sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				rc, err := k.Submit(sctx, root, ActionRequest{Type: event.Mutate, Target: "workspace/child"})
				cancel()
				if err != nil {
					time.Sleep(20 * time.Millisecond)
					continue
				}
				say("ACK %d %s", rc.Index, rc.LeafHash)
			}
		}()
	}
	select {}
}

// childKernel is a running TestLeaseChildKernel, and what it printed.
type childKernel struct {
	cmd    *exec.Cmd
	ready  chan struct{}
	exited chan struct{}

	mu   sync.Mutex
	acks []childAck
	lost string
}

type childAck struct {
	index uint64
	leaf  string
	at    time.Time
}

func startChildKernel(t *testing.T, c leaseChild) *childKernel {
	t.Helper()
	raw, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestLeaseChildKernel$", "-test.count=1")
	cmd.Env = append(os.Environ(), leaseChildEnv+"="+string(raw))
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ck := &childKernel{cmd: cmd, ready: make(chan struct{}), exited: make(chan struct{})}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGCONT)
		cmd.Process.Kill()
		<-ck.exited
	})
	go ck.read(stdout)
	select {
	case <-ck.ready:
	case <-ck.exited:
		t.Fatal("the child kernel exited before it was ready")
	case <-time.After(60 * time.Second):
		t.Fatal("the child kernel is not ready after 60 s")
	}
	return ck
}

func (ck *childKernel) read(stdout interface{ Read([]byte) (int, error) }) {
	defer close(ck.exited)
	defer ck.cmd.Wait()
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		line := sc.Text()
		switch f := strings.Fields(line); {
		case line == "READY":
			close(ck.ready)
		case len(f) == 3 && f[0] == "ACK":
			index, _ := strconv.ParseUint(f[1], 10, 64)
			ck.mu.Lock()
			ck.acks = append(ck.acks, childAck{index: index, leaf: f[2], at: time.Now()})
			ck.mu.Unlock()
		case strings.HasPrefix(line, "LOST "):
			ck.mu.Lock()
			ck.lost = line
			ck.mu.Unlock()
		}
	}
}

func (ck *childKernel) count() int {
	ck.mu.Lock()
	defer ck.mu.Unlock()
	return len(ck.acks)
}

func (ck *childKernel) waitAcks(t *testing.T, n int) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); ck.count() < n; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the child kernel acknowledged %d of %d writes in 60 s", ck.count(), n)
		}
	}
}

// checkAcksInLog checks that every receipt the child gave is its entry in
// the log k serves, below first (the first index another kernel wrote).
func (ck *childKernel) checkAcksInLog(t *testing.T, k *Kernel, first uint64) {
	t.Helper()
	ck.mu.Lock()
	defer ck.mu.Unlock()
	for _, a := range ck.acks {
		if a.index >= first {
			t.Fatalf("the old kernel acknowledged entry %d, at or after the new kernel's first entry %d", a.index, first)
		}
		entry, err := k.Entry(context.Background(), a.index)
		if err != nil {
			t.Fatalf("acknowledged entry %d: %v", a.index, err)
		}
		if h := event.LeafHash(entry); hex.EncodeToString(h[:]) != a.leaf {
			t.Fatalf("entry %d, acknowledged by the old kernel, is another entry", a.index)
		}
	}
}

// acquireInBackground starts l.Acquire, and l.Keep once it succeeded; the
// channel says when.
func acquireInBackground(t *testing.T, l *logstore.Lease) <-chan time.Time {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	acquired := make(chan time.Time, 1)
	go func() {
		if err := l.Acquire(ctx, nil); err == nil {
			acquired <- time.Now()
			l.Keep(ctx, func(err error) { t.Errorf("the new holder lost the lease: %v", err) })
		}
	}()
	return acquired
}

// openTakenOver opens the kernel of a standby that holds lease, on a copy
// of dir's identity, and returns it with its first entry's index.
func openTakenOver(t *testing.T, a servicestest.AWS, dir string, lease *logstore.Lease) (*Kernel, uint64) {
	t.Helper()
	cfg := awsConfig(t, dir, a)
	cfg.Storage.AWS.Lease = lease
	k, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { k.Close() })
	rc, err := k.Submit(context.Background(), rootOf(t, k), ActionRequest{Type: event.Mutate, Target: "workspace/new"})
	if err != nil {
		t.Fatal(err)
	}
	return k, rc.Index
}

// Seed 002's single sequencer, on shared storage: a kernel frozen
// (SIGSTOP) under load for 5 s with a 2 s lease is woken up, frozen either
// between two database transactions or inside one that has sequenced a
// batch and not yet committed it (its fence check passed, the lease row
// share-locked). The standby takes the lease once it expired, before the
// old kernel wakes — in the second case by ending the frozen transaction
// (rolled back: nothing of it was acknowledged), which its takeover would
// otherwise wait for; the old kernel never renews the lease (it exits,
// "lost the write lease"), never writes after the standby's first entry,
// and every receipt it gave is in the log. A standby whose database user
// may not see other transactions (no PROCESS privilege) cannot end the
// frozen one: it takes the lease only once the old kernel woke and
// committed the batch it had sequenced under the lease, which is in the
// log below the standby's first entry.
func TestSpec002_ExpiredLeaseIsTakenNeverRenewed(t *testing.T) {
	t.Run("between transactions", func(t *testing.T) { frozenPastTheLease(t, false, true) })
	t.Run("inside a transaction", func(t *testing.T) { frozenPastTheLease(t, true, true) })
	t.Run("inside a transaction, a standby without PROCESS", func(t *testing.T) { frozenPastTheLease(t, true, false) })
}

func frozenPastTheLease(t *testing.T, insideTx, process bool) {
	a := servicestest.NewAWS(t)
	dirA := t.TempDir()
	ttl := 2 * time.Second
	child := startChildKernel(t, leaseChild{AWS: a, Dir: dirA, Holder: "kernel-a", TTL: ttl})
	child.waitAcks(t, 300)
	dirB := copyKeys(t, dirA)
	var logB lines
	leaseDSN := a.DSN
	if !process {
		leaseDSN = userWithoutProcess(t, a)
	}
	leaseB, err := logstore.OpenLease(context.Background(), &logstore.AWSStorage{DSN: leaseDSN}, "kernel-b", ttl, slog.New(slog.NewTextHandler(&logB, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { leaseB.Close() })

	if insideTx {
		child.freezeInsideTx(t, a.DSN)
	} else {
		child.cmd.Process.Signal(syscall.SIGSTOP)
	}
	frozen := time.Now()
	acquired := acquireInBackground(t, leaseB)
	time.Sleep(5 * time.Second)
	child.cmd.Process.Signal(syscall.SIGCONT)
	woke := time.Now()
	ackedBeforeWake := child.count()

	var tookOver time.Time
	select {
	case tookOver = <-acquired:
	case <-time.After(30 * time.Second):
		t.Fatal("the standby did not take the expired lease in 30 s after the old kernel woke")
	}
	select {
	case <-child.exited:
	case <-time.After(10 * time.Second):
		t.Fatalf("the old kernel still runs 10 s after it woke with an expired lease (%d receipts since)", child.count()-ackedBeforeWake)
	}
	child.mu.Lock()
	lost := child.lost
	child.mu.Unlock()
	if !strings.Contains(lost, logstore.ErrLeaseLost.Error()) {
		t.Fatalf("the old kernel exited without losing its lease: %q", lost)
	}
	// A plain SIGSTOP under load may land inside a transaction too.
	ended := logB.count("ended a transaction left idle")
	switch {
	case process && !tookOver.Before(woke):
		t.Fatalf("the standby took the lease %v after the freeze, only once the old kernel woke", tookOver.Sub(frozen))
	case process && insideTx && ended == 0:
		t.Fatal("the standby took the lease from a kernel frozen inside a transaction without ending it")
	case !process && tookOver.Before(woke):
		t.Fatalf("a standby that cannot end the frozen transaction took the lease %v after the freeze, while a batch sequenced under it was uncommitted", tookOver.Sub(frozen))
	case !process && logB.count("cannot see the database's idle transactions") != 1:
		t.Fatalf("a standby without PROCESS does not say once why it waits: %s", logB.buf.String())
	}
	kb, first := openTakenOver(t, a, dirB, leaseB)
	child.checkAcksInLog(t, kb, first)
	if diff, err := kb.stateMatchesReplay(context.Background()); err != nil || len(diff) > 0 {
		t.Fatalf("the new kernel's state differs from a replay: %v %v", diff, err)
	}
	t.Logf("lease taken %v after the freeze (woken after %v), %d frozen transactions ended; %d receipts before the wake, %d answered after it; the old kernel: %s",
		tookOver.Sub(frozen).Round(time.Millisecond), woke.Sub(frozen).Round(time.Millisecond), ended, ackedBeforeWake, child.count()-ackedBeforeWake, lost)
}

// userWithoutProcess creates a database user who may do anything with a's
// database and nothing else (no PROCESS privilege), and returns a's DSN as
// that user.
func userWithoutProcess(t *testing.T, a servicestest.AWS) string {
	t.Helper()
	db, err := sql.Open("mysql", a.ServerDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	user := a.Database + "u"
	for _, q := range []string{
		fmt.Sprintf("CREATE USER '%s'@'127.0.0.1' IDENTIFIED BY 'annal-test'", user),
		fmt.Sprintf("GRANT ALL ON %s.* TO '%s'@'127.0.0.1'", a.Database, user),
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	t.Cleanup(func() {
		if db, err := sql.Open("mysql", a.ServerDSN); err == nil {
			db.Exec(fmt.Sprintf("DROP USER IF EXISTS '%s'@'127.0.0.1'", user))
			db.Close()
		}
	})
	c, err := mysql.ParseDSN(a.DSN)
	if err != nil {
		t.Fatal(err)
	}
	c.User, c.Passwd = user, "annal-test"
	return c.FormatDSN()
}

// freezeInsideTx freezes the child (SIGSTOP) inside a sequencing
// transaction: the Seq rows held as Tessera's integration holds them while
// it writes tiles, the child's next sequencing transaction waits in its
// insert; frozen there, the insert is let through: its fence check runs
// and its transaction stays open.
func (ck *childKernel) freezeInsideTx(t *testing.T, dsn string) {
	t.Helper()
	release := holdSeq(t, dsn)
	time.Sleep(300 * time.Millisecond)
	ck.cmd.Process.Signal(syscall.SIGSTOP)
	release()
}

// holdSeq locks Tessera's Seq rows and the gap above them, as its
// integration does (SELECT … FOR UPDATE) while it writes to the object
// store, until release.
func holdSeq(t *testing.T, dsn string) (release func()) {
	t.Helper()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	rows, err := tx.Query("SELECT seq FROM Seq WHERE id = 0 AND seq >= 0 FOR UPDATE")
	if err != nil {
		t.Fatal(err)
	}
	rows.Close()
	return func() {
		tx.Rollback()
		db.Close()
	}
}

// lines is a concurrency-safe log sink (a slog handler's writer).
type lines struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *lines) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Count(l.buf.String(), s)
}

// An object-store outage of 10 s under load, with a 2 s lease: Tessera's
// integration holds the Seq rows it integrates locked while it fails to
// write the tiles, and the sequencing transactions wait on them; the
// holder's renewals do not (the fence checks the lease after the insert,
// logstore/lease.go). The lease never expires: no "could not renew"
// warning, its expiry stays ahead all along; writes resume after.
func TestAWSStorage_ObjectStoreOutageKeepsTheLease(t *testing.T) {
	store := servicestest.StartS3(t)
	a := servicestest.NewAWSAt(t, "", store.Endpoint)
	var warnings lines
	ttl := 2 * time.Second
	k, lease := openLeasedWith(t, a, "kernel-a", ttl, slog.New(slog.NewTextHandler(&warnings, nil)), true)
	ctx := context.Background()
	l := startLoad(k, rootOf(t, k))
	l.waitMore(t, k, 0, 200, 30*time.Second)
	store.Stop(t)
	least := ttl
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		sctx, cancel := context.WithTimeout(ctx, time.Second)
		s, err := lease.State(sctx)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if s.Holder != "kernel-a" || s.ExpiresIn <= 0 {
			t.Fatalf("during the outage the lease is %+v", s)
		}
		least = min(least, s.ExpiresIn)
	}
	before := l.count()
	store.Start(t)
	l.waitMore(t, k, before, 200, 60*time.Second)
	l.finish(t, k)
	if n := warnings.count("could not renew"); n > 0 {
		t.Fatalf("%d renewals failed during the outage", n)
	}
	t.Logf("least time left on the 2 s lease during the outage: %v; %d receipts before it ended", least.Round(time.Millisecond), before)
}

// Refusals that wrote nothing are answered as such — ErrUnavailable,
// retryable, not ErrOutcomeUnknown — whether the database was unreachable
// before the sequencing transaction began (Tessera's "failed to read
// integration coordination info") or the fence rolled it back (another
// kernel holds the lease). The kernel takes writes again by itself once
// the cause is gone.
func TestAWSStorage_DefiniteRefusalsAreNotOutcomeUnknown(t *testing.T) {
	a := servicestest.NewAWS(t)
	ctx := context.Background()
	// A lease long enough for the test, not renewed: taking it away below
	// is not noticed by a renewal first.
	k, _ := openLeasedWith(t, a, "kernel-a", time.Minute, nil, false)
	root := rootOf(t, k)
	if _, err := k.Submit(ctx, root, ActionRequest{Type: event.Mutate, Target: "workspace/x"}); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("mysql", a.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	mustExec := func(q string) {
		t.Helper()
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	refused := func(what, says string) {
		t.Helper()
		_, err := k.Submit(ctx, root, ActionRequest{Type: event.Mutate, Target: "workspace/x"})
		switch {
		case err == nil:
			t.Fatalf("%s: the write was taken", what)
		case errors.Is(err, ErrOutcomeUnknown):
			t.Fatalf("%s: answered outcome unknown: %v", what, err)
		case !errors.Is(err, ErrUnavailable) || !errors.Is(err, ErrRetryable):
			t.Fatalf("%s: not a retryable refusal: %v", what, err)
		case !strings.Contains(err.Error(), says):
			t.Fatalf("%s: the refusal does not say %q: %v", what, says, err)
		}
	}
	resumes := func(what string) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			if _, err := k.Submit(ctx, root, ActionRequest{Type: event.Mutate, Target: "workspace/x"}); err == nil {
				return
			} else if time.Now().After(deadline) {
				t.Fatalf("after %s, writes do not resume: %v", what, err)
			}
		}
	}

	mustExec("RENAME TABLE IntCoord TO IntCoordAway")
	refused("the coordination table unreadable", "failed to read integration coordination info")
	mustExec("RENAME TABLE IntCoordAway TO IntCoord")
	resumes("the coordination table is back")

	mustExec("UPDATE AnnalLease SET holder = 'kernel-b' WHERE id = 0")
	refused("another kernel holds the lease", "fence refused")
	mustExec("UPDATE AnnalLease SET holder = 'kernel-a' WHERE id = 0")
	resumes("the lease is back")
	if diff, err := k.stateMatchesReplay(ctx); err != nil || len(diff) > 0 {
		t.Fatalf("state differs from a replay: %v %v", diff, err)
	}
}

// A database fenced by an older release (a BEFORE INSERT trigger that
// checked the expiry at the statement's start) gets the current fence when
// a kernel opens it, in place.
func TestAWSStorage_OlderFenceIsReplaced(t *testing.T) {
	a := servicestest.NewAWS(t)
	k := openLeased(t, a, "kernel-a")
	db, err := sql.Open("mysql", a.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	older := `CREATE OR REPLACE TRIGGER AnnalFence BEFORE INSERT ON Seq FOR EACH ROW
BEGIN
	DECLARE holding INT DEFAULT 0;
	SELECT COUNT(*) INTO holding FROM AnnalLease
		WHERE id = 0 AND holder = @annal_holder AND expires_at > NOW(6) LOCK IN SHARE MODE;
	IF holding = 0 THEN
		SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'annal: this kernel does not hold the write lease';
	END IF;
END`
	if _, err := db.Exec(older); err != nil {
		t.Fatal(err)
	}
	// What a kernel does as it opens the log (logstore.Open).
	lease, err := logstore.OpenLease(context.Background(), &logstore.AWSStorage{DSN: a.DSN}, "kernel-a", 5*time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Close()
	if err := lease.Fence(context.Background()); err != nil {
		t.Fatal(err)
	}
	var timing, body string
	if err := db.QueryRow(`SELECT ACTION_TIMING, ACTION_STATEMENT FROM information_schema.TRIGGERS
		WHERE TRIGGER_SCHEMA = DATABASE() AND TRIGGER_NAME = 'AnnalFence'`).Scan(&timing, &body); err != nil {
		t.Fatal(err)
	}
	if timing != "AFTER" || !strings.Contains(body, "SYSDATE(6)") || !strings.Contains(body, "annal-fence-2") {
		t.Fatalf("the fence after reopening: %s %s", timing, body)
	}
	if _, err := k.Submit(context.Background(), rootOf(t, k), ActionRequest{Type: event.Mutate, Target: "workspace/x"}); err != nil {
		t.Fatal(err)
	}
}

// The takeover under load, timed in parts: the active kernel (a child
// process, 8 clients) is killed (SIGKILL), or frozen (SIGSTOP) inside a
// sequencing transaction and never woken, while a warm standby follows
// the log. The parts: the wait for the lease (its expiry; for the frozen
// kernel, the database dropping its silent connection), the wait until
// the tree holds everything the old kernel sequenced (Tessera's
// integration, which the new kernel's driver runs), and the rest of the
// open (the fold of what the standby had not followed). Every receipt the
// old kernel gave is in the log the new one serves.
func TestAWSStorage_TakeoverUnderLoadInParts(t *testing.T) {
	ttl := 2 * time.Second
	if v := os.Getenv("ANNAL_TEST_TAKEOVER_TTL"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatal(err)
		}
		ttl = d
	}
	t.Run("killed", func(t *testing.T) { takeoverInParts(t, ttl, false) })
	t.Run("frozen inside a transaction", func(t *testing.T) { takeoverInParts(t, ttl, true) })
}

func takeoverInParts(t *testing.T, ttl time.Duration, frozen bool) {
	a := servicestest.NewAWS(t)
	dirA := t.TempDir()
	child := startChildKernel(t, leaseChild{AWS: a, Dir: dirA, Holder: "kernel-a", TTL: ttl})
	dirB := copyKeys(t, dirA)
	cfgB := awsConfig(t, dirB, a)
	followCtx, stopFollowing := context.WithCancel(context.Background())
	followed := make(chan error, 1)
	go func() { followed <- Follow(followCtx, cfgB, time.Second) }()
	leaseB, err := logstore.OpenLease(context.Background(), &logstore.AWSStorage{DSN: a.DSN}, "kernel-b", ttl, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { leaseB.Close() })
	child.waitAcks(t, 2000)

	if frozen {
		child.freezeInsideTx(t, a.DSN)
	} else {
		child.cmd.Process.Kill()
	}
	stopped := time.Now()
	acquired := acquireInBackground(t, leaseB)
	var leased time.Time
	select {
	case leased = <-acquired:
	case <-time.After(60 * time.Second):
		t.Fatal("the standby did not take the lease in 60 s")
	}
	stopFollowing()
	if err := <-followed; err != nil {
		t.Fatalf("follow: %v", err)
	}
	integrated := make(chan time.Time, 1)
	go awaitIntegrated(t, a.DSN, integrated)
	cfgB.Storage.AWS.Lease = leaseB
	kb, err := Open(cfgB)
	if err != nil {
		t.Fatal(err)
	}
	serving := time.Now()
	t.Cleanup(func() { kb.Close() })
	var tree time.Time
	select {
	case tree = <-integrated:
	case <-time.After(30 * time.Second):
		t.Fatal("the tree did not catch up with the sequenced entries in 30 s")
	}
	child.cmd.Process.Kill()
	<-child.exited
	rc, err := kb.Submit(context.Background(), rootOf(t, kb), ActionRequest{Type: event.Mutate, Target: "workspace/new"})
	if err != nil {
		t.Fatal(err)
	}
	child.checkAcksInLog(t, kb, rc.Index)
	if serving.Sub(stopped) > ttl+max(3*ttl, 10*time.Second)+10*time.Second {
		t.Errorf("the standby serves %v after the old kernel stopped", serving.Sub(stopped))
	}
	if tree.Before(leased) {
		tree = leased // integrated before the lease was taken
	}
	t.Logf("lease %v: serving %v after the old kernel stopped = lease wait %v + integration %v + rest of the open %v; %d receipts of the old kernel, all in the log",
		ttl, serving.Sub(stopped).Round(time.Millisecond), leased.Sub(stopped).Round(time.Millisecond),
		tree.Sub(leased).Round(time.Millisecond), serving.Sub(tree).Round(time.Millisecond), child.count())
}

// awaitIntegrated sends the time once Tessera's tree holds every entry
// sequenced in the database.
func awaitIntegrated(t *testing.T, dsn string, at chan<- time.Time) {
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Error(err)
		return
	}
	defer db.Close()
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		var integrated, next uint64
		if err := db.QueryRow("SELECT (SELECT seq FROM IntCoord WHERE id = 0), (SELECT next FROM SeqCoord WHERE id = 0)").Scan(&integrated, &next); err == nil && integrated >= next {
			at <- time.Now()
			return
		}
	}
}

// openLeasedWith opens a kernel on a holding a lease of ttl as holder, its
// warnings to logger (nil: none), renewed if keep.
func openLeasedWith(t *testing.T, a servicestest.AWS, holder string, ttl time.Duration, logger *slog.Logger, keep bool) (*Kernel, *logstore.Lease) {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	lease, err := logstore.OpenLease(ctx, &logstore.AWSStorage{DSN: a.DSN}, holder, ttl, logger)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lease.Close() })
	if err := lease.Acquire(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if keep {
		go lease.Keep(ctx, func(err error) { t.Errorf("lease lost: %v", err) })
	}
	cfg := awsConfig(t, t.TempDir(), a)
	cfg.Storage.AWS.Lease = lease
	k, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { k.Close() })
	return k, lease
}

// A lease that expired is not renewed, even when no other kernel took it:
// its holder learns it lost it (its batches were refused meanwhile), and
// takes it again only the way a standby does.
func TestAWSStorage_ExpiredLeaseIsNotRenewedEvenUntaken(t *testing.T) {
	a := servicestest.NewAWS(t)
	ctx := context.Background()
	lease, err := logstore.OpenLease(ctx, &logstore.AWSStorage{DSN: a.DSN}, "kernel-a", time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Close()
	if err := lease.Acquire(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if err := lease.Renew(ctx); err != nil {
		t.Fatalf("renewing a live lease: %v", err)
	}
	time.Sleep(1200 * time.Millisecond)
	if err := lease.Renew(ctx); !errors.Is(err, logstore.ErrLeaseLost) || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("renewing an expired lease: %v", err)
	}
	if s, err := lease.State(ctx); err != nil || s.ExpiresIn > 0 {
		t.Fatalf("after the refused renewal the lease is %+v (%v)", s, err)
	}
	if err := lease.Acquire(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if err := lease.Renew(ctx); err != nil {
		t.Fatalf("renewing the lease taken again: %v", err)
	}
}
