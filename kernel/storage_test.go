package kernel

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/annal-dev/annal/internal/servicestest"
	"github.com/annal-dev/annal/kernel/event"
	"github.com/annal-dev/annal/verifier"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

func awsConfig(t *testing.T, dir string, a servicestest.AWS) Config {
	cfg := testConfig(t, dir)
	cfg.CheckpointInterval = MinAWSCheckpointInterval
	cfg.Storage = Storage{AWS: &AWSStorage{DSN: a.DSN, Bucket: a.Bucket, Endpoint: a.Endpoint, AccessKey: a.AccessKey, SecretKey: a.SecretKey}}
	return cfg
}

// waitProof returns the tlog-proof of index once a checkpoint covers it.
func waitProof(t *testing.T, k *Kernel, index uint64) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := k.log.awaitPublished(ctx, index); err != nil {
		t.Fatalf("await a checkpoint covering %d: %v", index, err)
	}
	p, err := k.InclusionProof(ctx, index)
	if err != nil {
		t.Fatal(err)
	}
	return p.Marshal()
}

// A log on Tessera's AWS driver (MariaDB and an S3 server): actions are
// committed and proven, the kernel restarts on its state, a second data
// folder holding only the log's key folds the whole log from the bucket,
// and a data folder of another log is refused before it writes.
func TestAWSStorage_ActionsProofsRestartAndFoldFromBucket(t *testing.T) {
	a := servicestest.NewAWS(t)
	dir := t.TempDir()
	k, err := Open(awsConfig(t, dir, a))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	root := rootOf(t, k)
	var last *Receipt
	for i := 0; i < 5; i++ {
		if last, err = k.Submit(ctx, root, ActionRequest{Type: event.Mutate, Target: "workspace/notes.md"}); err != nil {
			t.Fatal(err)
		}
	}
	entry, err := k.Entry(ctx, last.Index)
	if err != nil {
		t.Fatal(err)
	}
	res, err := verifier.VerifyProof(entry, waitProof(t, k, last.Index), k.dir.VerifierKey)
	if err != nil || res.Index != last.Index {
		t.Fatalf("the proof of a bucket-stored entry: %+v %v", res, err)
	}
	// Tiles and the checkpoint are in the bucket, where readers find them.
	for _, key := range []string{"checkpoint", "tile/0/000.p/" + itoa(last.Index+1), "tile/entries/000.p/" + itoa(last.Index+1)} {
		if _, err := a.S3().GetObject(ctx, s3Get(a.Bucket, key)); err != nil {
			t.Errorf("the bucket has no %s: %v", key, err)
		}
	}
	if err := k.Close(); err != nil {
		t.Fatal(err)
	}

	k, err = Open(awsConfig(t, dir, a))
	if err != nil {
		t.Fatal(err)
	}
	rc, err := k.Submit(ctx, rootOf(t, k), ActionRequest{Type: event.Mutate, Target: "workspace/after-restart"})
	if err != nil || rc.Index != last.Index+1 {
		t.Fatalf("after a restart: %+v %v", rc, err)
	}
	want, _ := k.Actor(RootID)
	if err := k.Close(); err != nil {
		t.Fatal(err)
	}

	// Another machine: the log's key and root credential, no state.
	other := t.TempDir()
	for _, f := range []string{signingKeyFileName, verifierKeyName, originFileName, rootCredentialName} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(other, f), b, 0o600)
	}
	k2, err := Open(awsConfig(t, other, a))
	if err != nil {
		t.Fatal(err)
	}
	got, _ := k2.Actor(RootID)
	if got.Balance != want.Balance || got.Consumed != want.Consumed || k2.ledgerSize() != rc.Index+1 {
		t.Fatalf("folded from the bucket: root %+v, want %+v; size %d", got, want, k2.ledgerSize())
	}
	if diff, err := k2.stateMatchesReplay(ctx); err != nil || len(diff) > 0 {
		t.Fatalf("state differs from a replay: %v %v", diff, err)
	}
	if err := k2.Close(); err != nil {
		t.Fatal(err)
	}

	// A data folder of another log (its own key) is refused.
	if k3, err := Open(awsConfig(t, t.TempDir(), a)); err == nil {
		k3.Close()
		t.Fatal("a kernel with another log's key opened the bucket")
	}
}

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }

func s3Get(bucket, key string) *s3.GetObjectInput {
	return &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)}
}

func (k *Kernel) ledgerSize() uint64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.ledger.Size
}
