package logstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	"github.com/transparency-dev/tessera"
	"github.com/transparency-dev/tessera/api/layout"
	tesseraaws "github.com/transparency-dev/tessera/storage/aws"
	"github.com/transparency-dev/tessera/storage/posix"
)

// Storage says where the log's tiles, entry bundles and checkpoint live.
// The zero Storage keeps them in the data folder (Tessera's POSIX driver).
// The signing key, the credentials and the state cache stay in the data
// folder whatever the storage: the state is folded from the log.
type Storage struct {
	// AWS, if set, puts the log on Tessera's AWS driver: sequencing in a
	// MySQL or MariaDB database, tiles, bundles and checkpoint in an S3
	// bucket, where anyone may read them.
	AWS *AWSStorage
}

// AWSStorage is the database and bucket of a log on Tessera's AWS driver.
type AWSStorage struct {
	// DSN is the database, in go-sql-driver/mysql's form
	// (user:password@tcp(host:port)/dbname). Tessera creates its tables.
	DSN string
	// Bucket is the S3 bucket; it must exist.
	Bucket string
	// Endpoint is an S3-compatible server's URL (path-style addressing);
	// empty for AWS itself.
	Endpoint string
	// Region is the bucket's region (default us-east-1).
	Region string
	// AccessKey and SecretKey are S3 credentials; empty takes the AWS
	// SDK's default chain (AWS_ACCESS_KEY_ID…, a profile, a role).
	AccessKey, SecretKey string
	// MaxOpenConns bounds the database connections (0: no bound).
	MaxOpenConns int
	// Lease, if set, is the write lease this kernel holds (OpenLease,
	// Acquire): the kernel installs the fence that refuses any other
	// kernel's batches, and its own once the lease is lost. Without one,
	// nothing stops a second kernel on the same storage: annald always
	// uses one.
	Lease *Lease
}

func (s Storage) OnDisk() bool { return s.AWS == nil }

// String names the storage for logs and errors, without secrets.
func (s Storage) String() string {
	if s.AWS == nil {
		return "posix"
	}
	return fmt.Sprintf("aws (bucket %s at %s)", s.AWS.Bucket, s.endpointName())
}

func (s Storage) endpointName() string {
	if s.AWS.Endpoint == "" {
		return "AWS S3"
	}
	return s.AWS.Endpoint
}

// driver returns the Tessera driver of the storage, and what wraps the
// reader Tessera returns; logPath is the data folder's log folder (POSIX).
func (s Storage) driver(ctx context.Context, logPath string, witnessClient *http.Client) (tessera.Driver, func(tessera.LogReader) tessera.LogReader, error) {
	if s.AWS == nil {
		pcfg := posix.Config{Path: logPath, HTTPClient: witnessClient}
		d, err := posix.New(ctx, pcfg)
		if err != nil {
			return nil, nil, fmt.Errorf("tessera posix driver: %w", err)
		}
		return d, func(r tessera.LogReader) tessera.LogReader { return r }, nil
	}
	a := s.AWS
	if a.DSN == "" || a.Bucket == "" {
		return nil, nil, errors.New("aws storage needs a database DSN and a bucket")
	}
	sdk, s3opts, err := a.S3Config(ctx)
	if err != nil {
		return nil, nil, err
	}
	dsn := a.DSN
	if a.Lease != nil {
		if dsn, err = a.Lease.dsnAs(dsn); err != nil {
			return nil, nil, err
		}
	}
	d, err := tesseraaws.New(ctx, tesseraaws.Config{SDKConfig: &sdk, S3Options: s3opts, Bucket: a.Bucket, DSN: dsn,
		MaxOpenConns: a.MaxOpenConns, MaxIdleConns: 4, HTTPClient: witnessClient})
	if err != nil {
		return nil, nil, fmt.Errorf("tessera aws driver: %w", err)
	}
	client := s3.NewFromConfig(sdk, s3opts)
	return d, func(r tessera.LogReader) tessera.LogReader {
		return BucketReader{LogReader: r, S3: client, Bucket: a.Bucket}
	}, nil
}

