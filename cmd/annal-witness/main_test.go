package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/annal-dev/annal/checkpoints"
	"github.com/annal-dev/annal/witness"
	fnote "github.com/transparency-dev/formats/note"
	"github.com/transparency-dev/merkle/rfc6962"
	"github.com/transparency-dev/merkle/testonly"
	"golang.org/x/mod/sumdb/note"
)

// run executes the command line and returns its output.
func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := newRootCommand()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), err
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startServe runs "serve" until the test ends and returns its printed
// verifier key and URL.
func startServe(t *testing.T, data string) (vkey, url string) {
	t.Helper()
	return startServeWith(t, serveFlags{data: data, name: "witness.test/cmd", fastPost: true})
}

// startServeWith is startServe with more flags: f.data and f.name at least.
func startServeWith(t *testing.T, f serveFlags) (vkey, url string) {
	t.Helper()
	f.listen, f.logLevel, f.lockTimeout = "127.0.0.1:0", "error", 100*time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	stdout := &lockedBuffer{}
	errc := make(chan error, 1)
	go func() {
		errc <- serve(ctx, f, stdout, io.Discard)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-errc; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	re := regexp.MustCompile(`(?m)^annal-witness: verifier key (\S+)\n(?:.*\n)*annal-witness: listening on (\S+)$`)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		select {
		case err := <-errc:
			t.Fatalf("serve ended: %v\n%s", err, stdout.String())
		default:
		}
		if m := re.FindStringSubmatch(stdout.String()); m != nil {
			return m[1], m[2]
		}
	}
	t.Fatalf("serve did not start:\n%s", stdout.String())
	return "", ""
}

type cmdTestLog struct {
	origin, vkey string
	signer       note.Signer
	tree         *testonly.Tree
}

func newCmdTestLog(t *testing.T, origin string, size int) *cmdTestLog {
	skey, vkey, err := checkpoints.GenerateLogKey(origin)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := checkpoints.NewLogSigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	l := &cmdTestLog{origin: origin, vkey: vkey, signer: signer, tree: testonly.New(rfc6962.DefaultHasher)}
	for i := range size {
		l.tree.AppendData([]byte{byte(i)})
	}
	return l
}

func (l *cmdTestLog) request(t *testing.T, old, size uint64) (body, signed []byte) {
	t.Helper()
	signed, err := checkpoints.SignCheckpoint(checkpoints.Checkpoint{Origin: l.origin, Size: size, Hash: [32]byte(l.tree.HashAt(size))}, l.signer)
	if err != nil {
		t.Fatal(err)
	}
	req := witness.AddCheckpointRequest{OldSize: old, SignedCheckpoint: signed}
	if old > 0 {
		p, err := l.tree.ConsistencyProof(old, size)
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range p {
			req.Proof = append(req.Proof, [32]byte(h))
		}
	}
	return req.Marshal(), signed
}

func post(t *testing.T, url string, body []byte) (int, string) {
	t.Helper()
	a := postFull(t, url, body)
	return a.status, a.body
}

func TestServe_CosignsWithThePrintedKey(t *testing.T) {
	data := filepath.Join(t.TempDir(), "w")
	vkey, url := startServe(t, data)
	info, err := os.Stat(filepath.Join(data, witness.KeyFileName))
	if err != nil {
		t.Fatal(err)
	}
	if perm := info.Mode().Perm(); perm != 0o600 {
		t.Errorf("witness key mode %04o, want 0600", perm)
	}

	l := newCmdTestLog(t, "example.com/log", 10)
	// The witness is running: the logs commands go through its admin socket.
	if out, err := run(t, "logs", "add", "--data", data, "--origin", l.origin, "--key", l.vkey, "--url", "https://example.com/log/"); err != nil {
		t.Fatalf("logs add: %v\n%s", err, out)
	}
	body, signed := l.request(t, 0, 10)
	status, answer := post(t, url, body)
	if status != http.StatusOK {
		t.Fatalf("add-checkpoint: %d %q", status, answer)
	}
	v, err := fnote.NewVerifierForCosignatureV1(vkey)
	if err != nil {
		t.Fatalf("printed verifier key %q: %v", vkey, err)
	}
	if _, err := note.Open(append(signed, answer...), note.VerifierList(v)); err != nil {
		t.Errorf("cosignature does not verify with the printed key: %v", err)
	}
	out, err := run(t, "logs", "list", "--data", data)
	if err != nil || !strings.Contains(out, "example.com/log\n") || !strings.Contains(out, "cosigned  size 10") || !strings.Contains(out, "tiles     https://example.com/log/") {
		t.Errorf("logs list: %v\n%s", err, out)
	}

	// A second witness on the same folder is refused, clearly.
	err = serve(context.Background(), serveFlags{data: data, listen: "127.0.0.1:0", logLevel: "error", lockTimeout: 100 * time.Millisecond}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "in use by another annal-witness") {
		t.Errorf("second serve: %v, want a data folder in use error", err)
	}
}

