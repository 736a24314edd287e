package main

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/annal-dev/annal/api"
	"github.com/annal-dev/annal/client"
)

// TestCLI_HoldAnswerReasonShown: `annal holds approve --reason` logs the
// reason with the approved action and prints it; `annal history` shows
// it beside the event; an approval refused on re-check fails and names
// where the log holds the refusal.
func TestCLI_HoldAnswerReasonShown(t *testing.T) {
	ctx := context.Background()
	url, credFile, _ := startServer(t)
	rootCred, err := os.ReadFile(credFile)
	if err != nil {
		t.Fatal(err)
	}
	root, err := client.New(url, strings.TrimSpace(string(rootCred)))
	if err != nil {
		t.Fatal(err)
	}
	grants := []api.Grant{{Pattern: "workspace/**", Actions: []string{"mutate"}}}
	trust := 0.9
	a, err := root.CreateAgent(ctx, api.AgentRequest{Name: "mailer", Purpose: "sends mail", Energy: 1000, Trust: &trust, Grants: grants})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := root.IssueEnvelope(ctx, api.EnvelopeRequest{Holder: a.ID, Budget: 1000, Grants: grants, HoldOn: grants}); err != nil {
		t.Fatal(err)
	}
	agent, err := client.New(url, a.Credential)
	if err != nil {
		t.Fatal(err)
	}
	held := func(target string) string {
		t.Helper()
		rc, err := agent.Submit(ctx, api.ActionRequest{Type: "mutate", Target: target})
		if err != nil || rc.Status != "held" {
			t.Fatalf("submit: %+v %v", rc, err)
		}
		return rc.HoldID
	}
	cli := func(args ...string) (string, error) {
		return runCLI(t, append([]string{"--server", url, "--credential-file", credFile}, args...)...)
	}
	const reason = "Erin confirmed the address"
	out, err := cli("holds", "approve", held("workspace/outbox/1"), "--reason", reason)
	if err != nil {
		t.Fatal(err)
	}
	var rc map[string]any
	if err := json.Unmarshal([]byte(out), &rc); err != nil || rc["status"] != "committed" || rc["reason"] != reason {
		t.Fatalf("holds approve printed %q (%v), want the committed receipt with the reason", out, err)
	}
	table, err := cli("history", "--limit", "5")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(table, "approved by root: "+reason) {
		t.Fatalf("the history does not show the approval's reason:\n%s", table)
	}
	// Frozen while held: the approval fails, naming the refusal's index.
	id := held("workspace/outbox/2")
	if _, err := root.SetStatus(ctx, a.ID, "frozen", "review"); err != nil {
		t.Fatal(err)
	}
	out, err = cli("holds", "approve", id, "--reason", reason)
	if err == nil || !strings.Contains(err.Error(), "refused on re-check") || !strings.Contains(err.Error(), "recorded in the log at index") {
		t.Fatalf("approving a frozen agent's hold printed %q, %v; want a failure naming the refusal's index", out, err)
	}
	if table, err = cli("history", "--limit", "5"); err != nil || !strings.Contains(table, "refused on re-check") {
		t.Fatalf("the history does not show the refused approval (%v):\n%s", err, table)
	}
}
