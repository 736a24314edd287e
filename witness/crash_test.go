package witness

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/annal-dev/annal/internal/fastpost"
)

// crashChildEnv names the data folder of TestCrash_ChildWitness when the
// test binary runs as the witness process that TestCrash_* kill.
const crashChildEnv = "ANNAL_WITNESS_CRASH_CHILD_DIR"

// crashChildFastEnv, set to 1, has the child serve add-checkpoint through
// internal/fastpost, as annal-witness serve does by default: its answer
// is written once the handler returned, like net/http's.
const crashChildFastEnv = "ANNAL_WITNESS_CRASH_CHILD_FAST"

// TestCrash_ChildWitness is not a test on its own: run by TestCrash_* as a
// separate process, it serves a witness on the folder named by
// crashChildEnv, prints its URL, and runs until it is killed.
func TestCrash_ChildWitness(t *testing.T) {
	dir := os.Getenv(crashChildEnv)
	if dir == "" {
		t.Skip("runs only as the child process of TestCrash_StateIsDurableBeforeTheAnswer")
	}
	skey, _, err := LoadOrCreateKey(filepath.Join(dir, KeyFileName), testWitnessName)
	if err != nil {
		t.Fatal(err)
	}
	cosigner, err := NewCosigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	// With an ML-DSA-44 key, as annal-witness serves by default: a request
	// alone is then committed by its own goroutine, its line made while
	// the journal write is under way (commitAlone).
	mkey, _, err := LoadOrCreateMLDSAKey(filepath.Join(dir, MLDSAKeyFileName), testWitnessName)
	if err != nil {
		t.Fatal(err)
	}
	if cosigner, err = cosigner.WithMLDSA(mkey); err != nil {
		t.Fatal(err)
	}
	store, err := OpenStore(filepath.Join(dir, StateFileName), 0)
	if err != nil {
		t.Fatal(err)
	}
	w, err := New(store, cosigner, Options{Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if os.Getenv(crashChildFastEnv) == "1" {
		if ln, err = fastpost.New(ln, fastpost.Config{Path: "/add-checkpoint", Handler: w.Handler(), MaxBody: MaxRequestSize}); err != nil {
			t.Fatal(err)
		}
	}
	fmt.Printf("listening on http://%s\n", ln.Addr())
	http.Serve(ln, w.Handler())
}

// TestCrash_StateIsDurableBeforeTheAnswer kills (SIGKILL) a witness
// process right after it answered 200, and checks that what it cosigned
// survived, so that the restarted witness cannot be made to cosign a split
// view. A killed process shows that the commit is complete before the
// answer; that it also survives power loss rests on the journal's durable
// write (fdatasync, or O_DIRECT|O_DSYNC, awaited before the answer) and
// bbolt's fsync of every commit (Options.NoSync is never set), which no
// test here can show.
func TestCrash_StateIsDurableBeforeTheAnswer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child process")
	}
	dir := t.TempDir()
	l := newTestLog(t, "example.com/log").growTo(40)
	fork := l.fork(6).growTo(40)
	store, err := OpenStore(filepath.Join(dir, StateFileName), 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.AddLog(l.config()); err != nil {
		t.Fatal(err)
	}
	store.Close()

	for round, step := range [][2]uint64{{0, 5}, {5, 12}, {12, 30}} {
		url := startCrashChild(t, dir, round%2 == 1)
		resp, err := http.Post(url+"/add-checkpoint", "text/plain", strings.NewReader(string(l.request(step[0], step[1]))))
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK || strings.Count(string(body), "\n") != 2 {
			t.Fatalf("round %d: %d %q, %v; want 200 with two cosignature lines", round, resp.StatusCode, body, err)
		}
		// startCrashChild's cleanup SIGKILLs it; do it now, right after the
		// answer, before anything else can happen.
		killCrashChildren(t)
		store, err := OpenStore(filepath.Join(dir, StateFileName), 5*time.Second)
		if err != nil {
			t.Fatalf("round %d: reopen after kill: %v", round, err)
		}
		cp, err := store.Latest(LogID(l.origin))
		if err != nil || cp.Size != step[1] {
			t.Fatalf("round %d: after kill, latest %+v, %v; want size %d", round, cp, err, step[1])
		}
		store.Close()
	}
	// The restarted witness refuses the split view that a forgetful one
	// would have cosigned.
	tw := startWitness(t, dir, Options{})
	if a := tw.post(fork.request(30, 35)); a.status != http.StatusUnprocessableEntity {
		t.Errorf("fork after crashes: %d %q, want 422", a.status, a.body)
	}
	if a := tw.post(fork.request(0, 30)); a.status != http.StatusConflict || a.body != "30\n" {
		t.Errorf("fork from 0 after crashes: %d %q, want 409 \"30\\n\"", a.status, a.body)
	}
}

var crashChildren []*exec.Cmd

// startCrashChild starts TestCrash_ChildWitness on dir, serving through
// internal/fastpost if fast, and returns its URL.
func startCrashChild(t *testing.T, dir string, fast bool) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestCrash_ChildWitness$", "-test.v")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+dir, fmt.Sprintf("%s=%d", crashChildFastEnv, map[bool]int{false: 0, true: 1}[fast]))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	crashChildren = append(crashChildren, cmd)
	t.Cleanup(func() { killCrashChildren(t) })
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if url, ok := strings.CutPrefix(sc.Text(), "listening on "); ok {
			go func() {
				for sc.Scan() {
				}
			}()
			return url
		}
	}
	t.Fatalf("child witness did not start: %v", sc.Err())
	return ""
}

func killCrashChildren(t *testing.T) {
	for _, c := range crashChildren {
		c.Process.Kill() // SIGKILL: no deferred Close, no flush
		c.Wait()
	}
	crashChildren = nil
}
