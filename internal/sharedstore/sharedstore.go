// Package sharedstore is what every kernel instance of a log on shared
// storage (Tessera's AWS driver: a MySQL/MariaDB database and an S3
// bucket) reaches besides the log: the sealed payloads and their subjects'
// keys (kernel/internal/sealstore), the blobs and the agent file system's
// files (blobstore), and the console's sign-in sessions (server). Kept
// here rather than in one instance's data folder, a takeover, or another
// instance behind a load balancer, opens a sealed payload, serves a blob
// and keeps an overseer signed in, and an erasure on one instance holds
// for all of them.
//
// The bucket is treated as public: DEPLOYING.md lets operators make it
// public-read for the tiles. So nothing private goes into it in the clear,
// and no object's name says anything either:
//
//   - a key-encryption key (KEK), 32 random bytes in the data folder's
//     shared.key (0600), made by the first instance and copied to every
//     other one like log.key, never leaves the data folders. Keys derived
//     from it (HMAC-SHA256 under distinct labels) wrap the subjects' keys,
//     encrypt blobs and console sessions (AES-256-GCM, with what the
//     ciphertext stands for as additional data, so that one cannot be
//     passed off as another), and name objects;
//   - private objects live under private/, named by an HMAC of what they
//     hold (a subject, a commitment, a blob's OID): a listing of a
//     public bucket shows neither subjects nor the hashes of known files;
//   - small secrets live in the database (private to the instances): a
//     subject's key wrapped by the KEK, a session's credential sealed by
//     it. The database holds a fingerprint of the KEK, so that an
//     instance started with another shared.key (or none copied) refuses
//     to start rather than seal under a key the others cannot open.
//
// Erasure removes every copy the store can reach: DeleteAll removes every
// version of every object under a prefix where the bucket keeps versions
// (ListObjectVersions, DeleteObject with each VersionId), and falls back
// to a plain listing where the server does not list versions.
package sharedstore

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	_ "github.com/go-sql-driver/mysql" // the database/sql driver of the DSN

	"github.com/annal-dev/annal/internal/atomicfile"
)

// KeyFile is the key-encryption key's file in the data folder.
const KeyFile = "shared.key"

// Prefix is where the private objects live in the bucket.
const Prefix = "private/"

// Timeout bounds one call on the database or the bucket made by a store
// method that takes no context (the sealed store's and blob store's).
const Timeout = 30 * time.Second

// Config names the database and the bucket.
type Config struct {
	// DataDir is the data folder, where shared.key lives.
	DataDir string
	// DSN is the database (go-sql-driver/mysql form).
	DSN string
	// S3 is a client of the bucket's server.
	S3     *s3.Client
	Bucket string
}

// Store is the shared store of a log. Its methods are safe for concurrent
// use.
type Store struct {
	DB     *sql.DB
	s3     *s3.Client
	bucket string
	// wrap, blobs, sessions are AEADs under keys derived from the KEK;
	// names keys the HMAC that names objects.
	wrap, blobs, sessions cipher.AEAD
	names                 []byte
}

// schema is the store's tables. A subject's row with a NULL key is an
// erased subject: nothing more is sealed under it, on any instance.
var schema = []string{
	`CREATE TABLE IF NOT EXISTS annal_shared_kek (id TINYINT PRIMARY KEY, fingerprint BINARY(32) NOT NULL)`,
	`CREATE TABLE IF NOT EXISTS annal_sealed_keys (subject VARCHAR(128) PRIMARY KEY, wrapped VARBINARY(128) NULL)`,
	`CREATE TABLE IF NOT EXISTS annal_blobs (name CHAR(64) PRIMARY KEY, size BIGINT NOT NULL)`,
	`CREATE TABLE IF NOT EXISTS annal_console_sessions (id BINARY(32) PRIMARY KEY, actor VARCHAR(255) NOT NULL,
		sealed VARBINARY(8192) NOT NULL, expires BIGINT NOT NULL, INDEX (actor), INDEX (expires))`,
}

