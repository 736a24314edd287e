package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/annal-dev/annal/format/bundle"
	"github.com/annal-dev/annal/kernel"
	"github.com/annal-dev/annal/verifier"
)

func TestCLI_Export(t *testing.T) {
	url, credFile, k := startServer(t)
	ctx := context.Background()
	raw, _ := os.ReadFile(credFile)
	root, err := k.Authenticate(strings.TrimSpace(string(raw)))
	if err != nil {
		t.Fatal(err)
	}
	for range 4 {
		if _, err := k.Submit(ctx, root, kernel.ActionRequest{Type: "mutate", Target: "workspace/x"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := k.AwaitInclusionProof(ctx, 4); err != nil {
		t.Fatal(err)
	}
	p, err := verifier.KeyPolicy(k.VerifierKey())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "audit.bundle")
	if _, err := runCLI(t, "--server", url, "--credential-file", credFile, "export", "--from", "1", "--to", "4", "-o", file); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(file)
	res, err := verifier.VerifyBundle(bytes.NewReader(b), p, nil)
	if err != nil || res.Events != 3 || res.Proof != bundle.ProofRange {
		t.Fatalf("exported bundle: %+v, %v", res, err)
	}
	out, err := runCLI(t, "--server", url, "--credential-file", credFile, "export", "--actor", "root", "--kind", "action", "--old-size", "2")
	if err != nil {
		t.Fatal(err)
	}
	res, err = verifier.VerifyBundle(strings.NewReader(out), p, nil)
	if err != nil || res.Events != 4 || res.Proof != bundle.ProofInclusion || res.OldSize != 2 {
		t.Fatalf("exported bundle on stdout: %+v, %v", res, err)
	}
	if _, err := runCLI(t, "--server", url, "--credential-file", credFile, "export", "--actor", "nobody", "-o", filepath.Join(dir, "none")); err == nil {
		t.Fatal("an export of no event succeeded")
	}
	if _, err := os.Stat(filepath.Join(dir, "none")); !os.IsNotExist(err) {
		t.Fatalf("a failed export left a file: %v", err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("the export folder holds %d files, want only the bundle", len(entries))
	}
}

func TestProgressReader(t *testing.T) {
	bundle := `{"proof":"range","selection":{"from":2,"to":6}}` + "\n" + strings.Repeat(`{"entry":"eA==","index":2}`+"\n", 4) + `{"end":"x","events":4}` + "\n"
	var status bytes.Buffer
	pr := &progressReader{r: strings.NewReader(bundle), w: &status}
	var sink bytes.Buffer
	if _, err := sink.ReadFrom(pr); err != nil {
		t.Fatal(err)
	}
	pr.done()
	if sink.String() != bundle || !strings.Contains(status.String(), "100.0%  4 of 4 events") {
		t.Fatalf("status %q", status.String())
	}
}
