package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"math"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/transparency-dev/merkle/rfc6962"
	tapi "github.com/transparency-dev/tessera/api"
	tclient "github.com/transparency-dev/tessera/client"
	"github.com/transparency-dev/tessera/fsck"
	"golang.org/x/mod/sumdb/note"

	"github.com/annal-dev/annal/api"
	"github.com/annal-dev/annal/client"
	"github.com/annal-dev/annal/internal/servicestest"
	"github.com/annal-dev/annal/kernel"
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

	// Anyone reads the log straight from the bucket (made public-read, as
	// DEPLOYING.md says): Tessera's fsck and annald audit pass over it.
	policy := `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":"*","Action":["s3:GetObject"],"Resource":["arn:aws:s3:::` + a.Bucket + `/*"]}]}`
	if _, err := a.S3().PutBucketPolicy(ctx, &s3.PutBucketPolicyInput{Bucket: aws.String(a.Bucket), Policy: aws.String(policy)}); err != nil {
		t.Fatal(err)
	}
	bucketURL := a.Endpoint + "/" + a.Bucket + "/"
	fetcher, err := tclient.NewHTTPFetcher(must(url.Parse(bucketURL)), nil)
	if err != nil {
		t.Fatal(err)
	}
	v, err := note.NewVerifier(d.vkey)
	if err != nil {
		t.Fatal(err)
	}
	f := fsck.New(v.Name(), v, fetcher, bundleLeaves, fsck.Opts{N: 2})
	if err := f.Check(ctx); err != nil {
		t.Fatalf("Tessera's fsck over the bucket %s: %v", bucketURL, err)
	}
	out, err = exec.Command(annaldBinary, "audit", "--url", bucketURL, "--key", "@"+keyFile).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "replayed") {
		t.Fatalf("annald audit straight from the bucket: %v\n%s", err, out)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// bundleLeaves parses an entry bundle into its RFC 6962 leaf hashes, for
// fsck.
func bundleLeaves(raw []byte) ([][]byte, error) {
	var b tapi.EntryBundle
	if err := b.UnmarshalText(raw); err != nil {
		return nil, err
	}
	out := make([][]byte, len(b.Entries))
	for i, e := range b.Entries {
		out[i] = rfc6962.DefaultHasher.HashLeaf(e)
	}
	return out, nil
}

// copyIdentity gives a second machine the log's key, origin and root
// credential, and nothing else.
func copyIdentity(t *testing.T, from string) string {
	t.Helper()
	to := t.TempDir()
	if err := kernel.CopyIdentity(from, to); err != nil {
		t.Fatal(err)
	}
	return to
}

// ack is a receipt a kernel gave: the entry it says is at index.
type ack struct {
	index uint64
	leaf  string
	by    string
}

// load submits actions as root to url from n clients until stop closes,
// and sends every receipt it was given.
func load(t *testing.T, url, cred, by string, n int, stop <-chan struct{}, acks chan<- ack) *sync.WaitGroup {
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := client.New(url, cred)
			if err != nil {
				return
			}
			c = c.WithHTTPClient(&http.Client{Timeout: 2 * time.Second}).WithRetry(client.RetryPolicy{Attempts: 1})
			for j := 0; j < 5000; j++ {
				select {
				case <-stop:
					return
				default:
				}
				rc, err := c.Submit(context.Background(), api.ActionRequest{Type: "mutate", Target: "workspace/load"})
				if err != nil {
					time.Sleep(20 * time.Millisecond)
					continue
				}
				acks <- ack{rc.Index, rc.LeafHash, by}
			}
		}()
	}
	return &wg
}

// checkAcks: every receipt is in the log at its index with its leaf hash,
// and all of the first kernel's come before all of the second's.
func checkAcks(t *testing.T, c *client.Client, acks []ack, first, second string) {
	t.Helper()
	ctx := context.Background()
	var lastFirst, firstSecond uint64 = 0, math.MaxUint64
	for _, a := range acks {
		entry, err := c.Event(ctx, a.index)
		if err != nil {
			t.Fatalf("receipt %d by %s: %v", a.index, a.by, err)
		}
		leaf := sha256.Sum256(append([]byte{0}, entry...))
		if hex.EncodeToString(leaf[:]) != a.leaf {
			t.Fatalf("receipt %d by %s: the log holds another entry there", a.index, a.by)
		}
		switch a.by {
		case first:
			lastFirst = max(lastFirst, a.index)
		case second:
			firstSecond = min(firstSecond, a.index)
		}
	}
	if lastFirst >= firstSecond {
		t.Fatalf("%s acknowledged %d after %s's first %d: both appended", first, lastFirst, second, firstSecond)
	}
}

