package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/annal-dev/annal/api"
	"github.com/annal-dev/annal/kernel/event"
)

// TestCLI_SigningKeys: keys generate, keys set --require-signed, then the
// agent's submit is signed with --signing-key, and without it refused.
func TestCLI_SigningKeys(t *testing.T) {
	url, credFile, k := startServer(t)
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "agent.key")
	vkey, err := runCLI(t, "keys", "generate", keyFile)
	if err != nil {
		t.Fatal(err)
	}
	vkey = strings.TrimSpace(vkey)
	if info, err := os.Stat(keyFile); err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("key file %v, %v: want mode 0600", info, err)
	}
	if _, err := runCLI(t, "keys", "generate", keyFile); err == nil {
		t.Fatal("keys generate overwrote a key file")
	}
	out, err := runCLI(t, "--server", url, "--credential-file", credFile, "agents", "create", "--name", "signer", "--purpose", "signs", "--trust", "0.8",
		"--grant", "workspace/**:create,mutate", "--energy", "100")
	if err != nil {
		t.Fatal(err)
	}
	var agent api.Agent
	if err := json.Unmarshal([]byte(out), &agent); err != nil {
		t.Fatal(err)
	}
	if _, err := runCLI(t, "--server", url, "--credential-file", credFile, "envelopes", "issue", "--holder", agent.ID,
		"--budget", "50", "--grant", "workspace/*:create"); err != nil {
		t.Fatal(err)
	}
	if _, err := runCLI(t, "--server", url, "--credential-file", credFile, "keys", "set", agent.ID, "@"+strings.TrimSuffix(keyFile, ".key")+".pub", "--require-signed"); err != nil {
		t.Fatal(err)
	}
	_, err = runCLI(t, "--server", url, "--credential", agent.Credential, "submit", "--type", "create", "--target", "workspace/a.md")
	if err == nil || !strings.Contains(err.Error(), "requires signed requests") {
		t.Fatalf("unsigned submit of a require-signed agent: %v", err)
	}
	out, err = runCLI(t, "--server", url, "--credential", agent.Credential, "--signing-key", keyFile, "submit", "--type", "create", "--target", "workspace/a.md")
	if err != nil {
		t.Fatal(err)
	}
	var r api.Receipt
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	raw, err := k.Entry(t.Context(), r.Index)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := event.Parse(raw)
	if err != nil || ev.Signed == nil || ev.Signed.By != agent.ID || !strings.HasPrefix(vkey, "annal-signing-key+"+ev.Signed.Key+"+") {
		t.Fatalf("signed submit logged %+v (%v), want signed by %s with key %s", ev.Signed, err, agent.ID, vkey)
	}
}
