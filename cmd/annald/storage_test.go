package main

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/annal-dev/annal/internal/servicestest"
	"github.com/annal-dev/annal/logserver/api"
	"github.com/annal-dev/annal/verifier"
)

// startAWSDaemon runs annald on a data folder with its log in a's database
// and bucket, configured through the documented environment.
func startAWSDaemon(t *testing.T, dataDir string, a servicestest.AWS, args ...string) *daemon {
	t.Helper()
	t.Setenv("ANNAL_STORAGE", "aws")
	t.Setenv("ANNAL_DB_DSN", a.DSN)
	t.Setenv("ANNAL_S3_BUCKET", a.Bucket)
	t.Setenv("ANNAL_S3_ENDPOINT", a.Endpoint)
	t.Setenv("AWS_ACCESS_KEY_ID", a.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", a.SecretKey)
	return startDaemon(t, dataDir, args...)
}

// annald on Tessera's AWS driver: actions, proofs checked offline, an audit
// bundle verified whole, and `annald audit` over annald's own tile
// endpoints, which serve the log from the bucket.
func TestServeOnAWSStorage(t *testing.T) {
	a := servicestest.NewAWS(t)
	d := startAWSDaemon(t, t.TempDir(), a, "--checkpoint-interval", "1s")
	if !strings.HasPrefix(d.storage, "aws (bucket "+a.Bucket) {
		t.Errorf("annald says its storage is %q", d.storage)
	}
	ctx := context.Background()
	root := d.client(t, d.rootCredential(t))
	trust := 0.8
	agent, err := root.CreateAgent(ctx, api.AgentRequest{Name: "a", Purpose: "aws", Energy: 1000, Trust: &trust,
		Grants: []api.Grant{{Pattern: "workspace/**", Actions: []string{"mutate"}}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := root.IssueEnvelope(ctx, api.EnvelopeRequest{Holder: agent.ID, Budget: 500, Grants: []api.Grant{{Pattern: "workspace/**", Actions: []string{"mutate"}}}}); err != nil {
		t.Fatal(err)
	}
	ac := d.client(t, agent.Credential)
	var last *api.Receipt
	for i := 0; i < 10; i++ {
		if last, err = ac.Submit(ctx, api.ActionRequest{Type: "mutate", Target: "workspace/notes.md"}); err != nil {
			t.Fatal(err)
		}
	}
	entry, err := ac.Event(ctx, last.Index)
	if err != nil {
		t.Fatal(err)
	}
	proof, err := ac.WaitProof(ctx, last.Index)
	if err != nil {
		t.Fatal(err)
	}
	if res, err := verifier.VerifyProof(entry, proof, d.vkey); err != nil || res.Index != last.Index {
		t.Fatalf("proof: %+v %v", res, err)
	}
	body, err := root.Bundle(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer body.Close()
	p, err := verifier.ParsePolicy([]byte("log " + d.vkey + "\nquorum none\n"))
	if err != nil {
		t.Fatal(err)
	}
	br, err := verifier.VerifyBundle(body, p, nil)
	if err != nil || br.Events != br.Size || br.Size < last.Index+1 {
		t.Fatalf("bundle: %+v %v", br, err)
	}
	keyFile := t.TempDir() + "/log.pub"
	os.WriteFile(keyFile, []byte(d.vkey), 0o644)
	out, err := exec.Command(annaldBinary, "audit", "--url", d.url, "--key", "@"+keyFile).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "replayed") {
		t.Fatalf("annald audit over the bucket-served tiles: %v\n%s", err, out)
	}
}
