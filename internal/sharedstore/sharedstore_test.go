package sharedstore

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/annal-dev/annal/internal/servicestest"
)

func openOn(t *testing.T, a servicestest.AWS, dir string) (*Store, error) {
	t.Helper()
	s, err := Open(context.Background(), Config{DataDir: dir, DSN: a.DSN, S3: a.S3(), Bucket: a.Bucket})
	if err == nil {
		t.Cleanup(func() { s.Close() })
	}
	return s, err
}

// The first instance makes the KEK; a second instance without it, or with
// another one, refuses to start (it would seal what the others cannot
// open); with the copied file it opens what the first sealed.
func TestSharedStore_KEKMadeOnceAndCheckedOnEveryInstance(t *testing.T) {
	a := servicestest.NewAWS(t)
	first, second := t.TempDir(), t.TempDir()
	s1, err := openOn(t, a, first)
	if err != nil {
		t.Fatal(err)
	}
	if info, err := os.Stat(filepath.Join(first, KeyFile)); err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("the KEK file: %v %v", info, err)
	}
	if _, err := openOn(t, a, second); err == nil || !bytes.Contains([]byte(err.Error()), []byte("copy it from")) {
		t.Fatalf("an instance without the KEK opened: %v", err)
	}
	os.WriteFile(filepath.Join(second, KeyFile), bytes.Repeat([]byte{7}, 32), 0o600)
	if _, err := openOn(t, a, second); !errors.Is(err, ErrKEKMismatch) {
		t.Fatalf("an instance with another KEK: %v", err)
	}
	kek, _ := os.ReadFile(filepath.Join(first, KeyFile))
	os.WriteFile(filepath.Join(second, KeyFile), kek, 0o600)
	s2, err := openOn(t, a, second)
	if err != nil {
		t.Fatal(err)
	}
	wrapped := s1.WrapKey("alice", []byte("k"))
	if k, err := s2.UnwrapKey("alice", wrapped); err != nil || string(k) != "k" {
		t.Fatalf("the second instance unwraps: %q %v", k, err)
	}
	if _, err := s2.UnwrapKey("bob", wrapped); err == nil {
		t.Fatal("a key wrapped for alice unwrapped as bob's")
	}
	if s1.Name("blob", "x") != s2.Name("blob", "x") || s1.Name("blob", "x") == s1.Name("subject", "x") {
		t.Fatal("object names differ between instances, or across kinds")
	}
}