// The active kernel is paused (SIGSTOP) under load past its lease: the
// standby takes over, serves, and when the old kernel is resumed it cannot
// append (the fence) and stops, saying it lost the lease. Every receipt
// either gave is in the log; the first kernel's all come before the
// second's; the log audits clean.
func TestStandbyTakesOverFromAPausedKernel(t *testing.T) {
	a := servicestest.NewAWS(t)
	dirA := t.TempDir()
	lease := []string{"--lease-ttl", "2s", "--checkpoint-interval", "1s"}
	active := startAWSDaemon(t, dirA, a, append(lease, "--lease-holder", "kernel-a")...)
	cred := active.rootCredential(t)
	standby := startAWSDaemon(t, copyIdentity(t, dirA), a, append(lease, "--lease-holder", "kernel-b")...)
	if !standby.standby {
		t.Fatal("the second annald did not start as a standby")
	}
	waitFollowing(t, standby.url) // a standby serves reads as a follower

	acks := make(chan ack, 100000)
	stopA := make(chan struct{})
	loadA := load(t, active.url, cred, "a", 4, stopA, acks)
	time.Sleep(1500 * time.Millisecond)
	if err := active.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	paused := time.Now()
	took := standby.waitActive(t, 60*time.Second)
	t.Logf("takeover %v after the pause (lease 2s)", time.Since(paused).Round(time.Millisecond))
	_ = took
	stopB := make(chan struct{})
	loadB := load(t, standby.url, cred, "b", 4, stopB, acks)
	time.Sleep(time.Second)
	if err := active.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-active.exited:
		active.exited <- err
		if err == nil || !strings.Contains(active.stderr.String(), "lost the write lease") {
			t.Errorf("the resumed kernel exited with %v; stderr:\n%s", err, active.stderr)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("the resumed kernel kept running after it lost the lease; stderr:\n%s", active.stderr)
	}
	close(stopA)
	time.Sleep(500 * time.Millisecond)
	close(stopB)
	loadA.Wait()
	loadB.Wait()
	close(acks)
	var all []ack
	byB := 0
	for a := range acks {
		all = append(all, a)
		if a.by == "b" {
			byB++
		}
	}
	if len(all) == 0 || byB == 0 {
		t.Fatalf("%d receipts, %d by the new kernel", len(all), byB)
	}
	checkAcks(t, standby.client(t, cred), all, "a", "b")
	keyFile := filepath.Join(t.TempDir(), "log.pub")
	os.WriteFile(keyFile, []byte(standby.vkey), 0o644)
	out, err := exec.Command(annaldBinary, "audit", "--url", standby.url, "--key", "@"+keyFile).CombinedOutput()
	if err != nil {
		t.Fatalf("annald audit after the takeover: %v\n%s", err, out)
	}
}

// The active kernel is killed (SIGKILL) under load: the standby takes over
// once the lease expires, and every receipt the dead kernel gave is in the
// log it serves.
func TestStandbyTakesOverFromAKilledKernel(t *testing.T) {
	a := servicestest.NewAWS(t)
	dirA := t.TempDir()
	lease := []string{"--lease-ttl", "2s", "--checkpoint-interval", "1s"}
	active := startAWSDaemon(t, dirA, a, append(lease, "--lease-holder", "kernel-a")...)
	cred := active.rootCredential(t)
	standby := startAWSDaemon(t, copyIdentity(t, dirA), a, append(lease, "--lease-holder", "kernel-b")...)
	acks := make(chan ack, 100000)
	stop := make(chan struct{})
	loadA := load(t, active.url, cred, "a", 8, stop, acks)
	time.Sleep(1500 * time.Millisecond)
	active.kill(t)
	killed := time.Now()
	standby.waitActive(t, 60*time.Second)
	t.Logf("takeover %v after the kill (lease 2s)", time.Since(killed).Round(time.Millisecond))
	close(stop)
	loadA.Wait()
	stop = make(chan struct{})
	loadB := load(t, standby.url, cred, "b", 2, stop, acks)
	time.Sleep(500 * time.Millisecond)
	close(stop)
	loadB.Wait()
	close(acks)
	var all []ack
	for a := range acks {
		all = append(all, a)
	}
	checkAcks(t, standby.client(t, cred), all, "a", "b")
	t.Logf("%d receipts checked", len(all))
	keyFile := filepath.Join(t.TempDir(), "log.pub")
	os.WriteFile(keyFile, []byte(standby.vkey), 0o644)
	if out, err := exec.Command(annaldBinary, "audit", "--url", standby.url, "--key", "@"+keyFile).CombinedOutput(); err != nil {
		t.Fatalf("annald audit after the takeover: %v\n%s", err, out)
	}
}
