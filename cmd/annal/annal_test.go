package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/annal-dev/annal/api"
	"github.com/annal-dev/annal/checkpoints"
	"github.com/annal-dev/annal/kernel"
	"github.com/annal-dev/annal/kernel/event"
	"github.com/annal-dev/annal/server"
	"github.com/annal-dev/annal/verifier"
)

func startServer(t *testing.T, options ...func(*server.Server)) (url, credFile string, k *kernel.Kernel) {
	t.Helper()
	cfg := kernel.DefaultConfig(t.TempDir())
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg.CheckpointInterval = 100 * time.Millisecond
	cfg.DisableProduction = true // the tests count entries
	k, err := kernel.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ls := server.New(k, cfg.Logger)
	for _, o := range options {
		o(ls)
	}
	srv := httptest.NewServer(ls)
	t.Cleanup(func() { srv.Close(); k.Close() })
	return srv.URL, k.RootCredentialPath(), k
}

func runCLI(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := newRootCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(io.Discard)
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), err
}

func TestCLI_SubmitEventProofCheckpoint(t *testing.T) {
	url, credFile, k := startServer(t)
	dir := t.TempDir()
	out, err := runCLI(t, "--server", url, "--credential-file", credFile, "agents", "create", "--name", "scribe", "--purpose", "notes", "--trust", "0.8",
		"--grant", "workspace/**:create,mutate", "--energy", "100")
	if err != nil {
		t.Fatal(err)
	}
	var agent api.Agent
	if err := json.Unmarshal([]byte(out), &agent); err != nil || agent.Credential == "" || agent.Energy != 100 {
		t.Fatalf("agents create printed %q: %v", out, err)
	}
	if _, err := runCLI(t, "--server", url, "--credential-file", credFile, "envelopes", "issue", "--holder", agent.ID,
		"--budget", "50", "--grant", "workspace/*:mutate"); err != nil {
		t.Fatal(err)
	}
	out, err = runCLI(t, "--server", url, "--credential", agent.Credential, "submit", "--type", "mutate", "--target", "workspace/notes.md", "--payload", `{"b":2,"a":1}`, "--wait")
	if err != nil {
		t.Fatal(err)
	}
	var r api.Receipt
	if err := json.Unmarshal([]byte(out), &r); err != nil || r.Actor != agent.ID || r.Proof == "" {
		t.Fatalf("submit printed %q: %v", out, err)
	}
	entryFile, proofFile := filepath.Join(dir, "e.json"), filepath.Join(dir, "p.tlog-proof")
	if _, err := runCLI(t, "--server", url, "event", itoa(r.Index), "-o", entryFile); err != nil {
		t.Fatal(err)
	}
	if _, err := runCLI(t, "--server", url, "proof", itoa(r.Index), "--wait", "-o", proofFile); err != nil {
		t.Fatal(err)
	}
	entry, _ := os.ReadFile(entryFile)
	if leaf := event.LeafHash(entry); !strings.EqualFold(hex.EncodeToString(leaf[:]), r.LeafHash) {
		t.Fatalf("event file hashes to %x, receipt says %s", leaf, r.LeafHash)
	}
	proofText, _ := os.ReadFile(proofFile)
	p, err := checkpoints.ParseTLogProof(proofText)
	if err != nil || p.Index != r.Index {
		t.Fatalf("proof file: %v", err)
	}
	cp, err := runCLI(t, "--server", url, "checkpoint")
	if err != nil || !strings.HasPrefix(cp, k.Origin()+"\n") {
		t.Fatalf("checkpoint printed %q: %v", cp, err)
	}
}

func TestCLI_CheckpointAndConsistency(t *testing.T) {
	url, credFile, k := startServer(t)
	dir := t.TempDir()
	submit := func() api.Receipt {
		out, err := runCLI(t, "--server", url, "--credential-file", credFile, "submit", "--type", "observe", "--target", "a/b", "--wait")
		if err != nil {
			t.Fatal(err)
		}
		var r api.Receipt
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	submit()
	oldFile, newFile, proofFile := filepath.Join(dir, "old"), filepath.Join(dir, "new"), filepath.Join(dir, "proof")
	if _, err := runCLI(t, "--server", url, "checkpoint", "-o", oldFile); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		submit()
	}
	if _, err := runCLI(t, "--server", url, "checkpoint", "-o", newFile); err != nil {
		t.Fatal(err)
	}
	v, err := checkpoints.NewLogVerifier(k.VerifierKey())
	if err != nil {
		t.Fatal(err)
	}
	oldRaw, _ := os.ReadFile(oldFile)
	newRaw, _ := os.ReadFile(newFile)
	oldCP, err := checkpoints.OpenCheckpoint(oldRaw, v)
	if err != nil {
		t.Fatal(err)
	}
	newCP, err := checkpoints.OpenCheckpoint(newRaw, v)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := runCLI(t, "--server", url, "consistency", itoa(oldCP.Size), itoa(newCP.Size), "-o", proofFile); err != nil {
		t.Fatal(err)
	}
	proofText, _ := os.ReadFile(proofFile)
	if _, err := verifier.VerifyConsistency(oldRaw, newRaw, proofText, k.VerifierKey()); err != nil {
		t.Fatalf("consistency %d -> %d from the CLI: %v", oldCP.Size, newCP.Size, err)
	}
	if _, err := runCLI(t, "--server", url, "consistency", itoa(newCP.Size), itoa(oldCP.Size)); err == nil || !strings.Contains(err.Error(), "400") {
		t.Fatalf("consistency with old > new: %v", err)
	}
}

