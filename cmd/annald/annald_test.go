package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/annal-dev/annal/api"
	"github.com/annal-dev/annal/checkpoints"
	"github.com/annal-dev/annal/client"
	"github.com/annal-dev/annal/verifier"
	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/rfc6962"
	"golang.org/x/mod/sumdb/note"
)

// annaldBinary and witnessBinary are built once by TestMain so that tests
// run them as a user does: separate processes that can be killed.
var annaldBinary, witnessBinary, annalBinary, verifyBinary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "annald-test-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	annaldBinary = filepath.Join(dir, "annald")
	witnessBinary = filepath.Join(dir, "annal-witness")
	annalBinary, verifyBinary = filepath.Join(dir, "annal"), filepath.Join(dir, "annal-verify")
	for bin, pkg := range map[string]string{annaldBinary: ".", witnessBinary: "../annal-witness", annalBinary: "../annal", verifyBinary: "../annal-verify"} {
		args := []string{"build", "-o", bin, pkg}
		// annald itself runs with the race detector when the tests do; the
		// tools that drive it (annal, annal-verify, annal-witness) need not,
		// and a race build of each costs a minute of CI.
		if raceEnabled && pkg == "." {
			args = []string{"build", "-race", "-o", bin, pkg}
		}
		if out, err := exec.Command("go", args...).CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "building %s: %v\n%s", pkg, err, out)
			os.Exit(1)
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// daemon is one running annald process and what it printed on start.
type daemon struct {
	cmd            *exec.Cmd
	url            string
	origin         string
	vkey           string
	storage        string
	credentialPath string
	stderr         *syncBuffer
	exited         chan error
	// standby: it started as a standby (another kernel holds the write
	// lease); stdout holds what it printed after it was ready.
	standby bool
	stdout  *syncBuffer
}

// syncBuffer collects a process's stderr for failure messages.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startDaemon runs annald serve on dataDir and a free port and waits until
// it prints its start-up lines.
func startDaemon(t *testing.T, dataDir string, args ...string) *daemon {
	t.Helper()
	d, err := tryStartDaemon(dataDir, args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.stop(t) })
	return d
}

func tryStartDaemon(dataDir string, args ...string) (*daemon, error) {
	args = append([]string{"serve", "--data", dataDir, "--listen", "127.0.0.1:0", "--checkpoint-interval", "100ms"}, args...)
	cmd := exec.Command(annaldBinary, args...)
	d := &daemon{cmd: cmd, stderr: &syncBuffer{}, stdout: &syncBuffer{}, exited: make(chan error, 1)}
	cmd.Stderr = d.stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		d.exited <- cmd.Wait()
	}()
	timeout := time.After(30 * time.Second)
	for d.credentialPath == "" && !d.standby {
		select {
		case line, ok := <-lines:
			if !ok {
				return nil, fmt.Errorf("annald exited before it was ready: %v\nstderr:\n%s", <-d.exited, d.stderr)
			}
			if rest, ok := strings.CutPrefix(line, "annald: standby as "); ok {
				d.standby = true
				if _, after, ok := strings.Cut(rest, "serving at "); ok {
					d.url, _, _ = strings.Cut(after, " ")
				}
			} else if v, ok := strings.CutPrefix(line, "annald: log "); ok {
				d.origin = v
			} else if v, ok := strings.CutPrefix(line, "annald: verifier key "); ok {
				d.vkey = v
			} else if v, ok := strings.CutPrefix(line, "annald: storage "); ok {
				d.storage = v
			} else if v, ok := strings.CutPrefix(line, "annald: listening on "); ok {
				d.url = v
			} else if v, ok := strings.CutPrefix(line, "annald: root credential in "); ok {
				d.credentialPath = v
			}
		case <-timeout:
			cmd.Process.Kill()
			return nil, fmt.Errorf("annald not ready after 30s; stderr:\n%s", d.stderr)
		}
	}
	go func() {
		for line := range lines { // keep draining so annald never blocks on stdout
			d.stdout.Write([]byte(line + "\n"))
		}
	}()
	return d, nil
}