// DeleteAll removes every object under a prefix, and every version where
// the bucket keeps versions. versitygw's posix backend without a
// versioning folder (how .ci/services starts it) refuses to turn
// versioning on and lists each object once, as version "null": the test
// says which it met and checks that nothing is left either way.
func TestSharedStore_DeleteAllOnAStoreWithoutVersioning(t *testing.T) {
	a := servicestest.NewAWS(t)
	s, err := openOn(t, a, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	_, verr := a.S3().PutBucketVersioning(ctx, &s3.PutBucketVersioningInput{Bucket: aws.String(a.Bucket),
		VersioningConfiguration: &s3types.VersioningConfiguration{Status: s3types.BucketVersioningStatusEnabled}})
	t.Logf("turning versioning on: %v", verr)
	for _, v := range []string{"one", "two", "three"} {
		if err := s.Put(ctx, "sub/x", []byte(v)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Put(ctx, "sub/y", []byte("y")); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, "other", []byte("kept")); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Get(ctx, "sub/x", 100); err != nil || string(got) != "three" {
		t.Fatalf("get: %q %v", got, err)
	}
	vs, lerr := a.S3().ListObjectVersions(ctx, &s3.ListObjectVersionsInput{Bucket: aws.String(a.Bucket), Prefix: aws.String(Prefix + "sub/")})
	if lerr == nil {
		t.Logf("the server lists %d versions under sub/ (versioning on: %v)", len(vs.Versions), verr == nil)
	} else {
		t.Logf("the server lists no versions: %v", lerr)
	}
	if err := s.DeleteAll(ctx, "sub/"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, "sub/x", 100); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("sub/x after DeleteAll: %v", err)
	}
	if vs, err := a.S3().ListObjectVersions(ctx, &s3.ListObjectVersionsInput{Bucket: aws.String(a.Bucket), Prefix: aws.String(Prefix + "sub/")}); err == nil && len(vs.Versions)+len(vs.DeleteMarkers) > 0 {
		t.Fatalf("versions left after DeleteAll: %d versions, %d delete markers", len(vs.Versions), len(vs.DeleteMarkers))
	}
	if ok, err := s.Has(ctx, "other"); err != nil || !ok {
		t.Fatalf("DeleteAll removed an object outside its prefix: %v %v", ok, err)
	}
}

// Check, what a standby runs at start, makes nothing: it passes before any
// instance made the KEK and with the right one, and names the file to copy
// when the folder lacks it.
func TestSharedStore_CheckMakesNothing(t *testing.T) {
	a := servicestest.NewAWS(t)
	first, second := t.TempDir(), t.TempDir()
	ctx := context.Background()
	if err := Check(ctx, second, a.DSN); err != nil {
		t.Fatalf("before any instance made the key: %v", err)
	}
	if _, err := os.Stat(filepath.Join(second, KeyFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Check made a key: %v", err)
	}
	if _, err := openOn(t, a, first); err != nil {
		t.Fatal(err)
	}
	if err := Check(ctx, second, a.DSN); err == nil || !strings.Contains(err.Error(), "copy it from") {
		t.Fatalf("a folder without the key: %v", err)
	}
	if err := Check(ctx, first, a.DSN); err != nil {
		t.Fatalf("the first instance's folder: %v", err)
	}
}

// On a store that keeps versions (versitygw with a versioning folder,
// .ci/services), DeleteAll removes every version of every object under
// its prefix, and the delete markers: nothing of an erased subject's
// payloads stays readable by version id.
func TestSharedStore_DeleteAllRemovesEveryVersion(t *testing.T) {
	endpoint := os.Getenv("ANNAL_TEST_S3_VERSIONED_ENDPOINT")
	if endpoint == "" {
		if os.Getenv("ANNAL_REQUIRE_SERVICES") != "" {
			t.Fatal("ANNAL_TEST_S3_VERSIONED_ENDPOINT is not set: .ci/services start (or start-versioned-s3 DIR) starts a versitygw with versioning")
		}
		t.Skip("no S3 server with versioning: run .ci/services start DIR and source DIR/env")
	}
	a := servicestest.NewAWSAt(t, "", endpoint)
	ctx := context.Background()
	if _, err := a.S3().PutBucketVersioning(ctx, &s3.PutBucketVersioningInput{Bucket: aws.String(a.Bucket),
		VersioningConfiguration: &s3types.VersioningConfiguration{Status: s3types.BucketVersioningStatusEnabled}}); err != nil {
		t.Fatalf("turn versioning on: %v", err)
	}
	s, err := openOn(t, a, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"one", "two", "three"} {
		if err := s.Put(ctx, "sub/x", []byte(v)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Put(ctx, "sub/y", []byte("y")); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "sub/y"); err != nil { // a delete marker over y
		t.Fatal(err)
	}
	if err := s.Put(ctx, "other", []byte("kept")); err != nil {
		t.Fatal(err)
	}
	list := func(prefix string) *s3.ListObjectVersionsOutput {
		out, err := a.S3().ListObjectVersions(ctx, &s3.ListObjectVersionsInput{Bucket: aws.String(a.Bucket), Prefix: aws.String(Prefix + prefix)})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	before := list("sub/")
	if len(before.Versions) != 4 || len(before.DeleteMarkers) != 1 {
		t.Fatalf("the store keeps %d versions and %d delete markers, want 4 and 1", len(before.Versions), len(before.DeleteMarkers))
	}
	if err := s.DeleteAll(ctx, "sub/"); err != nil {
		t.Fatal(err)
	}
	if after := list("sub/"); len(after.Versions)+len(after.DeleteMarkers) != 0 {
		t.Fatalf("left after DeleteAll: %d versions, %d delete markers", len(after.Versions), len(after.DeleteMarkers))
	}
	for _, v := range before.Versions {
		if _, err := a.S3().GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(a.Bucket), Key: v.Key, VersionId: v.VersionId}); err == nil {
			t.Errorf("version %s of %s still reads", aws.ToString(v.VersionId), aws.ToString(v.Key))
		}
	}
	if ok, err := s.Has(ctx, "other"); err != nil || !ok {
		t.Fatalf("DeleteAll removed an object outside its prefix: %v %v", ok, err)
	}
}
