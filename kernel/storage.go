package kernel

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	"github.com/transparency-dev/tessera"
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
}

func (s Storage) onDisk() bool { return s.AWS == nil }

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

// driver returns the Tessera driver of the storage; logPath is the data
// folder's log folder (POSIX).
func (s Storage) driver(ctx context.Context, logPath string, witnessClient *http.Client) (tessera.Driver, error) {
	if s.AWS == nil {
		pcfg := posix.Config{Path: logPath, HTTPClient: witnessClient}
		d, err := posix.New(ctx, pcfg)
		if err != nil {
			return nil, fmt.Errorf("tessera posix driver: %w", err)
		}
		return d, nil
	}
	a := s.AWS
	if a.DSN == "" || a.Bucket == "" {
		return nil, errors.New("aws storage needs a database DSN and a bucket")
	}
	region := a.Region
	if region == "" {
		region = "us-east-1"
	}
	var opts []func(*config.LoadOptions) error
	opts = append(opts, config.WithRegion(region),
		// S3-compatible servers may not take the newer default checksums.
		config.WithRequestChecksumCalculation(aws.RequestChecksumCalculationWhenRequired),
		config.WithResponseChecksumValidation(aws.ResponseChecksumValidationWhenRequired))
	if a.AccessKey != "" {
		opts = append(opts, config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider(a.AccessKey, a.SecretKey, "")))
	}
	sdk, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("aws sdk config: %w", err)
	}
	// Tessera ignores S3Options without an SDKConfig and panics on an
	// SDKConfig without S3Options: both are always given.
	s3opts := func(o *s3.Options) {
		if a.Endpoint != "" {
			o.BaseEndpoint = aws.String(a.Endpoint)
			o.UsePathStyle = true
		}
	}
	d, err := tesseraaws.New(ctx, tesseraaws.Config{SDKConfig: &sdk, S3Options: s3opts, Bucket: a.Bucket, DSN: a.DSN,
		MaxOpenConns: a.MaxOpenConns, MaxIdleConns: 4, HTTPClient: witnessClient})
	if err != nil {
		return nil, fmt.Errorf("tessera aws driver: %w", err)
	}
	return d, nil
}

// notFoundReader makes the AWS driver's "no such key" an os.ErrNotExist,
// as the POSIX driver's missing file is: the kernel falls back from a
// partial tile the garbage collector removed to the full one on that.
type notFoundReader struct{ tessera.LogReader }

func (r notFoundReader) ReadCheckpoint(ctx context.Context) ([]byte, error) {
	b, err := r.LogReader.ReadCheckpoint(ctx)
	return b, asNotExist(err)
}

func (r notFoundReader) ReadTile(ctx context.Context, level, index uint64, p uint8) ([]byte, error) {
	b, err := r.LogReader.ReadTile(ctx, level, index, p)
	return b, asNotExist(err)
}

func (r notFoundReader) ReadEntryBundle(ctx context.Context, index uint64, p uint8) ([]byte, error) {
	b, err := r.LogReader.ReadEntryBundle(ctx, index, p)
	return b, asNotExist(err)
}

func asNotExist(err error) error {
	var api smithy.APIError
	if err != nil && !errors.Is(err, os.ErrNotExist) && errors.As(err, &api) && (api.ErrorCode() == "NoSuchKey" || api.ErrorCode() == "NotFound") {
		return errors.Join(os.ErrNotExist, err)
	}
	return err
}