// waitActive waits until a standby took the write lease and serves, and
// returns how long that took.
func (d *daemon) waitActive(t *testing.T, timeout time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for time.Since(start) < timeout {
		out := d.stdout.String()
		if i := strings.Index(out, "annald: root credential in "); i >= 0 {
			for _, line := range strings.Split(out, "\n") {
				if v, ok := strings.CutPrefix(line, "annald: listening on "); ok {
					d.url = v
				} else if v, ok := strings.CutPrefix(line, "annald: verifier key "); ok {
					d.vkey = v
				} else if v, ok := strings.CutPrefix(line, "annald: root credential in "); ok {
					d.credentialPath = v
				}
			}
			return time.Since(start)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("the standby did not take over in %v; stdout:\n%s\nstderr:\n%s", timeout, d.stdout, d.stderr)
	return 0
}

// stop ends the process with SIGTERM (a clean shutdown) if it still runs.
func (d *daemon) stop(t *testing.T) {
	select {
	case err := <-d.exited: // it already ended by itself
		d.exited <- err
		return
	default:
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-d.exited:
		d.exited <- err
		if err != nil && !strings.Contains(err.Error(), "killed") {
			t.Errorf("annald exited with %v; stderr:\n%s", err, d.stderr)
		}
	case <-time.After(30 * time.Second):
		d.cmd.Process.Kill()
		t.Errorf("annald did not stop on SIGTERM; stderr:\n%s", d.stderr)
	}
}

// kill ends the process with SIGKILL: no shutdown code runs.
func (d *daemon) kill(t *testing.T) {
	t.Helper()
	if err := d.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	err := <-d.exited
	d.exited <- err
}

func (d *daemon) client(t *testing.T, credential string) *client.Client {
	t.Helper()
	c, err := client.New(d.url, credential)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func (d *daemon) rootCredential(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(d.credentialPath)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func oid(s string) string {
	h := sha256.Sum256([]byte(s))
	return "sha256:" + hex.EncodeToString(h[:])
}

func TestEndToEnd(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dataDir := filepath.Join(t.TempDir(), "annal-data")
	const origin = "example.com/annal/e2e"
	d := startDaemon(t, dataDir, "--origin", origin)
	if d.origin != origin || !strings.HasPrefix(d.vkey, origin+"+") {
		t.Fatalf("annald printed origin %q and key %q, want origin %q", d.origin, d.vkey, origin)
	}
	for name, mode := range map[string]os.FileMode{"log.key": 0o600, "root.credential": 0o600} {
		fi, err := os.Stat(filepath.Join(dataDir, name))
		if err != nil || fi.Mode().Perm() != mode {
			t.Fatalf("%s: %v, mode %v, want %v", name, err, fi.Mode().Perm(), mode)
		}
	}

	root := d.client(t, d.rootCredential(t))
	info, err := root.Info(ctx)
	if err != nil || info.Origin != origin || info.VerifierKey != d.vkey {
		t.Fatalf("info %+v, %v", info, err)
	}
	writable := []api.Grant{{Pattern: "workspace/**", Actions: []string{"*"}}, {Pattern: "tools/*", Actions: []string{"execute"}}}
	agent, err := root.CreateAgent(ctx, api.AgentRequest{Name: "writer", Purpose: "end-to-end test", Energy: 1000, Grants: writable, Trust: ptr(0.8)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := root.IssueEnvelope(ctx, api.EnvelopeRequest{Holder: agent.ID, Budget: 500, Grants: writable}); err != nil {
		t.Fatal(err)
	}
	agentClient := d.client(t, agent.Credential)

	requests := []api.ActionRequest{
		{Type: "observe", Target: "workspace/readme.md"},
		{Type: "create", Target: "workspace/notes.md", Payload: json.RawMessage(`{"text": "first note", "tags": ["a", "b"]}`)},
		{Type: "mutate", Target: "workspace/notes.md", PayloadHash: oid("second version")},
		{Type: "execute", Target: "tools/build", Payload: json.RawMessage(fmt.Sprintf(
			`{"input_oid":%q,"output_oid":%q,"artifact_hash":%q,"exit_code":0,"output_bytes":2048}`,
			oid("in"), oid("out"), oid("bin")))},
	}
	var receipts []*api.Receipt
	for _, req := range requests {
		r, err := agentClient.Submit(ctx, req)
		if err != nil {
			t.Fatalf("%s %s: %v", req.Type, req.Target, err)
		}
		receipts = append(receipts, r)
	}
	// One more with ?wait=published: the receipt carries its own proof.
	waited, err := agentClient.SubmitAndWait(ctx, api.ActionRequest{Type: "create", Target: "workspace/done.md", Payload: json.RawMessage(`"done"`)})
	if err != nil {
		t.Fatal(err)
	}
	if waited.Proof == "" || waited.Checkpoint == "" {
		t.Fatalf("receipt with wait=published lacks a proof: %+v", waited)
	}
	receipts = append(receipts, waited)

	for i, r := range receipts {
		proof := []byte(r.Proof)
		if i < len(requests) {
			if proof, err = agentClient.WaitProof(ctx, r.Index); err != nil {
				t.Fatalf("proof for %d: %v", r.Index, err)
			}
		}
		entry, err := agentClient.Event(ctx, r.Index)
		if err != nil {
			t.Fatal(err)
		}
		res, err := verifier.VerifyProof(entry, proof, d.vkey)
		if err != nil {
			t.Fatalf("receipt %d (index %d): %v", i, r.Index, err)
		}
		if hex.EncodeToString(res.LeafHash[:]) != r.LeafHash || res.Event.ID != r.EventID ||
			res.Event.Actor != agent.ID || res.Event.Type != r.Type || res.Event.Target != r.Target {
			t.Fatalf("receipt %+v does not match verified event %+v (leaf %x)", r, res.Event, res.LeafHash)
		}
	}

	// A second annald on the same folder is refused, and says why.
	if other, err := tryStartDaemon(dataDir); err == nil {
		other.cmd.Process.Kill()
		t.Fatal("a second annald started on a data folder in use")
	} else if !strings.Contains(err.Error(), "in use by another annald") {
		t.Fatalf("second annald failed without saying why: %v", err)
	}

	// Restart: same origin, key and credentials; history kept and consistent.
	cpBefore, err := root.Checkpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	d.stop(t)
	d2 := startDaemon(t, dataDir)
	if d2.origin != origin || d2.vkey != d.vkey || d2.credentialPath != d.credentialPath {
		t.Fatalf("restart changed identity: %q %q %q", d2.origin, d2.vkey, d2.credentialPath)
	}
	again := d2.client(t, agent.Credential)
	r, err := again.Submit(ctx, api.ActionRequest{Type: "observe", Target: "workspace/notes.md"})
	if err != nil {
		t.Fatalf("agent credential after restart: %v", err)
	}
	if r.Index <= waited.Index {
		t.Fatalf("index after restart %d, want more than %d", r.Index, waited.Index)
	}
	if _, err := again.WaitProof(ctx, r.Index); err != nil {
		t.Fatal(err)
	}
	cpAfter, err := again.Checkpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	oldCP, err := checkpoints.OpenCheckpoint(cpBefore, mustVerifier(t, d.vkey))
	if err != nil {
		t.Fatal(err)
	}
	newCP, err := checkpoints.OpenCheckpoint(cpAfter, mustVerifier(t, d.vkey))
	if err != nil {
		t.Fatal(err)
	}
	hashes, err := again.Consistency(ctx, oldCP.Size, newCP.Size)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := verifier.VerifyConsistency(cpBefore, cpAfter, checkpoints.MarshalHashes(hashes), d.vkey); err != nil {
		t.Fatalf("history before and after restart: %v", err)
	}
}

func mustVerifier(t *testing.T, vkey string) note.Verifier {
	t.Helper()
	v, err := checkpoints.NewLogVerifier(vkey)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// receiptRecord is what a client kept of a receipt: the kernel's promise.
type receiptRecord struct {
	index    uint64
	leafHash string
	eventID  string
}

// TestDurability_SIGKILLUnderLoad kills annald while 16 clients submit, then
// restarts it and checks that every receipt handed out before the kill is in
// the log at its index with its leaf hash, and that the whole log hashes to
// the root of a checkpoint signed by the log key.
func TestDurability_SIGKILLUnderLoad(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dataDir := filepath.Join(t.TempDir(), "annal-data")
	d := startDaemon(t, dataDir)
	cred := d.rootCredential(t)

	const clients, maxPerClient = 16, 20000 // bounded: the kill ends it far sooner
	var (
		mu       sync.Mutex
		receipts []receiptRecord
		wg       sync.WaitGroup
	)
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			cl := d.client(t, cred)
			for i := 0; i < maxPerClient; i++ {
				r, err := cl.Submit(ctx, api.ActionRequest{
					Type: "create", Target: fmt.Sprintf("load/%d/%d", c, i), Payload: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i)),
				})
				if err != nil {
					return // the kill: connection refused or reset
				}
				mu.Lock()
				receipts = append(receipts, receiptRecord{r.Index, r.LeafHash, r.EventID})
				mu.Unlock()
			}
		}(c)
	}
	time.Sleep(1500 * time.Millisecond)
	d.kill(t)
	wg.Wait()
	if len(receipts) < 50 {
		t.Fatalf("only %d receipts before the kill; the test needs load to mean anything", len(receipts))
	}
	t.Logf("%d receipts handed out before SIGKILL", len(receipts))

	d2 := startDaemon(t, dataDir)
	cl := d2.client(t, cred)
	var maxIndex uint64
	for _, r := range receipts {
		maxIndex = max(maxIndex, r.index)
	}
	if _, err := cl.WaitProof(ctx, maxIndex); err != nil {
		t.Fatalf("no checkpoint covers the last receipt (index %d) after restart: %v", maxIndex, err)
	}
	signed, err := cl.Checkpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cp, err := checkpoints.OpenCheckpoint(signed, mustVerifier(t, d.vkey))
	if err != nil {
		t.Fatal(err)
	}

	// Read the whole log, recompute its root with an independent compact
	// range, and check every receipt against the entry at its index.
	leaves := make([][]byte, cp.Size)
	rf := (&compact.RangeFactory{Hash: rfc6962.DefaultHasher.HashChildren}).NewEmptyRange(0)
	eventAt := map[string]uint64{} // nothing is written twice, however the crash fell
	for i := uint64(0); i < cp.Size; i++ {
		entry, err := cl.Event(ctx, i)
		if err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
		leaves[i] = rfc6962.DefaultHasher.HashLeaf(entry)
		if err := rf.Append(leaves[i], nil); err != nil {
			t.Fatal(err)
		}
		if i > 0 {
			ev, err := verifier.ParseEvent(entry)
			if err != nil {
				t.Fatalf("entry %d: %v", i, err)
			}
			if j, dup := eventAt[ev.ID]; dup {
				t.Fatalf("event %s is in the log twice, at %d and %d", ev.ID, j, i)
			}
			eventAt[ev.ID] = i
		}
	}
	root, err := rf.GetRootHash(nil)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(root, cp.Hash[:]) {
		t.Fatalf("the log's %d entries hash to %x, the checkpoint says %x", cp.Size, root, cp.Hash)
	}
	seen := map[uint64]bool{}
	for _, r := range receipts {
		if seen[r.index] {
			t.Fatalf("two receipts name index %d", r.index)
		}
		seen[r.index] = true
		if hex.EncodeToString(leaves[r.index]) != r.leafHash {
			t.Fatalf("receipt for index %d has leaf hash %s, the log has %x", r.index, r.leafHash, leaves[r.index])
		}
	}
	// A few receipts end to end through the verifier package as well.
	for _, r := range []receiptRecord{receipts[0], receipts[len(receipts)/2], receipts[len(receipts)-1]} {
		proof, err := cl.Proof(ctx, r.index)
		if err != nil {
			t.Fatal(err)
		}
		entry, err := cl.Event(ctx, r.index)
		if err != nil {
			t.Fatal(err)
		}
		res, err := verifier.VerifyProof(entry, proof, d.vkey)
		if err != nil || res.Event.ID != r.eventID {
			t.Fatalf("receipt %+v: %v (event %+v)", r, err, res)
		}
	}
	// The restarted kernel takes new work after the recovered entries.
	r, err := cl.Submit(ctx, api.ActionRequest{Type: "observe", Target: "load/after"})
	if err != nil {
		t.Fatal(err)
	}
	if r.Index < cp.Size {
		t.Fatalf("new entry got index %d inside the recovered log of %d", r.Index, cp.Size)
	}
}

// TestCrash_RepeatedSIGKILLWithAgentsAndHolds kills annald three times
// while several agents act under envelopes with hold rules and root answers
// holds. After each kill, `annald rebuild` must find the state file equal to
// a replay of the log, and after each restart every receipt handed out is in
// the log at its index with its leaf hash.
func TestCrash_RepeatedSIGKILLWithAgentsAndHolds(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	dataDir := filepath.Join(t.TempDir(), "annal-data")
	d := startDaemon(t, dataDir)
	rootCred := d.rootCredential(t)
	root := d.client(t, rootCred)
	writable := []api.Grant{{Pattern: "workspace/**", Actions: []string{"create", "mutate"}}}
	var creds []string
	for range 4 {
		a, err := root.CreateAgent(ctx, api.AgentRequest{Name: "worker", Purpose: "crash test", Energy: 200_000, Grants: writable, Trust: ptr(0.8)})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := root.IssueEnvelope(ctx, api.EnvelopeRequest{Holder: a.ID, Budget: 200_000, Grants: writable,
			HoldOn: []api.Grant{{Pattern: "workspace/held/*", Actions: []string{"mutate"}}}}); err != nil {
			t.Fatal(err)
		}
		creds = append(creds, a.Credential)
	}
	var (
		mu       sync.Mutex
		receipts []receiptRecord
	)
	keep := func(r *api.Receipt) {
		mu.Lock()
		receipts = append(receipts, receiptRecord{r.Index, r.LeafHash, r.EventID})
		mu.Unlock()
	}
	for round := range 3 {
		var wg sync.WaitGroup
		stop := make(chan struct{})
		for i, cred := range creds {
			for w := range 2 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					cl := d.client(t, cred)
					for n := 0; n < 5000; n++ { // bounded; the kill ends it sooner
						target := fmt.Sprintf("workspace/r%d/a%d/w%d/%d", round, i, w, n)
						if n%10 == 0 {
							target = fmt.Sprintf("workspace/held/r%d-a%d-w%d-%d", round, i, w, n)
						}
						r, err := cl.Submit(ctx, api.ActionRequest{Type: "mutate", Target: target})
						if err != nil {
							return
						}
						keep(r)
					}
				}()
			}
		}
		wg.Add(1)
		go func() { // root answers holds as they come
			defer wg.Done()
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				holds, err := root.Holds(ctx, "pending")
				if err != nil {
					return
				}
				for j, h := range holds {
					decision := "approve"
					if (n+j)%2 == 1 {
						decision = "reject"
					}
					r, err := root.AnswerHold(ctx, h.ID, decision, "")
					if err == nil {
						keep(r)
					}
				}
				time.Sleep(20 * time.Millisecond)
			}
		}()
		time.Sleep(1200 * time.Millisecond)
		d.kill(t)
		close(stop)
		wg.Wait()

		out, err := exec.Command(annaldBinary, "rebuild", "--data", dataDir).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "equals the replay") {
			t.Fatalf("round %d: rebuild after SIGKILL: %v\n%s", round, err, out)
		}
		d = startDaemon(t, dataDir)
		root = d.client(t, rootCred)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(receipts) < 100 {
		t.Fatalf("only %d receipts; the test needs load to mean anything", len(receipts))
	}
	t.Logf("%d receipts over three kills", len(receipts))
	for _, r := range receipts {
		entry, err := root.Event(ctx, r.index)
		if err != nil {
			t.Fatalf("receipt at %d: %v", r.index, err)
		}
		if got := hex.EncodeToString(rfc6962.DefaultHasher.HashLeaf(entry)); got != r.leafHash {
			t.Fatalf("entry %d hashes to %s, its receipt says %s", r.index, got, r.leafHash)
		}
	}
}

