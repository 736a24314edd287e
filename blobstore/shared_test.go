package blobstore

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/annal-dev/annal/format/oid"
	"github.com/annal-dev/annal/internal/servicestest"
	"github.com/annal-dev/annal/internal/sharedstore"
)

func openSharedStore(t *testing.T, a servicestest.AWS, dir string) *sharedstore.Store {
	t.Helper()
	s, err := sharedstore.Open(context.Background(), sharedstore.Config{DataDir: dir, DSN: a.DSN, S3: a.S3(), Bucket: a.Bucket})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// Blobs on shared storage: another instance (its own data folder, the
// copied key) serves what one stored; the same bytes are kept once; the
// quota counts every instance's blobs; the bucket holds only ciphertext,
// and an object changed there is refused as damaged, never served.
func TestSharedBlobs_EveryInstanceServesThemEncrypted(t *testing.T) {
	a := servicestest.NewAWS(t)
	dirA, dirB := t.TempDir(), t.TempDir()
	one, err := OpenShared(openSharedStore(t, a, dirA), filepath.Join(dirA, "blobs"), 1024, 2048)
	if err != nil {
		t.Fatal(err)
	}
	kek, _ := os.ReadFile(filepath.Join(dirA, sharedstore.KeyFile))
	os.WriteFile(filepath.Join(dirB, sharedstore.KeyFile), kek, 0o600)
	two, err := OpenShared(openSharedStore(t, a, dirB), filepath.Join(dirB, "blobs"), 1024, 2048)
	if err != nil {
		t.Fatal(err)
	}
	data := []byte("plaintext of a tool's output")
	id, n, err := one.Put(bytes.NewReader(data))
	if err != nil || id != oid.Of(data) || n != int64(len(data)) {
		t.Fatalf("Put: %s %d %v", id, n, err)
	}
	if got, err := two.Get(id); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("the other instance's Get: %q %v", got, err)
	}
	if _, _, err := two.Put(bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := two.Put(bytes.NewReader(bytes.Repeat([]byte{1}, 1024))); err != nil {
		t.Fatal(err)
	}
	// 28 + 1024 bytes are counted once each: 1000 more would pass 2048.
	if _, _, err := one.Put(bytes.NewReader(bytes.Repeat([]byte{2}, 1000))); !errors.Is(err, ErrQuota) {
		t.Fatalf("over the quota across instances: %v", err)
	}
	if _, _, err := one.Put(bytes.NewReader(make([]byte, 1025))); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("over the blob limit: %v", err)
	}
	if _, err := one.Get(oid.Of([]byte("never stored"))); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a blob never stored: %v", err)
	}
	ctx := context.Background()
	list, err := a.S3().ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(a.Bucket), Prefix: aws.String(sharedstore.Prefix + "blobs/")})
	if err != nil || len(list.Contents) != 2 {
		t.Fatalf("the bucket's blobs: %v %v", list, err)
	}
	key := list.Contents[0].Key
	for _, o := range list.Contents {
		out, err := a.S3().GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(a.Bucket), Key: o.Key})
		if err != nil {
			t.Fatal(err)
		}
		var raw bytes.Buffer
		raw.ReadFrom(out.Body)
		out.Body.Close()
		if bytes.Contains(raw.Bytes(), data) || bytes.Contains(raw.Bytes(), bytes.Repeat([]byte{1}, 64)) {
			t.Fatalf("%s holds plaintext", aws.ToString(o.Key))
		}
	}
	// Swap one object's bytes for the other's: it no longer decrypts.
	other := list.Contents[1].Key
	out, _ := a.S3().GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(a.Bucket), Key: other})
	var swapped bytes.Buffer
	swapped.ReadFrom(out.Body)
	out.Body.Close()
	if _, err := a.S3().PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(a.Bucket), Key: key, Body: bytes.NewReader(swapped.Bytes())}); err != nil {
		t.Fatal(err)
	}
	damaged := 0
	for _, id := range []string{oid.Of(data), oid.Of(bytes.Repeat([]byte{1}, 1024))} {
		if _, err := one.Get(id); errors.Is(err, ErrDamaged) {
			damaged++
		}
	}
	if damaged != 1 {
		t.Fatalf("%d blobs refused as damaged after one object was swapped", damaged)
	}
}

// A data folder's blobs (from before the log moved to shared storage) are
// moved there on start, and the folder removed; a blob whose bytes no
// longer match its name stops the start and stays.
func TestSharedBlobs_DataFolderBlobsMovedOnStart(t *testing.T) {
	a := servicestest.NewAWS(t)
	dir := t.TempDir()
	local := filepath.Join(dir, "blobs")
	disk, err := Open(local, 1024, 4096)
	if err != nil {
		t.Fatal(err)
	}
	data := []byte("kept before the move")
	id, _, err := disk.Put(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	bad, _, err := disk.Put(bytes.NewReader([]byte("to be damaged")))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(disk.path(bad), []byte("changed on disk"), 0o600)
	shared := openSharedStore(t, a, dir)
	if _, err := OpenShared(shared, local, 1024, 4096); !errors.Is(err, ErrDamaged) {
		t.Fatalf("a damaged blob in the folder: %v", err)
	}
	if _, err := os.Stat(disk.path(bad)); err != nil {
		t.Fatalf("the damaged blob was not left in the folder: %v", err)
	}
	os.Remove(disk.path(bad))
	s, err := OpenShared(shared, local, 1024, 4096)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(local); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the folder's blobs stayed: %v", err)
	}
	if got, err := s.Get(id); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("a moved blob: %q %v", got, err)
	}
}