func TestLogs_WhileStopped(t *testing.T) {
	data := filepath.Join(t.TempDir(), "w")
	if _, err := run(t, "logs", "list", "--data", data); err == nil || !strings.Contains(err.Error(), "no witness data folder") {
		t.Errorf("list without a folder: %v", err)
	}
	l := newCmdTestLog(t, "example.com/log", 4)
	if out, err := run(t, "logs", "add", "--data", data, "--origin", l.origin, "--key", l.vkey); err != nil {
		t.Fatalf("logs add: %v\n%s", err, out)
	}
	if _, err := run(t, "logs", "add", "--data", data, "--origin", l.origin, "--key", l.vkey); err == nil || !strings.Contains(err.Error(), "already configured") {
		t.Errorf("second add: %v", err)
	}
	if _, err := run(t, "logs", "add", "--data", data, "--origin", "o", "--key", "nonsense"); err == nil || !strings.Contains(err.Error(), "verifier key") {
		t.Errorf("bad key: %v", err)
	}
	out, err := run(t, "logs", "list", "--data", data, "--json")
	if err != nil || !strings.Contains(out, `"origin": "example.com/log"`) {
		t.Errorf("logs list --json: %v\n%s", err, out)
	}

	// Configured while stopped, served once started.
	_, url := startServe(t, data)
	body, _ := l.request(t, 0, 4)
	if status, answer := post(t, url, body); status != http.StatusOK {
		t.Fatalf("add-checkpoint: %d %q", status, answer)
	}
	if out, err := run(t, "logs", "remove", "--data", data, "--origin", l.origin); err != nil {
		t.Fatalf("logs remove: %v\n%s", err, out)
	}
	if status, _ := post(t, url, body); status != http.StatusNotFound {
		t.Errorf("removed log: %d, want 404", status)
	}
	if _, err := run(t, "logs", "remove", "--data", data, "--origin", l.origin); err == nil || !strings.Contains(err.Error(), "unknown log origin") {
		t.Errorf("second remove: %v", err)
	}
}

// A mistyped subcommand of any group is an error, never help and exit 0;
// --version answers.
func TestUnknownSubcommandsAreErrors(t *testing.T) {
	groups := 0
	for _, g := range newRootCommand().Commands() {
		if !g.HasSubCommands() {
			continue
		}
		groups++
		if _, err := run(t, g.Name(), "aprove", "X"); err == nil || !strings.Contains(err.Error(), `unknown command "aprove"`) {
			t.Errorf("annal-witness %s aprove X: %v", g.Name(), err)
		}
	}
	if groups < 3 {
		t.Fatalf("only %d groups", groups)
	}
	if out, err := run(t, "--version"); err != nil || !strings.HasPrefix(out, "annal-witness ") {
		t.Fatalf("--version: %q %v", out, err)
	}
}

// serve's collector target: the flag when given, GOGC when only it is set,
// the default otherwise; a target below 1 is refused before anything
// starts.
func TestServe_GCPercent(t *testing.T) {
	for _, c := range []struct {
		flagGiven, gogcSet bool
		flag               int
		want               int
		sets               bool
	}{
		{false, false, DefaultGCPercent, DefaultGCPercent, true},
		{false, true, DefaultGCPercent, 0, false},
		{true, true, 150, 150, true},
		{true, false, 50, 50, true},
	} {
		got, sets := gcPercentFor(c.flagGiven, c.flag, c.gogcSet)
		if got != c.want || sets != c.sets {
			t.Errorf("flag given %v (%d), GOGC set %v: %d, %v; want %d, %v", c.flagGiven, c.flag, c.gogcSet, got, sets, c.want, c.sets)
		}
	}
}

// A --gc-percent below 1 or a negative --commit-linger is refused, naming
// the flag, before anything is made.
func TestServe_BadTuningRefusedFirst(t *testing.T) {
	for _, bad := range [][2]string{{"--gc-percent", "0"}, {"--commit-linger", "-1ms"}} {
		data := filepath.Join(t.TempDir(), "w")
		out, err := run(t, "serve", "--data", data, bad[0], bad[1])
		if err == nil || !strings.Contains(err.Error(), bad[0]+" "+bad[1]) {
			t.Fatalf("%s %s: %v\n%s", bad[0], bad[1], err, out)
		}
		if _, err := os.Stat(data); err == nil {
			t.Fatalf("a refused %s made the data folder", bad[0])
		}
	}
}