// S3Config is the AWS SDK configuration of the bucket and the options of
// its S3 client (a custom endpoint, addressed path-style).
func (a *AWSStorage) S3Config(ctx context.Context) (aws.Config, func(*s3.Options), error) {
	region := a.Region
	if region == "" {
		region = "us-east-1"
	}
	opts := []func(*config.LoadOptions) error{config.WithRegion(region),
		// S3-compatible servers may not take the newer default checksums.
		config.WithRequestChecksumCalculation(aws.RequestChecksumCalculationWhenRequired),
		config.WithResponseChecksumValidation(aws.ResponseChecksumValidationWhenRequired)}
	if a.AccessKey != "" {
		opts = append(opts, config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider(a.AccessKey, a.SecretKey, "")))
	}
	sdk, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return aws.Config{}, nil, fmt.Errorf("aws sdk config: %w", err)
	}
	// Tessera ignores S3Options without an SDKConfig and panics on an
	// SDKConfig without S3Options: the driver always gets both.
	s3opts := func(o *s3.Options) {
		if a.Endpoint != "" {
			o.BaseEndpoint = aws.String(a.Endpoint)
			o.UsePathStyle = true
		}
	}
	return sdk, s3opts, nil
}

// BucketReader reads the log's tiles, bundles and checkpoint from its
// bucket itself, and its sizes through Tessera (from the database). Tessera's
// own reader loses the S3 error on the way ("no such key" becomes text), so
// the kernel could not tell a partial tile the collector removed, which it
// falls back from, from a failure.
type BucketReader struct {
	tessera.LogReader
	S3     *s3.Client
	Bucket string
}

func (r BucketReader) get(ctx context.Context, key string) ([]byte, error) {
	out, err := r.S3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(r.Bucket), Key: aws.String(key)})
	if err != nil {
		var api smithy.APIError
		if errors.As(err, &api) && (api.ErrorCode() == "NoSuchKey" || api.ErrorCode() == "NotFound") {
			return nil, fmt.Errorf("%s: %w", key, os.ErrNotExist)
		}
		return nil, fmt.Errorf("read %s from the bucket: %w", key, err)
	}
	defer out.Body.Close()
	return io.ReadAll(io.LimitReader(out.Body, maxObject))
}

// maxObject bounds an object read: an entry bundle of 256 entries of at
// most 65,535 bytes each, with their length prefixes.
const maxObject = 256 * (65535 + 2)

func (r BucketReader) ReadCheckpoint(ctx context.Context) ([]byte, error) {
	return r.get(ctx, layout.CheckpointPath)
}

func (r BucketReader) ReadTile(ctx context.Context, level, index uint64, p uint8) ([]byte, error) {
	return r.get(ctx, layout.TilePath(level, index, p))
}

func (r BucketReader) ReadEntryBundle(ctx context.Context, index uint64, p uint8) ([]byte, error) {
	return r.get(ctx, layout.EntriesPath(index, p))
}

// ReadOnly is a reader of the log in the bucket, with its sizes read from
// Tessera's tables: what a standby follows the log with.
func (a *AWSStorage) ReadOnly(ctx context.Context) (tessera.LogReader, func(), error) {
	sdk, s3opts, err := a.S3Config(ctx)
	if err != nil {
		return nil, nil, err
	}
	db, err := sql.Open("mysql", a.DSN)
	if err != nil {
		return nil, nil, err
	}
	db.SetMaxOpenConns(2)
	return BucketReader{LogReader: tableSizes{db: db}, S3: s3.NewFromConfig(sdk, s3opts), Bucket: a.Bucket}, func() { db.Close() }, nil
}

// tableSizes reads the log's sizes from Tessera's coordination tables; its
// reads of objects are the bucket reader's.
type tableSizes struct {
	tessera.LogReader
	db *sql.DB
}

func (t tableSizes) IntegratedSize(ctx context.Context) (uint64, error) {
	var n uint64
	if err := t.db.QueryRowContext(ctx, "SELECT seq FROM IntCoord WHERE id = 0").Scan(&n); err != nil {
		return 0, fmt.Errorf("read the integrated size: %w", err)
	}
	return n, nil
}

func (t tableSizes) NextIndex(ctx context.Context) (uint64, error) {
	var n uint64
	if err := t.db.QueryRowContext(ctx, "SELECT next FROM SeqCoord WHERE id = 0").Scan(&n); err != nil {
		return 0, fmt.Errorf("read the sequenced size: %w", err)
	}
	return n, nil
}