func ptr[T any](v T) *T { return &v }

// TestWriteAheadFlagBothWays: a data folder served with --no-write-ahead,
// then with the write-ahead log and killed right after its receipts, then
// without it again: every receipt of every round is in the log at its
// index with its leaf hash, and the next action lands after them.
func TestWriteAheadFlagBothWays(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dataDir := filepath.Join(t.TempDir(), "annal-data")
	var receipts []receiptRecord
	var cred string
	for round, args := range [][]string{{"--no-write-ahead"}, nil} {
		d := startDaemon(t, dataDir, args...)
		if cred == "" {
			cred = d.rootCredential(t)
		}
		cl := d.client(t, cred)
		for i := range 50 {
			r, err := cl.Submit(ctx, api.ActionRequest{Type: "create", Target: fmt.Sprintf("flag/%d/%d", round, i)})
			if err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
			receipts = append(receipts, receiptRecord{r.Index, r.LeafHash, r.EventID})
		}
		d.kill(t)
	}
	last := receipts[len(receipts)-1].index
	// annald audit on the killed folder replays every answered entry:
	// those the tiles hold, and past the signed checkpoint those the
	// write-ahead log alone holds.
	out, err := exec.Command(annaldBinary, "audit", "--data", dataDir, "--json").Output()
	var audit struct {
		Size, Folded, Unsigned uint64
		Broken                 any
	}
	if jerr := json.Unmarshal(out, &audit); err != nil || jerr != nil || audit.Broken != nil ||
		audit.Size+audit.Unsigned <= last || audit.Folded != audit.Size+audit.Unsigned {
		t.Fatalf("annald audit of the killed folder: %v, %s; want entries up to %d replayed", err, out, last)
	}
	d := startDaemon(t, dataDir, "--no-write-ahead")
	cl := d.client(t, cred)
	if _, err := cl.WaitProof(ctx, last); err != nil {
		t.Fatalf("no checkpoint covers the last receipt (index %d): %v", last, err)
	}
	for _, r := range receipts {
		entry, err := cl.Event(ctx, r.index)
		if err != nil {
			t.Fatal(err)
		}
		if got := rfc6962.DefaultHasher.HashLeaf(entry); hex.EncodeToString(got) != r.leafHash {
			t.Fatalf("receipt for index %d: the log has leaf %x there, the receipt says %s", r.index, got, r.leafHash)
		}
	}
	r, err := cl.Submit(ctx, api.ActionRequest{Type: "observe", Target: "flag/after"})
	if err != nil || r.Index != last+1 {
		t.Fatalf("the next action: %+v, %v; want index %d", r, err, last+1)
	}
}
