// Package servicestest gives tests a database and a bucket of their own on
// the real servers .ci/services starts (MariaDB and versitygw on
// 127.0.0.1), and the Jaeger it starts as an OTLP receiver (jaeger.go),
// named by the ANNAL_TEST_* variables it writes. Without them
// a test skips, unless ANNAL_REQUIRE_SERVICES says this is the full test
// run (.ci/test sets it), where a missing server is a failure.
package servicestest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"os"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	_ "github.com/go-sql-driver/mysql" // the database/sql driver the DSNs name
)

// AWS is one test's database and bucket.
type AWS struct {
	// DSN names the test's own database (go-sql-driver/mysql form).
	DSN string
	// ServerDSN names the server without a database, as a user who may
	// create databases.
	ServerDSN string
	Database  string
	// Endpoint, Bucket, AccessKey, SecretKey are the S3 side.
	Endpoint, Bucket, AccessKey, SecretKey string
}

// NewAWS creates a database and a bucket for t, dropped with it.
func NewAWS(t testing.TB) AWS {
	t.Helper()
	return NewAWSOn(t, "")
}

// NewAWSOn is NewAWS with the database on server (a ServerDSN), or on the
// shared server when server is "".
func NewAWSOn(t testing.TB, server string) AWS {
	t.Helper()
	return NewAWSAt(t, server, "")
}

// NewAWSAt is NewAWS on the given database server and S3 endpoint; ""
// takes the shared one.
func NewAWSAt(t testing.TB, server, endpoint string) AWS {
	t.Helper()
	if server == "" {
		server = os.Getenv("ANNAL_TEST_MYSQL_DSN")
	}
	if endpoint == "" {
		endpoint = os.Getenv("ANNAL_TEST_S3_ENDPOINT")
	}
	if server == "" || endpoint == "" {
		if os.Getenv("ANNAL_REQUIRE_SERVICES") != "" {
			t.Fatal("ANNAL_TEST_MYSQL_DSN and ANNAL_TEST_S3_ENDPOINT are not set: .ci/test starts MariaDB and versitygw (.ci/services)")
		}
		t.Skip("no MariaDB and S3 server: run .ci/services start DIR and source DIR/env (bash .ci/test does)")
	}
	suffix := make([]byte, 6)
	rand.Read(suffix)
	name := "annaltest" + hex.EncodeToString(suffix)
	a := AWS{ServerDSN: server, Database: name, DSN: strings.TrimSuffix(server, "/") + "/" + name, Endpoint: endpoint, Bucket: name}
	a.AccessKey, a.SecretKey = S3Keys()
	db, err := sql.Open("mysql", server)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec("CREATE DATABASE " + name); err != nil {
		t.Fatalf("create the test database: %v", err)
	}
	t.Cleanup(func() {
		db, err := sql.Open("mysql", server)
		if err == nil {
			db.Exec("DROP DATABASE IF EXISTS " + name)
			db.Close()
		}
	})
	if _, err := a.S3().CreateBucket(context.Background(), &s3.CreateBucketInput{Bucket: aws.String(name)}); err != nil {
		t.Fatalf("create the test bucket: %v", err)
	}
	return a
}

// S3 is a client of the test's S3 server.
func (a AWS) S3() *s3.Client {
	return s3.New(s3.Options{
		Region: "us-east-1", BaseEndpoint: aws.String(a.Endpoint), UsePathStyle: true,
		Credentials:                credentials.NewStaticCredentialsProvider(a.AccessKey, a.SecretKey, ""),
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired,
	})
}
