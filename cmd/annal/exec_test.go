package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/annal-dev/annal/api"
	"github.com/annal-dev/annal/blobstore"
	"github.com/annal-dev/annal/format/oid"
	"github.com/annal-dev/annal/internal/execute"
	"github.com/annal-dev/annal/kernel"
	"github.com/annal-dev/annal/kernel/event"
	"github.com/annal-dev/annal/server"
)

// execEnv is a kernel with an agent that may execute exec/** and whose
// envelope holds exec/held/** for a human.
type execEnv struct {
	url, rootCred, agentCred string
	k                        *kernel.Kernel
}

func newExecEnv(t *testing.T) *execEnv {
	t.Helper()
	store, err := blobstore.Open(t.TempDir(), 1<<20, 1<<24)
	if err != nil {
		t.Fatal(err)
	}
	url, credFile, k := startServer(t, func(s *server.Server) { s.KeepBlobs(store) })
	out, err := runCLI(t, "--server", url, "--credential-file", credFile, "agents", "create", "--name", "runner", "--purpose", "runs commands",
		"--trust", "0.8", "--grant", "exec/**:execute", "--energy", "10000")
	if err != nil {
		t.Fatal(err)
	}
	var agent api.Agent
	if err := json.Unmarshal([]byte(out), &agent); err != nil {
		t.Fatal(err)
	}
	if _, err := runCLI(t, "--server", url, "--credential-file", credFile, "envelopes", "issue", "--holder", agent.ID,
		"--budget", "5000", "--grant", "exec/**:execute", "--hold-on", "exec/held/**:execute"); err != nil {
		t.Fatal(err)
	}
	root, err := os.ReadFile(credFile)
	if err != nil {
		t.Fatal(err)
	}
	return &execEnv{url: url, rootCred: strings.TrimSpace(string(root)), agentCred: agent.Credential, k: k}
}

// exec runs annal exec as the agent with stdin, and returns stdout, stderr
// and the exit code annal would end with.
func (e *execEnv) exec(t *testing.T, stdin string, args ...string) (string, string, int) {
	t.Helper()
	cmd := newRootCommand()
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetIn(strings.NewReader(stdin))
	cmd.SetArgs(append([]string{"--server", e.url, "--credential", e.agentCred, "exec"}, args...))
	err := cmd.Execute()
	code := 0
	var exit *exitError
	switch {
	case errors.As(err, &exit):
		code = exit.code
		errOut.WriteString(exit.msg)
	case err != nil:
		t.Fatalf("annal exec: %v", err)
	}
	return out.String(), errOut.String(), code
}

