package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	_ "github.com/go-sql-driver/mysql" // the database/sql driver the DSNs name
	"github.com/spf13/cobra"
	"k8s.io/klog/v2"

	"github.com/annal-dev/annal/api"
	"github.com/annal-dev/annal/client"
	"github.com/annal-dev/annal/kernel"
	"github.com/annal-dev/annal/kernel/event"
)

// storageOptions name the servers of the AWS-driver phases: a database
// server (a DSN without a database, as a user who may create them) and an
// S3 endpoint; each run gets a new database and bucket. The defaults are
// what .ci/services start writes to its env file.
type storageOptions struct {
	serverDSN, endpoint, accessKey, secretKey string
	events                                    []int
	leaseTTL                                  time.Duration
	// compare: the POSIX/AWS comparison; clusterRun: the three kernels
	// behind HAProxy (cluster.go), with clusterLeaseTTL.
	compare, clusterRun bool
	clusterLeaseTTL     time.Duration
}

func storageCommand(o *options) *cobra.Command {
	var so storageOptions
	cmd := &cobra.Command{
		Use:   "storage",
		Short: "POSIX and Tessera's AWS driver side by side: actions/s and receipt p50/p99 at each concurrency, then standby takeover times",
		Long: `annal-bench storage runs, for each --concurrency, a kernel on the POSIX driver and one on the AWS
driver (MySQL/MariaDB and an S3 server, a new database and bucket each), interleaved, and prints
actions/s and receipt latency with the AWS/POSIX ratio. Then, for each --takeover-events, it builds
a log of that many events on the AWS driver, stops its kernel without releasing the lease, and
measures a standby with an empty data folder: the wait for the lease to expire, and the fold of the
whole log from the bucket until it serves. Then (--cluster) it runs three annald processes on one
AWS log behind HAProxy (round robin, checked on /v1/readyz): actions/s and receipt p50/p99 through
the balancer against the lease holder directly, in the same run, at each --concurrency; then it
kills the holder (SIGKILL) under load through the balancer and times until a write is acknowledged
again. Servers: --db-server (env ANNAL_TEST_MYSQL_DSN) and
--s3-endpoint (ANNAL_TEST_S3_ENDPOINT) with ANNAL_TEST_S3_ACCESS_KEY/SECRET_KEY: .ci/services start
writes them.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runStorage(cmd.Context(), *o, so, cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVar(&so.serverDSN, "db-server", os.Getenv("ANNAL_TEST_MYSQL_DSN"), "database server DSN, user:password@tcp(host:port)/ (the user creates databases)")
	f.StringVar(&so.endpoint, "s3-endpoint", os.Getenv("ANNAL_TEST_S3_ENDPOINT"), "S3 server URL (path-style)")
	so.accessKey, so.secretKey = os.Getenv("ANNAL_TEST_S3_ACCESS_KEY"), os.Getenv("ANNAL_TEST_S3_SECRET_KEY")
	f.IntSliceVar(&so.events, "takeover-events", []int{100_000}, "log sizes for the takeover phase (0 skips it)")
	f.DurationVar(&so.leaseTTL, "lease-ttl", 10*time.Second, "the write lease's TTL in the takeover phase")
	f.BoolVar(&so.compare, "compare", true, "run the POSIX/AWS comparison")
	f.BoolVar(&so.clusterRun, "cluster", true, "run three annald processes on one AWS log behind HAProxy: actions/s and p50/p99 through the balancer against the lease holder directly, then the takeover under load (needs haproxy: .ci/services install-apt)")
	f.DurationVar(&so.clusterLeaseTTL, "cluster-lease-ttl", 2*time.Second, "the write lease's TTL of the cluster run")
	return cmd
}

// newAWS makes a fresh database and bucket.
func (so storageOptions) newAWS(ctx context.Context) (*kernel.AWSStorage, error) {
	suffix := make([]byte, 6)
	rand.Read(suffix)
	name := "annalbench" + hex.EncodeToString(suffix)
	db, err := sql.Open("mysql", so.serverDSN)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		return nil, fmt.Errorf("create database: %w", err)
	}
	s3c := s3.New(s3.Options{Region: "us-east-1", BaseEndpoint: aws.String(so.endpoint), UsePathStyle: true,
		Credentials:                credentials.NewStaticCredentialsProvider(so.accessKey, so.secretKey, ""),
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired, ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired})
	if _, err := s3c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(name)}); err != nil {
		return nil, fmt.Errorf("create bucket: %w", err)
	}
	return &kernel.AWSStorage{DSN: strings.TrimSuffix(so.serverDSN, "/") + "/" + name, Bucket: name, Endpoint: so.endpoint,
		AccessKey: so.accessKey, SecretKey: so.secretKey, MaxOpenConns: 64}, nil
}

func runStorage(ctx context.Context, o options, so storageOptions, out io.Writer) error {
	if so.serverDSN == "" || so.endpoint == "" {
		return errors.New("no database server or S3 endpoint: give --db-server and --s3-endpoint, or run .ci/services start DIR and source DIR/env")
	}
	klog.SetOutput(io.Discard)
	klog.LogToStderr(false)
	dir, err := os.MkdirTemp(o.dir, "annal-bench-storage")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	fmt.Fprintf(out, "annal-bench storage: POSIX in %s, AWS driver on %s and %s, %v per phase, interleaved\n\n", dir, redactDSN(so.serverDSN), so.endpoint, o.duration)
	var rows []row
	if so.compare {
		if rows, err = compareDrivers(ctx, dir, o, so); err != nil {
			return err
		}
	}
	for _, n := range so.events {
		if n <= 0 {
			continue
		}
		r, err := takeover(ctx, dir, o, so, n)
		if err != nil {
			return fmt.Errorf("takeover at %d events: %w", n, err)
		}
		rows = append(rows, r...)
	}
	if so.clusterRun {
		r, err := cluster(ctx, dir, o, so)
		if err != nil {
			return fmt.Errorf("cluster: %w", err)
		}
		rows = append(rows, r...)
	}
	return printRows(out, rows)
}

// compareDrivers measures, at each concurrency, a kernel on the POSIX
// driver and one on the AWS driver, interleaved.
func compareDrivers(ctx context.Context, dir string, o options, so storageOptions) ([]row, error) {
	var rows []row
	run := 0
	for _, c := range o.concurrency {
		results := map[string]loadResult{}
		for _, kind := range []string{"posix", "aws"} {
			run++
			cfg := benchConfig(filepath.Join(dir, fmt.Sprintf("%s-%d", kind, run)), o)
			if kind == "aws" {
				a, err := so.newAWS(ctx)
				if err != nil {
					return nil, err
				}
				cfg.Storage = kernel.Storage{AWS: a}
				cfg.CheckpointInterval = max(cfg.CheckpointInterval, kernel.MinAWSCheckpointInterval)
			}
			_, url, cred, stop, err := startKernelWith(cfg)
			if err != nil {
				return nil, fmt.Errorf("%s kernel: %w", kind, err)
			}
			r, err := measuredLoad(ctx, url, cred, c, o.duration)
			stop()
			if err != nil {
				return nil, fmt.Errorf("%s at %d: %w", kind, c, err)
			}
			results[kind] = r
		}
		p, a := results["posix"], results["aws"]
		rows = append(rows,
			row{fmt.Sprintf("POSIX, %d concurrent", c), fmt.Sprintf("%.0f actions/s", p.rate), fmt.Sprintf("receipt p50 %s, p99 %s", fmtDur(p.p50), fmtDur(p.p99))},
			row{fmt.Sprintf("AWS driver, %d concurrent", c), fmt.Sprintf("%.0f actions/s", a.rate),
				fmt.Sprintf("receipt p50 %s, p99 %s; %.2fx POSIX's rate, %.2fx its p50", fmtDur(a.p50), fmtDur(a.p99), a.rate/p.rate, float64(a.p50)/float64(p.p50))})
	}
	return rows, nil
}

func redactDSN(dsn string) string {
	if at := strings.LastIndex(dsn, "@"); at >= 0 {
		if colon := strings.Index(dsn[:at], ":"); colon >= 0 {
			return dsn[:colon] + ":…" + dsn[at:]
		}
	}
	return dsn
}

type loadResult struct {
	rate     float64
	p50, p99 time.Duration
}

// measuredLoad submits from concurrency clients for d and times each
// receipt.
func measuredLoad(ctx context.Context, url, cred string, concurrency int, d time.Duration) (loadResult, error) {
	c, err := client.New(url, cred)
	if err != nil {
		return loadResult{}, err
	}
	var mu sync.Mutex
	var lat []time.Duration
	var firstErr atomic.Value
	rate, _ := closedLoop(concurrency, d, func(_ int, i uint64) error {
		start := time.Now()
		_, err := c.Submit(ctx, api.ActionRequest{Type: "mutate", Target: fmt.Sprintf("workspace/bench/%d", i), Payload: benchPayload(int(i))})
		if err != nil {
			firstErr.CompareAndSwap(nil, err)
			return err
		}
		took := time.Since(start)
		mu.Lock()
		lat = append(lat, took)
		mu.Unlock()
		return nil
	})
	if err, ok := firstErr.Load().(error); ok {
		return loadResult{}, err
	}
	return loadResult{rate: rate, p50: percentile(lat, 50), p99: percentile(lat, 99)}, nil
}

// takeover builds a log of n events on the AWS driver with a leased kernel
// while a warm standby follows it, stops the kernel without releasing its
// lease (as a crash would), and times the standby until it serves: the wait
// for the lease, then the fold of what it had not followed yet. Then a cold
// standby (an empty data folder) takes over from it, to time a whole fold.
func takeover(ctx context.Context, dir string, o options, so storageOptions, n int) ([]row, error) {
	a, err := so.newAWS(ctx)
	if err != nil {
		return nil, err
	}
	t := &takeoverRun{ctx: ctx, dir: dir, o: o, so: so, n: n, aws: a}
	k, root, leaseA, err := t.active()
	if err != nil {
		return nil, err
	}
	defer leaseA.Close()
	keep, stopKeep := context.WithCancel(ctx)
	defer stopKeep()
	go leaseA.Keep(keep, func(error) {})
	warm, err := t.standby("warm")
	if err != nil {
		return nil, err
	}
	defer warm.lease.Close()
	followCtx, stopFollowing := context.WithCancel(ctx)
	defer stopFollowing()
	followed := make(chan error, 1)
	go func() { followed <- kernel.Follow(followCtx, warm.cfg, time.Second) }()

	start := time.Now()
	if err := fillLog(ctx, k, root, n); err != nil {
		k.Close()
		stopFollowing()
		return nil, err
	}
	built := time.Since(start)
	// The active kernel stops renewing, then stops, keeping its lease: a
	// crash. The standby keeps following until it holds the lease.
	stopKeep()
	stopped := time.Now()
	if err := k.Close(); err != nil {
		return nil, err
	}
	if err := warm.lease.Acquire(ctx, nil); err != nil {
		return nil, err
	}
	leased := time.Now()
	stopFollowing()
	if err := <-followed; err != nil {
		return nil, fmt.Errorf("follow: %w", err)
	}
	folded, serving, err := warm.serveOnce(ctx)
	if err != nil {
		return nil, err
	}
	cold, err := t.coldTakeover()
	if err != nil {
		return nil, err
	}
	if folded < uint64(n) {
		return nil, fmt.Errorf("the standby serves %d events, the kernel before it logged %d", folded, n)
	}
	return []row{
		{fmt.Sprintf("takeover of a %d-event log by a warm standby (lease %v)", folded, so.leaseTTL), fmtDur(serving.Sub(stopped)),
			fmt.Sprintf("lease wait %s + open %s; log built at %.0f events/s while it followed", fmtDur(leased.Sub(stopped)), fmtDur(serving.Sub(leased)), float64(n)/built.Seconds())},
		{fmt.Sprintf("takeover of a %d-event log by a cold standby, after a clean stop", folded), fmtDur(cold),
			fmt.Sprintf("fold from an empty data folder at %.0f events/s (the lease was released)", float64(folded)/cold.Seconds())},
	}, nil
}

// takeoverRun is one takeover measure: a shared log of n events in aws,
// its kernels' data folders under dir.
type takeoverRun struct {
	ctx context.Context
	dir string
	o   options
	so  storageOptions
	n   int
	aws *kernel.AWSStorage
}

// folder is the data folder of the kernel called name.
func (t *takeoverRun) folder(name string) string {
	return filepath.Join(t.dir, fmt.Sprintf("takeover-%d-%s", t.n, name))
}

// config is the configuration of a kernel on the shared log with the data
// folder d, and its lease as holder (opened, not acquired).
func (t *takeoverRun) config(d, holder string) (kernel.Config, *kernel.Lease, error) {
	lease, err := kernel.OpenLease(t.ctx, t.aws, holder, t.so.leaseTTL, nil)
	if err != nil {
		return kernel.Config{}, nil, err
	}
	cfg := benchConfig(d, t.o)
	cfg.CheckpointInterval = max(cfg.CheckpointInterval, kernel.MinAWSCheckpointInterval)
	cfg.DisableProduction = true
	withLease := *t.aws
	withLease.Lease = lease
	cfg.Storage = kernel.Storage{AWS: &withLease}
	return cfg, lease, nil
}

// active starts the kernel that builds the log: it takes the lease and
// opens a new data folder. It returns the kernel, its root and its lease.
func (t *takeoverRun) active() (*kernel.Kernel, *kernel.Actor, *kernel.Lease, error) {
	cfg, lease, err := t.config(t.folder("a"), "bench-a")
	if err != nil {
		return nil, nil, nil, err
	}
	if err := lease.Acquire(t.ctx, nil); err != nil {
		lease.Close()
		return nil, nil, nil, err
	}
	k, err := kernel.Open(cfg)
	if err != nil {
		lease.Close()
		return nil, nil, nil, err
	}
	root, err := rootActor(k)
	if err != nil {
		lease.Close()
		return nil, nil, nil, err
	}
	return k, root, lease, nil
}

// standbyKernel is a kernel not yet open: its configuration and its
// lease, opened but not yet held.
type standbyKernel struct {
	cfg   kernel.Config
	lease *kernel.Lease
}

// standby prepares the standby called name: a data folder with the
// active kernel's identity, and nothing of the log yet.
func (t *takeoverRun) standby(name string) (standbyKernel, error) {
	d := t.folder(name)
	if err := kernel.CopyIdentity(t.folder("a"), d); err != nil {
		return standbyKernel{}, err
	}
	cfg, lease, err := t.config(d, "bench-"+name)
	return standbyKernel{cfg: cfg, lease: lease}, err
}

// serveOnce opens the kernel of a standby that holds the lease and
// returns the events it serves and when it began to; then it stops it
// cleanly, which releases the lease.
func (s standbyKernel) serveOnce(ctx context.Context) (size uint64, serving time.Time, err error) {
	k, err := kernel.Open(s.cfg)
	if err != nil {
		return 0, time.Time{}, err
	}
	serving = time.Now()
	info, err := k.Info(ctx)
	if err != nil {
		k.Close()
		return 0, time.Time{}, err
	}
	if err := k.Close(); err != nil {
		return 0, time.Time{}, err
	}
	if err := s.lease.Release(ctx); err != nil {
		return 0, time.Time{}, err
	}
	return info.Size, serving, nil
}

// coldTakeover times a standby with an empty data folder taking over the
// released lease: the fold of the whole log until its kernel serves.
func (t *takeoverRun) coldTakeover() (time.Duration, error) {
	cold, err := t.standby("cold")
	if err != nil {
		return 0, err
	}
	defer cold.lease.Close()
	if err := cold.lease.Acquire(t.ctx, nil); err != nil {
		return 0, err
	}
	start := time.Now()
	k, err := kernel.Open(cold.cfg)
	if err != nil {
		return 0, err
	}
	took := time.Since(start)
	k.Close()
	return took, nil
}

// fillLog submits n actions as root from 256 workers; an answer that the
// tree is catching up (integration pushback) is tried again.
func fillLog(ctx context.Context, k *kernel.Kernel, root *kernel.Actor, n int) error {
	return inParallel(int64(n), 256, func(int, int64) error {
		for {
			_, err := k.Submit(ctx, root, kernel.ActionRequest{Type: event.Mutate, Target: "workspace/takeover"})
			if !errors.Is(err, kernel.ErrUnavailable) {
				return err
			}
			time.Sleep(50 * time.Millisecond) // integration pushback: the tree is catching up
		}
	})
}

func rootActor(k *kernel.Kernel) (*kernel.Actor, error) {
	raw, err := os.ReadFile(k.RootCredentialPath())
	if err != nil {
		return nil, err
	}
	return k.Authenticate(strings.TrimSpace(string(raw)))
}
