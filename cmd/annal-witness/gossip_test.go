package main

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/annal-dev/annal/verifier"
	"github.com/annal-dev/annal/witness"
	"github.com/transparency-dev/merkle/rfc6962"
	"github.com/transparency-dev/merkle/testonly"
)

// TestServe_GossipFindsSplitAndEvidenceCommands: two running witnesses,
// made peers with "peers add", are shown two trees of one size by a log;
// "serve --gossip-interval" finds it, and "evidence list|get" hand out a
// file the offline verifier accepts.
func TestServe_GossipFindsSplitAndEvidenceCommands(t *testing.T) {
	l := newCmdTestLog(t, "example.com/log", 10)
	fork := &cmdTestLog{origin: l.origin, vkey: l.vkey, signer: l.signer, tree: testonly.New(rfc6962.DefaultHasher)}
	for i := range 10 {
		fork.tree.AppendData([]byte{byte(i), 'f'})
	}
	dirs := []string{filepath.Join(t.TempDir(), "w1"), filepath.Join(t.TempDir(), "w2")}
	var keys, urls []string
	for i, d := range dirs {
		k, u := startServeWith(t, serveFlags{data: d, name: "witness.test/cmd" + string(rune('1'+i)), gossipInterval: 50 * time.Millisecond, fastPost: i == 0})
		keys, urls = append(keys, k), append(urls, u)
		if out, err := run(t, "logs", "add", "--data", d, "--origin", l.origin, "--key", l.vkey); err != nil {
			t.Fatalf("logs add: %v\n%s", err, out)
		}
	}
	for i, d := range dirs {
		out, err := run(t, "peers", "add", "--data", d, "--url", urls[1-i], "--key", keys[1-i])
		if err != nil || !strings.Contains(out, "gossiping with witness.test/cmd") {
			t.Fatalf("peers add: %v\n%s", err, out)
		}
	}
	if out, err := run(t, "peers", "list", "--data", dirs[0]); err != nil || !strings.Contains(out, "witness.test/cmd2\n  url  "+urls[1]) {
		t.Errorf("peers list: %v\n%s", err, out)
	}
	body, _ := l.request(t, 0, 10)
	if status, answer := post(t, urls[0], body); status != http.StatusOK {
		t.Fatalf("add-checkpoint: %d %q", status, answer)
	}
	body, _ = fork.request(t, 0, 10)
	if status, answer := post(t, urls[1], body); status != http.StatusOK {
		t.Fatalf("add-checkpoint: %d %q", status, answer)
	}

	var list []witness.EvidenceRecord
	for deadline := time.Now().Add(10 * time.Second); len(list) == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no evidence after 10 s of gossip")
		}
		out, err := run(t, "evidence", "list", "--data", dirs[0], "--json")
		if err != nil {
			t.Fatalf("evidence list: %v\n%s", err, out)
		}
		if err := json.Unmarshal([]byte(out), &list); err != nil {
			t.Fatalf("evidence list --json: %v\n%s", err, out)
		}
	}
	if len(list) != 1 || list[0].Source != witness.EvidenceFromGossip || list[0].Sizes != [2]uint64{10, 10} {
		t.Fatalf("evidence %+v", list)
	}
	out, err := run(t, "evidence", "get", "--data", dirs[0], list[0].ID)
	if err != nil {
		t.Fatalf("evidence get: %v", err)
	}
	if _, err := verifier.VerifyEvidence([]byte(out), l.vkey); err != nil {
		t.Errorf("evidence get output does not verify: %v\n%s", err, out)
	}
	if out, err := run(t, "evidence", "list", "--data", dirs[0]); err != nil || !strings.Contains(out, list[0].ID+"\n  log    example.com/log\n  sizes  10 and 10") {
		t.Errorf("evidence list: %v\n%s", err, out)
	}
	resp, err := http.Get(urls[1] + "/evidence/" + list[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("the other witness does not serve the same evidence: %d", resp.StatusCode)
	}
	if out, err := run(t, "peers", "remove", "--data", dirs[0], "--name", "witness.test/cmd2"); err != nil {
		t.Errorf("peers remove: %v\n%s", err, out)
	}
}

func TestPeersAndEvidence_WhileStopped(t *testing.T) {
	data := filepath.Join(t.TempDir(), "w")
	if _, err := run(t, "peers", "list", "--data", data); err == nil || !strings.Contains(err.Error(), "no witness data folder") {
		t.Errorf("list without a folder: %v", err)
	}
	vkey, _ := startServeWith(t, serveFlags{data: filepath.Join(t.TempDir(), "peer"), name: "witness.test/peer"})
	if out, err := run(t, "peers", "add", "--data", data, "--url", "https://peer.example/", "--key", vkey); err != nil {
		t.Fatalf("peers add: %v\n%s", err, out)
	}
	if _, err := run(t, "peers", "add", "--data", data, "--url", "https://peer.example/", "--key", vkey); err == nil || !strings.Contains(err.Error(), "already configured") {
		t.Errorf("second add: %v", err)
	}
	if _, err := run(t, "peers", "add", "--data", data, "--url", "https://peer.example/", "--key", newCmdTestLog(t, "example.com/log", 0).vkey); err == nil || !strings.Contains(err.Error(), "cosignature/v1") {
		t.Errorf("a log key as peer key: %v", err)
	}
	out, err := run(t, "peers", "list", "--data", data, "--json")
	if err != nil || !strings.Contains(out, `"name": "witness.test/peer"`) {
		t.Errorf("peers list --json: %v\n%s", err, out)
	}
	if out, err := run(t, "evidence", "list", "--data", data); err != nil || out != "no evidence\n" {
		t.Errorf("evidence list: %v %q", err, out)
	}
	if _, err := run(t, "evidence", "get", "--data", data, strings.Repeat("0", 64)); err == nil || !strings.Contains(err.Error(), "unknown evidence") {
		t.Errorf("evidence get unknown: %v", err)
	}
	if _, err := run(t, "peers", "remove", "--data", data, "--name", "witness.test/peer"); err != nil {
		t.Error(err)
	}
	if _, err := run(t, "peers", "remove", "--data", data, "--name", "witness.test/peer"); err == nil || !strings.Contains(err.Error(), "unknown peer") {
		t.Errorf("second remove: %v", err)
	}
}
