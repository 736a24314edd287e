package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/spf13/pflag"
	"go.opentelemetry.io/otel/trace"

	"github.com/annal-dev/annal/agentmcp"
	"github.com/annal-dev/annal/api"
	"github.com/annal-dev/annal/kernel"
)

// storageFlags choose where the log lives. Secrets come from the
// environment (ANNAL_DB_DSN, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY), so
// that they never show in --help or a process list.
type storageFlags struct {
	kind, dsn, bucket, endpoint, region string
	maxConns                            int
}

func (s *storageFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&s.kind, "storage", "", "where the log lives: posix (the data folder, the default) or aws (a MySQL/MariaDB database and an S3 bucket) (else env ANNAL_STORAGE)")
	fl.StringVar(&s.dsn, "db-dsn", "", "with --storage aws: the database, user:password@tcp(host:port)/dbname (else env ANNAL_DB_DSN, which keeps the password out of the process list)")
	fl.StringVar(&s.bucket, "s3-bucket", "", "with --storage aws: the S3 bucket (else env ANNAL_S3_BUCKET)")
	fl.StringVar(&s.endpoint, "s3-endpoint", "", "with --storage aws: an S3-compatible server's URL, addressed path-style; empty for AWS (else env ANNAL_S3_ENDPOINT)")
	fl.StringVar(&s.region, "s3-region", "", "with --storage aws: the bucket's region (else env ANNAL_S3_REGION, AWS_REGION; default us-east-1)")
	fl.IntVar(&s.maxConns, "db-max-conns", 0, "with --storage aws: most database connections (0: no bound)")
}

func orEnv(v string, names ...string) string {
	for _, n := range names {
		if v != "" {
			return v
		}
		v = os.Getenv(n)
	}
	return v
}

// config returns the kernel's storage. S3 credentials are the AWS SDK's
// default chain (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, a profile, a
// role).
func (s *storageFlags) config() (kernel.Storage, error) {
	switch kind := orEnv(s.kind, "ANNAL_STORAGE"); kind {
	case "", "posix":
		return kernel.Storage{}, nil
	case "aws":
		a := &kernel.AWSStorage{
			DSN:          orEnv(s.dsn, "ANNAL_DB_DSN"),
			Bucket:       orEnv(s.bucket, "ANNAL_S3_BUCKET"),
			Endpoint:     orEnv(s.endpoint, "ANNAL_S3_ENDPOINT"),
			Region:       orEnv(s.region, "ANNAL_S3_REGION", "AWS_REGION"),
			MaxOpenConns: s.maxConns,
		}
		switch {
		case a.DSN == "":
			return kernel.Storage{}, errors.New("--storage aws needs the database: --db-dsn or ANNAL_DB_DSN (user:password@tcp(host:port)/dbname)")
		case a.Bucket == "":
			return kernel.Storage{}, errors.New("--storage aws needs the bucket: --s3-bucket or ANNAL_S3_BUCKET")
		}
		return kernel.Storage{AWS: a}, nil
	default:
		return kernel.Storage{}, fmt.Errorf("--storage %q: posix or aws", kind)
	}
}