// Open opens the shared store: the KEK from the data folder (made on the
// first start of the log's first instance), checked against the
// database's fingerprint, and the store's tables.
func Open(ctx context.Context, c Config) (*Store, error) {
	db, err := sql.Open("mysql", c.DSN)
	if err != nil {
		return nil, fmt.Errorf("shared store: %w", err)
	}
	db.SetMaxOpenConns(8)
	s, err := open(ctx, db, c)
	if err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

func open(ctx context.Context, db *sql.DB, c Config) (*Store, error) {
	for _, q := range schema {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return nil, fmt.Errorf("shared store: create its tables: %w", err)
		}
	}
	kek, err := loadKEK(ctx, db, c.DataDir, true)
	if err != nil {
		return nil, err
	}
	s := &Store{DB: db, s3: c.S3, bucket: c.Bucket, names: derive(kek, "annal names")}
	for _, a := range []struct {
		aead  *cipher.AEAD
		label string
	}{{&s.wrap, "annal wrap"}, {&s.blobs, "annal blobs"}, {&s.sessions, "annal sessions"}} {
		if *a.aead, err = GCM(derive(kek, a.label)); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Close closes the database connections.
func (s *Store) Close() error { return s.DB.Close() }

func derive(kek []byte, label string) []byte {
	m := hmac.New(sha256.New, kek)
	m.Write([]byte(label))
	return m.Sum(nil)
}

// GCM is AES-256-GCM under key.
func GCM(key []byte) (cipher.AEAD, error) {
	b, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(b)
}

// ErrKEKMismatch: the data folder's shared.key is not the one the other
// instances of the log use.
var ErrKEKMismatch = errors.New("shared store: the data folder's " + KeyFile + " is not the key the log's other instances use")

// Check reports, without making anything, whether the data folder at
// dataDir could open the shared store of the database at dsn: an error
// when the log's instances have a KEK and the folder has none, or
// another. A standby checks it at start, not only at its takeover.
func Check(ctx context.Context, dataDir, dsn string) error {
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		return fmt.Errorf("shared store: %w", err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, schema[0]); err != nil {
		return fmt.Errorf("shared store: create its tables: %w", err)
	}
	if _, err = loadKEK(ctx, db, dataDir, false); errors.Is(err, errNoKEK) {
		return nil // the first instance to open the store makes it
	}
	return err
}

// errNoKEK: neither the data folder nor the database knows a KEK yet.
var errNoKEK = errors.New("no key yet")

// loadKEK reads the data folder's KEK, or when create is set makes it if
// neither the folder nor the database knows one, and checks it against the
// database's fingerprint (recording it the first time).
func loadKEK(ctx context.Context, db *sql.DB, dataDir string, create bool) ([]byte, error) {
	var known []byte
	err := db.QueryRowContext(ctx, "SELECT fingerprint FROM annal_shared_kek WHERE id = 0").Scan(&known)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("shared store: read the key's fingerprint: %w", err)
	}
	path := filepath.Join(dataDir, KeyFile)
	kek, err := readKEK(path, known != nil, create)
	if err != nil {
		return nil, err
	}
	fp := derive(kek, "annal kek fingerprint")
	switch {
	case known == nil && !create:
		return kek, nil // the first instance to open the store records it
	case known == nil:
		// Two first instances racing: one fingerprint wins, the other
		// instance reads it back and refuses below.
		if _, err := db.ExecContext(ctx, "INSERT IGNORE INTO annal_shared_kek (id, fingerprint) VALUES (0, ?)", fp); err != nil {
			return nil, fmt.Errorf("shared store: record the key's fingerprint: %w", err)
		}
		if err := db.QueryRowContext(ctx, "SELECT fingerprint FROM annal_shared_kek WHERE id = 0").Scan(&known); err != nil {
			return nil, fmt.Errorf("shared store: read the key's fingerprint: %w", err)
		}
	}
	if !hmac.Equal(known, fp) {
		return nil, fmt.Errorf("%w (%s): copy shared.key from an instance that runs", ErrKEKMismatch, path)
	}
	return kek, nil
}

// readKEK reads the KEK file at path; when there is none it makes one if
// create is set and no instance has one yet (known).
func readKEK(path string, known, create bool) ([]byte, error) {
	kek, err := os.ReadFile(path)
	switch {
	case err == nil && len(kek) != 32:
		return nil, fmt.Errorf("shared store: %s is %d bytes, not 32", path, len(kek))
	case err == nil:
		return kek, nil
	case !errors.Is(err, os.ErrNotExist):
		return nil, err
	case known:
		// Another instance made the key: a fresh one here would seal
		// what no other instance can open.
		return nil, fmt.Errorf("shared store: %s has no %s but the log's other instances have one: copy it from the first instance's data folder (docs/DEPLOYING.md, \"A standby that takes over\")", filepath.Dir(path), KeyFile)
	case !create:
		return nil, errNoKEK
	}
	kek = make([]byte, 32)
	if _, err := rand.Read(kek); err != nil {
		return nil, err
	}
	if err := atomicfile.Write(path, bytes.NewReader(kek), 0o600); err != nil {
		return nil, fmt.Errorf("shared store: write %s: %w", KeyFile, err)
	}
	return kek, nil
}

// Name is the hex HMAC of what, under kind: an object name that says
// nothing of what it names.
func (s *Store) Name(kind, what string) string {
	m := hmac.New(sha256.New, s.names)
	m.Write([]byte(kind))
	m.Write([]byte{0})
	m.Write([]byte(what))
	return hex.EncodeToString(m.Sum(nil))
}

func seal(a cipher.AEAD, ad string, plain []byte) []byte {
	nonce := make([]byte, a.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return a.Seal(nonce, nonce, plain, []byte(ad))
}

func unseal(a cipher.AEAD, ad string, sealed []byte) ([]byte, error) {
	if len(sealed) < a.NonceSize() {
		return nil, errors.New("too short")
	}
	return a.Open(nil, sealed[:a.NonceSize()], sealed[a.NonceSize():], []byte(ad))
}

// WrapKey encrypts a subject's key under the KEK, bound to the subject.
func (s *Store) WrapKey(subject string, key []byte) []byte {
	return seal(s.wrap, "sealed key\x00"+subject, key)
}

// UnwrapKey opens what WrapKey made for subject.
func (s *Store) UnwrapKey(subject string, wrapped []byte) ([]byte, error) {
	k, err := unseal(s.wrap, "sealed key\x00"+subject, wrapped)
	if err != nil {
		return nil, fmt.Errorf("the key of subject %s does not open under %s: %w", subject, KeyFile, err)
	}
	return k, nil
}

// SealBlob encrypts a blob's bytes under the KEK, bound to its OID.
func (s *Store) SealBlob(id string, data []byte) []byte { return seal(s.blobs, "blob\x00"+id, data) }

// OpenBlob opens what SealBlob made for id.
func (s *Store) OpenBlob(id string, sealed []byte) ([]byte, error) {
	return unseal(s.blobs, "blob\x00"+id, sealed)
}

// SealSession encrypts a console session's secrets, bound to its id.
func (s *Store) SealSession(id []byte, plain []byte) []byte {
	return seal(s.sessions, "session\x00"+string(id), plain)
}

// OpenSession opens what SealSession made for id.
func (s *Store) OpenSession(id []byte, sealed []byte) ([]byte, error) {
	return unseal(s.sessions, "session\x00"+string(id), sealed)
}

// Put stores body at key (under Prefix); it is durable when it returns.
func (s *Store) Put(ctx context.Context, key string, body []byte) error {
	_, err := s.s3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(Prefix + key),
		Body: bytes.NewReader(body), ContentLength: aws.Int64(int64(len(body)))})
	if err != nil {
		return fmt.Errorf("store %s%s in the bucket: %w", Prefix, key, err)
	}
	return nil
}

