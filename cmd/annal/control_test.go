package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/annal-dev/annal/api"
)

// The execution control commands, run as a user types them, against a
// kernel: each prints the receipt and record, refusals name gate and rule.
func TestCLI_ExecutionControl(t *testing.T) {
	url, credFile, _ := startServer(t)
	root := func(args ...string) string {
		t.Helper()
		out, err := runCLI(t, append([]string{"--server", url, "--credential-file", credFile}, args...)...)
		if err != nil {
			t.Fatalf("annal %s: %v", strings.Join(args, " "), err)
		}
		return out
	}
	var agent api.Agent
	if err := json.Unmarshal([]byte(root("agents", "create", "--name", "w", "--purpose", "p", "--trust", "0.3",
		"--grant", "sessions/**:mutate", "--energy", "100")), &agent); err != nil {
		t.Fatal(err)
	}
	asAgent := func(args ...string) (string, error) {
		return runCLI(t, append([]string{"--server", url, "--credential", agent.Credential}, args...)...)
	}
	root("envelopes", "issue", "--holder", agent.ID, "--budget", "50", "--grant", "sessions/**:mutate")
	if out := root("rings", "list"); !strings.Contains(out, `"effective_ring": 3`) {
		t.Fatalf("rings list: %s", out)
	}
	root("rings", "assign", agent.ID, "--trust", "0.8", "--reason", "reviewed")
	root("sessions", "create", "--id", "s1", "--config", `{"isolation":"READ_COMMITTED"}`)
	root("sessions", "state", "s1", "handshaking")
	if _, err := asAgent("sessions", "join", "s1"); err != nil {
		t.Fatal(err)
	}
	root("sessions", "state", "s1", "active")
	if _, err := asAgent("submit", "--type", "mutate", "--target", "sessions/s1/a", "--session", "s1", "--fs-write", "sessions/s1/a"); err != nil {
		t.Fatal(err)
	}
	if _, err := asAgent("sessions", "delta", "s1", "--turn", "t1", "--change", "create:a.txt:sha256:"+strings.Repeat("ab", 32)); err != nil {
		t.Fatal(err)
	}
	if out, _ := asAgent("sessions", "rollback", "s1", "--turn", "t1"); !strings.Contains(out, "a.txt") {
		t.Fatalf("rollback: %s", out)
	}
	policy := filepath.Join(t.TempDir(), "p.json")
	if err := os.WriteFile(policy, []byte(`{"name":"nodrop","blocked_actions":[],"blocked_patterns":["drop\\s+table"],"signal_on_violation":false}`), 0o644); err != nil {
		t.Fatal(err)
	}
	root("policies", "set", "nodrop", "--spec", "@"+policy)
	root("policies", "attach", "nodrop", "--agent", agent.ID)
	_, err := asAgent("submit", "--type", "mutate", "--target", "sessions/s1/b", "--session", "s1", "--payload", `{"sql":"DROP TABLE x"}`)
	if err == nil || !strings.Contains(err.Error(), "policy nodrop") || !strings.Contains(err.Error(), "(policy)") {
		t.Fatalf("policy violation: %v", err)
	}
	root("quarantine", agent.ID, "--reason", "behavioral_drift", "--duration", "1m")
	if _, err := asAgent("submit", "--type", "observe", "--target", "sessions/s1/a", "--session", "s1"); err == nil || !strings.Contains(err.Error(), "quarantine") {
		t.Fatalf("quarantined agent: %v", err)
	}
	root("quarantine", "release", agent.ID)
	if _, err := asAgent("elevate", agent.ID, "--ring", "1", "--reason", "x"); err == nil || !strings.Contains(err.Error(), "insufficient_trust") {
		t.Fatalf("elevation: %v", err)
	}
	root("signal", agent.ID, "SIGSTOP")
	if _, err := asAgent("submit", "--type", "observe", "--target", "sessions/s1/a", "--session", "s1"); err == nil || !strings.Contains(err.Error(), "SIGSTOP") {
		t.Fatalf("stopped agent: %v", err)
	}
	if out := root("kill", agent.ID, "--reason", "manual"); !strings.Contains(out, `"terminated": false`) || !strings.Contains(out, `"revoked"`) {
		t.Fatalf("kill: %s", out)
	}
}

// TestAttack_CLISpecCaseVariantMember: JSON a user gives the command line is
// read as the server reads it. A saga spec with "Steps" beside "steps" was
// read by encoding/json (the variant winning) and sent on normalised, so
// the server never saw it; now the command refuses it and names the member.
// A descriptor's path is taken from "action_id" spelt exactly.
func TestAttack_CLISpecCaseVariantMember(t *testing.T) {
	url, credFile, k := startServer(t)
	run := func(args ...string) (string, error) {
		return runCLI(t, append([]string{"--server", url, "--credential-file", credFile}, args...)...)
	}
	info, _ := k.Info(context.Background())
	before := info.Size
	for _, tc := range []struct {
		args   []string
		member string
	}{
		{[]string{"sagas", "start", "--spec", `{"id":"sg","steps":[],"Steps":[{"id":"a","action":"x","compensation":"y"}]}`}, `"Steps"`},
		{[]string{"sagas", "start", "--spec", `{"id":"sg","ſession":"s","steps":[{"id":"a","action":"x","compensation":"y"}]}`}, `"ſession"`},
		{[]string{"sagas", "start", "--spec", `{"id":"sg","steps":[{"id":"a","action":"x","compensation":"y","Compensation":"z"}]}`}, `"Compensation"`},
		{[]string{"descriptors", "register", "--applies-to", "x/**:mutate", "--descriptor",
			`{"ACTION_ID":"d","name":"d","execute_api":"/d","reversibility":"NONE","is_read_only":false,"is_admin":false}`}, `"action_id"`},
	} {
		out, err := run(tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.member) {
			t.Errorf("annal %s: %q, %v; want an error naming %s", strings.Join(tc.args, " "), out, err, tc.member)
		}
	}
	if info, _ := k.Info(context.Background()); info.Size != before {
		t.Fatalf("log grew from %d to %d", before, info.Size)
	}
}