// takeLease opens the write lease of a shared log and waits for it: while
// another kernel holds it, annald is a follower (follower.go) that answers
// every read from its own state, which it keeps folding from the log, and
// forwards every write to the lease holder; it takes over once the lease
// expires. It says so on stdout once, and once per holder.
//
// Every kernel advertises its URL (--advertise-url, default the address
// it listens on) in the log's database at start, so that the others can
// forward to it as soon as it holds the lease.
func takeLease(ctx context.Context, f serveFlags, cfg kernel.Config, tracer trace.Tracer, logger *slog.Logger, stdout io.Writer,
	fr *front) (*kernel.Lease, error) {
	a := cfg.Storage.AWS
	holder := f.leaseHolder
	if holder == "" {
		holder = defaultLeaseHolder()
	}
	advertised := f.advertiseURL
	if advertised == "" {
		advertised = fr.url()
		if host, _, err := net.SplitHostPort(fr.ln.Addr().String()); err == nil && net.ParseIP(host).IsUnspecified() {
			logger.Warn("the other kernels of the log cannot forward writes to a wildcard address: give --advertise-url", "advertised", advertised)
		}
	}
	lease, err := kernel.OpenLease(ctx, a, holder, f.leaseTTL, logger)
	if err != nil {
		return nil, err
	}
	leaders, err := kernel.OpenLeaders(ctx, a)
	if err == nil {
		err = leaders.Advertise(ctx, holder, advertised)
		defer leaders.Close() // after the follower stopped (the defer below)
	}
	if err != nil {
		lease.Close()
		return nil, err
	}
	fw := newForwarder(leaders.Current, holder, maxForwardBody(f), logger)
	sb := &standby{}
	var takingOver http.Handler = sb
	fr.current.Store(&takingOver)
	started := false
	followCtx, stopFollowing := context.WithCancel(ctx)
	following := make(chan struct{})
	defer func() {
		stopFollowing()
		if started {
			<-following // it holds the data folder: the kernel opens it next
		}
	}()
	err = lease.Acquire(ctx, func(s kernel.LeaseState) {
		changed := sb.see(s.Holder)
		if !started {
			started = true
			go fr.serve()
			go fw.keepFresh(followCtx, followInterval)
			go func() {
				defer close(following)
				if err := runFollower(followCtx, f, cfg, tracer, logger, fr, fw, takingOver); err != nil {
					logger.Warn("follower: cannot follow the log; answering 503 until a takeover, which folds it whole", "err", err)
				}
			}()
			fmt.Fprintf(stdout, "annald: standby as %s, serving at %s as a follower (reads answered, writes forwarded to the lease holder; advertised as %s) until it holds the write lease\n", holder, fr.url(), advertised)
		}
		if changed {
			fmt.Fprintf(stdout, "annald: standby: the write lease is held by %s (expires in %v)\n", s.Holder, s.ExpiresIn.Round(time.Millisecond))
		}
	})
	if err != nil {
		lease.Close()
		return nil, err
	}
	if !started {
		fr.current.Store(nil) // never a follower: the API is served from the start
	}
	fmt.Fprintf(stdout, "annald: write lease held as %s\n", holder)
	return lease, nil
}

// maxForwardBody is the largest body a follower forwards: the largest any
// route of the holder takes (a blob, an MCP call, an action).
func maxForwardBody(f serveFlags) int64 {
	return max(f.maxBlob+1, agentmcp.MaxRequestBody, api.MaxActionBody)
}

// defaultLeaseHolder names this kernel in the write lease: its host name,
// kept to letters, digits, dots and dashes, and a random suffix.
func defaultLeaseHolder() string {
	host, _ := os.Hostname()
	suffix := make([]byte, 4)
	rand.Read(suffix)
	holder := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' {
			return r
		}
		return '-'
	}, host) + "-" + hex.EncodeToString(suffix)
	return strings.TrimLeft(holder, ".-")
}

// standby answers every request while this kernel cannot serve: before
// its follower has opened, and while it takes over (from the follower's
// close to the writing kernel's open): 503 with Retry-After, but 200 for
// /v1/healthz (alive), naming the holder.
type standby struct {
	mu     sync.Mutex
	heldBy string
}

// see records the lease's holder and reports whether it changed.
func (s *standby) see(holder string) (changed bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	changed = holder != s.heldBy
	s.heldBy = holder
	return changed
}

func (s *standby) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	by := s.heldBy
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Retry-After", "1")
	status := http.StatusServiceUnavailable
	if r.URL.Path == "/v1/healthz" {
		status = http.StatusOK // alive, as a standby
	}
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"ready": false, "standby": true, "lease_holder": by,
		"reason": "standby: another kernel (" + by + ") holds the write lease, and this one does not serve yet (its follower opens, or it takes over)"})
}