// Get reads at most limit bytes of the object at key; os.ErrNotExist when
// there is none.
func (s *Store) Get(ctx context.Context, key string, limit int64) ([]byte, error) {
	out, err := s.s3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(Prefix + key)})
	if err != nil {
		if notFound(err) {
			return nil, fmt.Errorf("%s%s: %w", Prefix, key, os.ErrNotExist)
		}
		return nil, fmt.Errorf("read %s%s from the bucket: %w", Prefix, key, err)
	}
	defer out.Body.Close()
	return io.ReadAll(io.LimitReader(out.Body, limit))
}

// Has reports whether there is an object at key.
func (s *Store) Has(ctx context.Context, key string) (bool, error) {
	_, err := s.s3.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(Prefix + key)})
	switch {
	case err == nil:
		return true, nil
	case notFound(err):
		return false, nil
	}
	return false, fmt.Errorf("look for %s%s in the bucket: %w", Prefix, key, err)
}

func notFound(err error) bool {
	var api smithy.APIError
	return errors.As(err, &api) && (api.ErrorCode() == "NoSuchKey" || api.ErrorCode() == "NotFound")
}

// Delete removes the object at key (its current version: for an object
// whose bytes are noise without a destroyed key, or a refused request's).
func (s *Store) Delete(ctx context.Context, key string) error {
	_, err := s.s3.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(Prefix + key)})
	return err
}