func (e *execEnv) event(t *testing.T, index uint64) *event.Event {
	t.Helper()
	entry, err := e.k.Entry(context.Background(), index)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := event.Parse(entry)
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

type execReceipts struct {
	Intent uint64      `json:"intent"`
	Hold   string      `json:"hold_id"`
	Result api.Receipt `json:"result"`
}

func readReceipts(t *testing.T, path string) execReceipts {
	t.Helper()
	var r execReceipts
	b, err := os.ReadFile(path)
	if err == nil {
		err = json.Unmarshal(b, &r)
	}
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func payloadOf(t *testing.T, ev *event.Event) map[string]any {
	t.Helper()
	var p map[string]any
	if err := json.Unmarshal(ev.Action.Payload, &p); err != nil {
		t.Fatal(err)
	}
	return p
}

// An allowed command: stdin, stdout and stderr pass through unchanged, the
// exit code is the command's, and the log holds the intent (argv, stdin's
// OID) and the result (stdout's OID, exit code, sizes) that completes it.
func TestExec_RunsAndRecords(t *testing.T) {
	e := newExecEnv(t)
	dir := t.TempDir()
	receipts := filepath.Join(dir, "r.json")
	script := `cat; printf 'to stderr\n' >&2; exit 3`
	stdout, stderr, code := e.exec(t, "hello from stdin\n", "--target", "exec/sh", "--receipt", receipts, "--", "sh", "-c", script)
	if stdout != "hello from stdin\n" || stderr != "to stderr\n" || code != 3 {
		t.Fatalf("stdout %q, stderr %q, exit %d", stdout, stderr, code)
	}
	r := readReceipts(t, receipts)
	intent := e.event(t, r.Intent)
	p := payloadOf(t, intent)
	canonical, _ := execute.CanonicalCommand([]string{"sh", "-c", script}, oid.Of([]byte("hello from stdin\n")))
	if intent.Action.Type != event.Execute || intent.Action.Target != "exec/sh" || p["phase"] != "intent" ||
		p["input_oid"] != oid.Of(canonical) || p["stdin_oid"] != oid.Of([]byte("hello from stdin\n")) {
		t.Fatalf("intent %s", intent.Action.Payload)
	}
	if argv, _ := p["argv"].([]any); len(argv) != 3 || argv[2] != script {
		t.Fatalf("intent argv %v", p["argv"])
	}
	result := e.event(t, r.Result.Index)
	rp := payloadOf(t, result)
	if rp["intent"] != float64(r.Intent) || rp["exit_code"] != float64(3) || rp["output_oid"] != oid.Of([]byte("hello from stdin\n")) ||
		rp["stderr_oid"] != oid.Of([]byte("to stderr\n")) || rp["output_bytes"] != float64(len("hello from stdin\nto stderr\n")) {
		t.Fatalf("result %s", result.Action.Payload)
	}
	// --keep-blobs: what ran can be fetched by its OIDs, by a human.
	artifact := filepath.Join(dir, "out.txt")
	_, _, code = e.exec(t, "in", "--target", "exec/sh", "--keep-blobs", "--artifact", artifact, "--receipt", receipts, "--",
		"sh", "-c", "cat > "+artifact+"; echo done")
	r = readReceipts(t, receipts)
	rp = payloadOf(t, e.event(t, r.Result.Index))
	ip := payloadOf(t, e.event(t, r.Intent))
	if code != 0 || rp["artifact_hash"] != oid.Of([]byte("in")) {
		t.Fatalf("--artifact: exit %d, result %v", code, rp)
	}
	for _, id := range []any{ip["input_oid"], ip["stdin_oid"], rp["output_oid"], rp["artifact_hash"]} {
		out, err := runCLI(t, "--server", e.url, "--credential", e.rootCred, "blobs", "get", id.(string))
		if err != nil || oid.Of([]byte(out)) != id {
			t.Fatalf("blob %v: %q %v", id, out, err)
		}
	}
	// --private logs no argv; a command that cannot start is recorded 127.
	_, _, code = e.exec(t, "", "--private", "--receipt", receipts, "--", "/nonexistent/tool", "--flag")
	r = readReceipts(t, receipts)
	if code != exitNotFound || e.event(t, r.Intent).Action.Target != "exec/tool" || payloadOf(t, e.event(t, r.Intent))["argv"] != nil ||
		payloadOf(t, e.event(t, r.Result.Index))["exit_code"] != float64(exitNotFound) {
		t.Fatalf("a command that cannot start: exit %d, intent %s", code, e.event(t, r.Intent).Action.Payload)
	}
}

// A denied command never starts: the file it would create does not exist.
func TestExec_DeniedNeverStarts(t *testing.T) {
	e := newExecEnv(t)
	marker := filepath.Join(t.TempDir(), "ran")
	_, stderr, code := e.exec(t, "", "--target", "tools/sh", "--", "touch", marker)
	if code != exitNotAllowed || !strings.Contains(stderr, "not run") {
		t.Fatalf("denied: exit %d, stderr %q", code, stderr)
	}
	if _, err := os.Stat(marker); !os.IsNotExist(err) {
		t.Fatalf("the denied command ran: %v", err)
	}
}

// A held command waits for a human: approved, it runs and its result names
// the approval; rejected, it never starts.
func TestExec_HeldThenAnswered(t *testing.T) {
	e := newExecEnv(t)
	for _, decision := range []string{"approve", "reject"} {
		t.Run(decision, func(t *testing.T) {
			dir := t.TempDir()
			marker, receipts := filepath.Join(dir, "ran"), filepath.Join(dir, "r.json")
			type outcome struct {
				stderr string
				code   int
			}
			done := make(chan outcome, 1)
			go func() {
				_, stderr, code := e.exec(t, "", "--target", "exec/held/deploy", "--receipt", receipts, "--", "touch", marker)
				done <- outcome{stderr, code}
			}()
			hold := waitForHold(t, e)
			if _, err := os.Stat(marker); !os.IsNotExist(err) {
				t.Fatal("the held command ran before a human answered")
			}
			if _, err := runCLI(t, "--server", e.url, "--credential", e.rootCred, "holds", decision, hold.ID); err != nil {
				t.Fatal(err)
			}
			var o outcome
			select {
			case o = <-done:
			case <-time.After(30 * time.Second):
				t.Fatal("annal exec did not return after the answer")
			}
			_, statErr := os.Stat(marker)
			if decision == "reject" {
				if o.code != exitNotAllowed || !os.IsNotExist(statErr) || !strings.Contains(o.stderr, "rejected") {
					t.Fatalf("rejected: exit %d, stderr %q, marker %v", o.code, o.stderr, statErr)
				}
				return
			}
			if o.code != 0 || statErr != nil || !strings.Contains(o.stderr, "held for a human") {
				t.Fatalf("approved: exit %d, stderr %q, marker %v", o.code, o.stderr, statErr)
			}
			r := readReceipts(t, receipts)
			if r.Hold != hold.ID || e.event(t, r.Intent).Hold == nil || payloadOf(t, e.event(t, r.Result.Index))["intent"] != float64(r.Intent) {
				t.Fatalf("receipts %+v", r)
			}
		})
	}
}

func waitForHold(t *testing.T, e *execEnv) api.Hold {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		out, err := runCLI(t, "--server", e.url, "--credential", e.rootCred, "holds", "list", "--status", "pending")
		if err != nil {
			t.Fatal(err)
		}
		var hs []api.Hold
		if err := json.Unmarshal([]byte(out), &hs); err != nil {
			t.Fatalf("holds list printed %q", out)
		}
		if len(hs) == 1 {
			return hs[0]
		}
	}
	t.Fatal("no hold appeared")
	return api.Hold{}
}
