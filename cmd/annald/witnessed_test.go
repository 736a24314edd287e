package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/annal-dev/annal/api"
	"github.com/annal-dev/annal/verifier"
)

// witnessProcess is one running annal-witness.
type witnessProcess struct {
	url, vkey string
	mldsaKey  string // its ML-DSA-44 verifier key
}

func startWitness(t *testing.T, dataDir string) *witnessProcess {
	t.Helper()
	cmd := exec.Command(witnessBinary, "serve", "--data", dataDir, "--listen", "127.0.0.1:0", "--name", "witness.example/"+filepath.Base(dataDir))
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	})
	w := &witnessProcess{}
	sc := bufio.NewScanner(stdout)
	deadline := time.Now().Add(30 * time.Second)
	for w.url == "" && time.Now().Before(deadline) && sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "annal-witness: verifier key "); ok {
			w.vkey = v
		} else if v, ok := strings.CutPrefix(line, "annal-witness: ML-DSA-44 verifier key "); ok {
			w.mldsaKey = v
		} else if v, ok := strings.CutPrefix(line, "annal-witness: listening on "); ok {
			w.url = v
		}
	}
	if w.url == "" || w.vkey == "" || w.mldsaKey == "" {
		t.Fatalf("annal-witness did not start; stderr:\n%s", stderr)
	}
	go func() {
		for sc.Scan() {
		}
	}()
	return w
}

// TestWitnessedCheckpoints: annald with --witness-policy naming two
// annal-witness processes (quorum: both) publishes only cosigned
// checkpoints, and its proofs verify offline under the policy. The policy
// names w1 by its Ed25519 key and w2 by its ML-DSA-44 key: Tessera's
// witness client, annald and annal-verify take the post-quantum
// cosignature as the witness's.
func TestWitnessedCheckpoints(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tmp := t.TempDir()
	dataDir := filepath.Join(tmp, "annal-data")
	// First start creates the log key the witnesses must know.
	d := startDaemon(t, dataDir, "--origin", "example.com/annal/witnessed")
	origin, vkey := d.origin, d.vkey
	d.stop(t)

	var policy strings.Builder
	fmt.Fprintf(&policy, "log %s\n", vkey)
	for _, name := range []string{"w1", "w2"} {
		wdir := filepath.Join(tmp, name)
		if out, err := exec.Command(witnessBinary, "logs", "add", "--data", wdir, "--origin", origin, "--key", vkey).CombinedOutput(); err != nil {
			t.Fatalf("logs add: %v\n%s", err, out)
		}
		w := startWitness(t, wdir)
		key := w.vkey
		if name == "w2" {
			key = w.mldsaKey
		}
		fmt.Fprintf(&policy, "witness %s %s %s\n", name, key, w.url)
	}
	policy.WriteString("group both all w1 w2\nquorum both\n")
	policyFile := filepath.Join(tmp, "policy.txt")
	if err := os.WriteFile(policyFile, []byte(policy.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := verifier.ParsePolicy([]byte(policy.String()))
	if err != nil {
		t.Fatal(err)
	}

	d = startDaemon(t, dataDir, "--witness-policy", policyFile)
	root := d.client(t, d.rootCredential(t))
	var last *api.Receipt
	for i := range 5 {
		r, err := root.Submit(ctx, api.ActionRequest{Type: "create", Target: fmt.Sprintf("workspace/w/%d", i), Payload: json.RawMessage(`{"ok":true}`)})
		if err != nil {
			t.Fatal(err)
		}
		last = r
	}
	proof, err := root.WaitProof(ctx, last.Index)
	if err != nil {
		t.Fatal(err)
	}
	entry, err := root.Event(ctx, last.Index)
	if err != nil {
		t.Fatal(err)
	}
	_, pr, err := verifier.VerifyProofWithPolicy(entry, proof, p)
	if err != nil {
		t.Fatalf("proof under the policy: %v", err)
	}
	if strings.Join(pr.Cosigners, ",") != "w1,w2" {
		t.Fatalf("cosigned by %v", pr.Cosigners)
	}
	// The published checkpoint itself carries both cosignatures.
	cp, err := root.Checkpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.OpenCheckpoint(cp); err != nil {
		t.Fatalf("published checkpoint: %v", err)
	}
	// An audit bundle of the whole log carries the cosigned checkpoint.
	body, err := root.Bundle(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer body.Close()
	br, err := verifier.VerifyBundle(body, p, nil)
	if err != nil {
		t.Fatalf("bundle under the policy: %v", err)
	}
	if strings.Join(br.Cosigners, ",") != "w1,w2" || br.Events != br.Size {
		t.Fatalf("bundle: %d of %d events, cosigned by %v", br.Events, br.Size, br.Cosigners)
	}
}