func TestCLI_Errors(t *testing.T) {
	url, _, _ := startServer(t)
	if _, err := runCLI(t, "--server", url, "--credential", "", "--credential-file", "", "submit", "--type", "observe", "--target", "a"); err == nil || !strings.Contains(err.Error(), "no credential") {
		t.Fatalf("submit without credential: %v", err)
	}
	if _, err := runCLI(t, "--server", url, "--credential", "annal_wrong", "submit", "--type", "observe", "--target", "a"); err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("wrong credential: %v", err)
	}
	if _, err := runCLI(t, "--server", url, "proof", "x"); err == nil {
		t.Fatal("proof x accepted")
	}
	if _, err := runCLI(t, "--server", "ftp://x", "checkpoint"); err == nil {
		t.Fatal("ftp server URL accepted")
	}
}

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }

// annal submit --envelope runs the action under the envelope it names, not
// the oldest live one; an envelope that does not grant it is refused.
func TestCLI_SubmitUnderANamedEnvelope(t *testing.T) {
	url, credFile, _ := startServer(t)
	root := func(args ...string) string {
		t.Helper()
		out, err := runCLI(t, append([]string{"--server", url, "--credential-file", credFile}, args...)...)
		if err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
		return out
	}
	var agent api.Agent
	if err := json.Unmarshal([]byte(root("agents", "create", "--name", "two-budgets", "--purpose", "notes", "--trust", "0.8",
		"--grant", "workspace/**:create,mutate", "--energy", "1000")), &agent); err != nil {
		t.Fatal(err)
	}
	var first, second api.Envelope
	if err := json.Unmarshal([]byte(root("envelopes", "issue", "--holder", agent.ID, "--budget", "100", "--grant", "workspace/**:mutate")), &first); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(root("envelopes", "issue", "--holder", agent.ID, "--budget", "100", "--grant", "workspace/b/*:mutate")), &second); err != nil {
		t.Fatal(err)
	}
	submit := func(args ...string) (api.Receipt, error) {
		out, err := runCLI(t, append([]string{"--server", url, "--credential", agent.Credential, "submit", "--type", "mutate"}, args...)...)
		var r api.Receipt
		if err == nil {
			err = json.Unmarshal([]byte(out), &r)
		}
		return r, err
	}
	if r, err := submit("--target", "workspace/b/x"); err != nil || r.Envelope != first.ID {
		t.Fatalf("without --envelope: %+v %v (want the oldest, %s)", r, err, first.ID)
	}
	if r, err := submit("--target", "workspace/b/x", "--envelope", second.ID); err != nil || r.Envelope != second.ID {
		t.Fatalf("with --envelope %s: %+v %v", second.ID, r, err)
	}
	if _, err := submit("--target", "workspace/a/x", "--envelope", second.ID); err == nil || !strings.Contains(err.Error(), "envelope") {
		t.Fatalf("an envelope that does not grant the action: %v", err)
	}
}

// Seed 002's trace_id from the command line: annal continues the trace a
// --traceparent (or the environment's TRACEPARENT, OpenTelemetry's carrier
// for a process) names, so the event records its trace id and annal
// history --trace-id finds it; a traceparent that is not one is refused
// before anything is sent.
func TestCLI_TraceparentReachesTheEvent(t *testing.T) {
	url, credFile, k := startServer(t)
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	before := logSizeOf(t, k)
	for _, bad := range []string{"00-" + traceID, "00-00000000000000000000000000000000-00f067aa0ba902b7-01", "nonsense"} {
		if _, err := runCLI(t, "--server", url, "--credential-file", credFile, "--traceparent", bad, "submit", "--type", "observe", "--target", "workspace/t"); err == nil || !strings.Contains(err.Error(), "traceparent") {
			t.Errorf("--traceparent %q: %v", bad, err)
		}
	}
	if logSizeOf(t, k) != before {
		t.Fatal("a refused traceparent sent a request")
	}
	out, err := runCLI(t, "--server", url, "--credential-file", credFile, "--traceparent", "00-"+traceID+"-00f067aa0ba902b7-01",
		"submit", "--type", "observe", "--target", "workspace/traced")
	if err != nil || !strings.Contains(out, `"trace_id": "`+traceID+`"`) {
		t.Fatalf("submit with --traceparent: %v\n%s", err, out)
	}
	t.Setenv("TRACEPARENT", "00-"+traceID+"-b7ad6b7169203331-01")
	if _, err := runCLI(t, "--server", url, "--credential-file", credFile, "submit", "--type", "observe", "--target", "workspace/traced-env"); err != nil {
		t.Fatal(err)
	}
	hist, err := runCLI(t, "--server", url, "--credential-file", credFile, "history", "--trace-id", traceID, "--json")
	if err != nil || !strings.Contains(hist, "workspace/traced\"") || !strings.Contains(hist, "workspace/traced-env") {
		t.Fatalf("history --trace-id: %v\n%s", err, hist)
	}
}

func logSizeOf(t *testing.T, k *kernel.Kernel) uint64 {
	t.Helper()
	info, err := k.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return info.Size
}