// DeleteAll removes every object under prefix (under Prefix), every
// version of each where the bucket keeps versions, delete markers too.
func (s *Store) DeleteAll(ctx context.Context, prefix string) error {
	versions, err := s.deleteVersions(ctx, Prefix+prefix)
	if err != nil && !unsupported(err) {
		return err
	}
	if versions {
		return nil
	}
	// A server that does not list versions keeps none: delete what a
	// listing shows.
	p := s3.NewListObjectsV2Paginator(s.s3, &s3.ListObjectsV2Input{Bucket: aws.String(s.bucket), Prefix: aws.String(Prefix + prefix)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("list %s%s: %w", Prefix, prefix, err)
		}
		for _, o := range page.Contents {
			if _, err := s.s3.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(s.bucket), Key: o.Key}); err != nil {
				return fmt.Errorf("delete %s: %w", aws.ToString(o.Key), err)
			}
		}
	}
	return nil
}

// deleteVersions deletes every version and delete marker under prefix and
// reports whether the server lists versions at all.
func (s *Store) deleteVersions(ctx context.Context, prefix string) (bool, error) {
	in := &s3.ListObjectVersionsInput{Bucket: aws.String(s.bucket), Prefix: aws.String(prefix)}
	for {
		page, err := s.s3.ListObjectVersions(ctx, in)
		if err != nil {
			return false, fmt.Errorf("list the versions under %s: %w", prefix, err)
		}
		var all []s3types.ObjectIdentifier
		for _, v := range page.Versions {
			all = append(all, s3types.ObjectIdentifier{Key: v.Key, VersionId: v.VersionId})
		}
		for _, m := range page.DeleteMarkers {
			all = append(all, s3types.ObjectIdentifier{Key: m.Key, VersionId: m.VersionId})
		}
		for _, o := range all {
			// One DeleteObject each (not DeleteObjects): S3-compatible
			// servers differ in the checksum DeleteObjects requires.
			if _, err := s.s3.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(s.bucket), Key: o.Key, VersionId: o.VersionId}); err != nil {
				return true, fmt.Errorf("delete %s version %s: %w", aws.ToString(o.Key), aws.ToString(o.VersionId), err)
			}
		}
		if !aws.ToBool(page.IsTruncated) {
			return true, nil
		}
		in.KeyMarker, in.VersionIdMarker = page.NextKeyMarker, page.NextVersionIdMarker
	}
}

func unsupported(err error) bool {
	var api smithy.APIError
	return errors.As(err, &api) && (api.ErrorCode() == "NotImplemented" || api.ErrorCode() == "MethodNotAllowed")
}
