package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/annal-dev/annal/api"
	"github.com/annal-dev/annal/client"
	"github.com/annal-dev/annal/kernel"
	"github.com/annal-dev/annal/server"
	"github.com/spf13/cobra"
)

// Every mistyped subcommand of every group is an error, never help and
// exit 0.
func TestUnknownSubcommandsAreErrors(t *testing.T) {
	var groups []*cobra.Command
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.HasSubCommands() {
			groups = append(groups, c)
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	root := newRootCommand()
	walk(root)
	plain := 0
	for _, g := range groups {
		if g.Annotations["group"] != "" {
			plain++
		}
	}
	if plain < 8 {
		t.Fatalf("found only %d groups that run nothing of their own", plain)
	}
	if len(groups) < 8 {
		t.Fatalf("found only %d command groups", len(groups))
	}
	for _, g := range groups {
		path := strings.Fields(g.CommandPath())[1:]
		_, err := runCLI(t, append(path, "aprove", "X")...)
		switch {
		case err == nil:
			t.Errorf("%s aprove X: exit 0", g.CommandPath())
		case g.Annotations["group"] != "" && !strings.Contains(err.Error(), `unknown command "aprove"`):
			// A group that runs nothing of its own names the mistake.
			t.Errorf("%s aprove X: %v", g.CommandPath(), err)
		}
	}
	if _, err := runCLI(t, "holds"); err != nil {
		t.Errorf("a group alone prints its help: %v", err)
	}
}

func TestVersionFlag(t *testing.T) {
	out, err := runCLI(t, "--version")
	if err != nil || !strings.HasPrefix(out, "annal ") || !strings.Contains(out, "go1.") {
		t.Fatalf("--version: %q %v", out, err)
	}
}

// A credential given on the command line beats the environment, and help
// never shows the environment's secret.
func TestExplicitCredentialBeatsTheEnvironment(t *testing.T) {
	url, credFile, _ := startServer(t)
	rootCred, _ := os.ReadFile(credFile)
	c, err := client.New(url, strings.TrimSpace(string(rootCred)))
	if err != nil {
		t.Fatal(err)
	}
	agent, err := c.CreateAgent(context.Background(), api.AgentRequest{Name: "a", Purpose: "p"})
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("ANNAL_CREDENTIAL", agent.Credential)
	who := func(args ...string) string {
		t.Helper()
		out, err := runCLI(t, append([]string{"--server", url}, append(args, "whoami")...)...)
		if err != nil {
			t.Fatalf("whoami %v: %v", args, err)
		}
		var a api.Actor
		if err := json.Unmarshal([]byte(out), &a); err != nil {
			t.Fatalf("whoami output %q: %v", out, err)
		}
		return a.ID
	}
	if id := who(); id != agent.ID {
		t.Fatalf("with only the environment: %s, want the agent %s", id, agent.ID)
	}
	if id := who("--credential-file", credFile); id != "root" {
		t.Fatalf("--credential-file with ANNAL_CREDENTIAL set acted as %s, not root", id)
	}
	if id := who("--credential", strings.TrimSpace(string(rootCred))); id != "root" {
		t.Fatalf("--credential with ANNAL_CREDENTIAL set acted as %s", id)
	}
	help, _ := runCLI(t, "--help")
	if strings.Contains(help, agent.Credential) {
		t.Fatal("--help printed the credential from the environment")
	}
	t.Setenv("ANNAL_CREDENTIAL", "")
	t.Setenv("ANNAL_CREDENTIAL_FILE", filepath.Join(t.TempDir(), "missing"))
	if _, err := runCLI(t, "--server", url, "--credential-file", credFile, "whoami"); err != nil {
		t.Fatalf("an explicit file beside a broken ANNAL_CREDENTIAL_FILE: %v", err)
	}
}

func TestHistoryAndTail(t *testing.T) {
	url, credFile, _ := startServer(t)
	cli := func(args ...string) string {
		t.Helper()
		out, err := runCLI(t, append([]string{"--server", url, "--credential-file", credFile}, args...)...)
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		return out
	}
	for i := range 4 {
		cli("submit", "--type", "observe", "--target", "workspace/"+strconv.Itoa(i))
	}
	cli("submit", "--type", "observe", "--target", "workspace/\u202eevil")
	table := cli("history", "--type", "observe", "--limit", "3")
	lines := strings.Split(strings.TrimSpace(table), "\n")
	if len(lines) != 5 || !strings.HasPrefix(lines[0], "INDEX") || !strings.Contains(lines[4], "more: annal history --cursor") {
		t.Fatalf("history table:\n%s", table)
	}
	if strings.ContainsAny(table, "\u202e") || !strings.Contains(table, `\u202e`) {
		t.Fatalf("an agent's target reached the terminal raw:\n%q", table)
	}
	var page api.HistoryPage
	if err := json.Unmarshal([]byte(cli("history", "--json", "--oldest", "--target", "workspace/")), &page); err != nil || len(page.Events) != 5 {
		t.Fatalf("history --json: %+v %v", page, err)
	}
	tail := cli("tail", "-n", "2", "--type", "observe")
	if rows := strings.Split(strings.TrimSpace(tail), "\n"); len(rows) != 2 || !strings.Contains(rows[0], "workspace/3") {
		t.Fatalf("tail -n 2:\n%s", tail)
	}
}

// lockedBuffer is an output buffer a running command writes while the
// test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}
func (l *lockedBuffer) String() string { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

func TestTailFollowPrintsNewEvents(t *testing.T) {
	url, credFile, _ := startServer(t)
	if _, err := runCLI(t, "--server", url, "--credential-file", credFile, "submit", "--type", "observe", "--target", "before/1"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out lockedBuffer
	done := make(chan error, 1)
	go func() {
		cmd := newRootCommand()
		cmd.SetOut(&out)
		cmd.SetErr(io.Discard)
		cmd.SetArgs([]string{"--server", url, "--credential-file", credFile, "tail", "-f", "-n", "1", "--type", "observe"})
		done <- cmd.ExecuteContext(ctx)
	}()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(out.String(), "before/1") {
		if time.Now().After(deadline) {
			t.Fatalf("tail printed %q", out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, target := range []string{"after/1", "after/2"} {
		if _, err := runCLI(t, "--server", url, "--credential-file", credFile, "submit", "--type", "observe", "--target", target); err != nil {
			t.Fatal(err)
		}
		runCLI(t, "--server", url, "--credential-file", credFile, "submit", "--type", "mutate", "--target", "filtered/"+target)
	}
	for !strings.Contains(out.String(), "after/2") {
		if time.Now().After(deadline) {
			t.Fatalf("tail -f printed %q", out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("tail -f ended with %v", err)
	}
	got := out.String()
	if strings.Count(got, "after/1") != 1 || strings.Contains(got, "filtered/") {
		t.Fatalf("tail -f output:\n%s", got)
	}
}

// A denied action's error says where the denial is recorded.
func TestDenialIndexIsShown(t *testing.T) {
	url, credFile, _ := startServer(t)
	out, err := runCLI(t, "--server", url, "--credential-file", credFile, "agents", "create", "--name", "n", "--purpose", "p",
		"--grant", "workspace/**:observe", "--energy", "100")
	if err != nil {
		t.Fatal(err)
	}
	var agent api.Agent
	if err := json.Unmarshal([]byte(out), &agent); err != nil {
		t.Fatal(err)
	}
	_, err = runCLI(t, "--server", url, "--credential", agent.Credential, "submit", "--type", "mutate", "--target", "elsewhere/x")
	if err == nil || !strings.Contains(err.Error(), "recorded in the log at index") {
		t.Fatalf("a denied submit: %v", err)
	}
}

// TestWaitSaysWhatItWaitsFor: --wait tells the person on stderr which
// entry it waits to see covered and why it is not yet, and the receipt it
// prints then holds the proof and its checkpoint.
func TestWaitSaysWhatItWaitsFor(t *testing.T) {
	cfg := kernel.DefaultConfig(t.TempDir())
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg.CheckpointInterval = 1500 * time.Millisecond // long enough to be seen waiting
	cfg.DisableProduction = true
	k, err := kernel.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(server.New(k, cfg.Logger))
	t.Cleanup(func() { srv.Close(); k.Close() })
	run := func(args ...string) (string, string, error) {
		cmd := newRootCommand()
		var out, errOut bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetErr(&errOut)
		cmd.SetArgs(append([]string{"--server", srv.URL, "--credential-file", k.RootCredentialPath()}, args...))
		err := cmd.Execute()
		return out.String(), errOut.String(), err
	}
	out, stderr, err := run("submit", "--type", "observe", "--target", "workspace/a", "--wait")
	if err != nil {
		t.Fatal(err)
	}
	var r api.Receipt
	if err := json.Unmarshal([]byte(out), &r); err != nil || r.Proof == "" || r.Checkpoint == "" || !strings.HasSuffix(r.Proof, r.Checkpoint) {
		t.Fatalf("submit --wait printed %q: %v", out, err)
	}
	if want := fmt.Sprintf("annal: waiting for a signed checkpoint that covers entry %d", r.Index); !strings.Contains(stderr, want) {
		t.Errorf("submit --wait said %q, want %q", stderr, want)
	}
	if strings.Contains(out, "waiting") {
		t.Errorf("the waiting note went to stdout: %q", out)
	}
	// A wait that cannot end says so when it gives up.
	_, _, err = run("--timeout", "300ms", "proof", "--wait", "999")
	if err == nil || !strings.Contains(err.Error(), "999") {
		t.Errorf("proof --wait for an index past the log: %v", err)
	}
}

// TestRetriesRateLimitsAndBusy: the CLI sends a request the kernel refused
// with 429 (or a retryable 503) again, saying so on stderr; --retries 0
// gives up at once; a 503 whose write may have landed is never resent.
func TestRetriesRateLimitsAndBusy(t *testing.T) {
	var sends atomic.Int32
	failFirst := int32(2)
	outcomeUnknown := false
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := sends.Add(1)
		if n <= failFirst {
			if outcomeUnknown {
				w.WriteHeader(http.StatusServiceUnavailable)
				w.Write([]byte(`{"error":"append: log append failed, and the entry may be in the log","outcome_unknown":true}`))
				return
			}
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusTooManyRequests)
			w.Write([]byte(`{"error":"validate (rate_limit): rate limit exceeded","stage":"validate","gate":"rate_limit"}`))
			return
		}
		w.Write([]byte(`{"status":"committed","index":9,"actor":"agent-x","type":"observe","target":"workspace/a"}`))
	}))
	defer srv.Close()
	run := func(args ...string) (string, string, error) {
		cmd := newRootCommand()
		var out, errOut bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetErr(&errOut)
		cmd.SetArgs(append([]string{"--server", srv.URL, "--credential", "annal_test"}, args...))
		err := cmd.Execute()
		return out.String(), errOut.String(), err
	}
	out, stderr, err := run("submit", "--type", "observe", "--target", "workspace/a")
	if err != nil || !strings.Contains(out, `"index": 9`) || sends.Load() != 3 || strings.Count(stderr, "sending again") != 2 {
		t.Errorf("after two 429s: err %v, %d sends, stdout %q, stderr %q", err, sends.Load(), out, stderr)
	}
	sends.Store(0)
	if _, _, err := run("--retries", "0", "submit", "--type", "observe", "--target", "workspace/a"); err == nil || sends.Load() != 1 {
		t.Errorf("--retries 0: err %v after %d sends", err, sends.Load())
	}
	sends.Store(0)
	outcomeUnknown = true
	if _, _, err := run("submit", "--type", "observe", "--target", "workspace/a"); err == nil || sends.Load() != 1 || !strings.Contains(err.Error(), "may be in the log") {
		t.Errorf("a 503 whose write may have landed: err %v after %d sends", err, sends.Load())
	}
}
