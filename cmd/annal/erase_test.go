package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/annal-dev/annal/api"
	"github.com/annal-dev/annal/kernel"
)

// TestCLI_SealAndErase: an agent created with --seal-payloads submits a
// payload, signed; the log holds its commitment, the history its plaintext;
// `annal erase` erases the subject and the history then says so.
func TestCLI_SealAndErase(t *testing.T) {
	url, credFile, k := startServer(t)
	keyFile := t.TempDir() + "/clerk.key"
	vkey, err := runCLI(t, "keys", "generate", keyFile)
	if err != nil {
		t.Fatal(err)
	}
	out, err := runCLI(t, "--server", url, "--credential-file", credFile, "agents", "create", "--name", "clerk", "--purpose", "keeps records", "--trust", "0.8",
		"--grant", "crm/**:create,mutate", "--energy", "100", "--seal-payloads")
	if err != nil {
		t.Fatal(err)
	}
	var agent api.Agent
	if err := json.Unmarshal([]byte(out), &agent); err != nil {
		t.Fatal(err)
	}
	if _, err := runCLI(t, "--server", url, "--credential-file", credFile, "envelopes", "issue", "--holder", agent.ID,
		"--budget", "50", "--grant", "crm/**:create"); err != nil {
		t.Fatal(err)
	}
	if _, err := runCLI(t, "--server", url, "--credential-file", credFile, "keys", "set", agent.ID, strings.TrimSpace(vkey)); err != nil {
		t.Fatal(err)
	}
	// Signed, the agent seals its payload itself: --subject names it.
	out, err = runCLI(t, "--server", url, "--credential", agent.Credential, "--signing-key", keyFile, "submit", "--type", "create",
		"--target", "crm/7.json", "--payload", `{"email":"carol@example.org"}`, "--subject", "customer-7")
	if err != nil {
		t.Fatal(err)
	}
	var r api.Receipt
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	entry, err := k.Entry(t.Context(), r.Index)
	if err != nil {
		t.Fatal(err)
	}
	if sp := kernel.SealedOf(entry); sp == nil || sp.Subject != "customer-7" || strings.Contains(string(entry), "carol@") || !strings.Contains(string(entry), `"signed":`) {
		t.Fatalf("entry %s", entry)
	}
	hist, err := runCLI(t, "--server", url, "--credential-file", credFile, "history", "--json", "--limit", "50")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(hist, "carol@example.org") {
		t.Fatalf("history does not show the sealed payload:\n%s", hist)
	}
	if _, err := runCLI(t, "--server", url, "--credential", agent.Credential, "erase", "customer-7"); err == nil || !strings.Contains(err.Error(), "human") {
		t.Fatalf("an agent erasing: %v", err)
	}
	out, err = runCLI(t, "--server", url, "--credential-file", credFile, "erase", "customer-7", "--reason", "request #12")
	if err != nil {
		t.Fatal(err)
	}
	hist, err = runCLI(t, "--server", url, "--credential-file", credFile, "history", "--json", "--limit", "50")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(hist, "carol@example.org") || !strings.Contains(hist, `"erased": true`) && !strings.Contains(hist, `"erased":true`) {
		t.Fatalf("history after erasure:\n%s", hist)
	}
}
