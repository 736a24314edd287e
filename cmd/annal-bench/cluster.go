package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/annal-dev/annal/api"
	"github.com/annal-dev/annal/client"
	"github.com/annal-dev/annal/internal/servicestest"
	"github.com/annal-dev/annal/kernel"
)

// clusterKernel is one annald process of the cluster run.
type clusterKernel struct {
	url  string
	name string
	childProcess
}

// cluster runs n annald processes on one log on the AWS driver behind
// HAProxy (servicestest.StartHAProxy, round robin, readyz checks), and
// measures, in the same run, actions/s and receipt p50/p99 through the
// balancer against the lease holder directly at each concurrency; then
// the takeover under load: the holder is killed (SIGKILL) while clients
// submit through the balancer, and the time until a write is acknowledged
// again is taken, with the refusals on the way counted.
func cluster(ctx context.Context, dir string, o options, so storageOptions) ([]row, error) {
	a, err := so.newAWS(ctx)
	if err != nil {
		return nil, err
	}
	bin := o.annald
	if bin == "" || bin == inProcess {
		if bin, err = findAnnald(ctx, dir); err != nil {
			return nil, err
		}
	}
	c := &clusterRun{bin: bin, dir: dir, o: o, so: so, aws: a}
	defer c.stop()
	cred, err := c.start(ctx)
	if err != nil {
		return nil, err
	}
	var backends []string
	for _, k := range c.kernels {
		backends = append(backends, strings.TrimPrefix(k.url, "http://"))
	}
	lb, err := servicestest.StartHAProxy(dir, backends)
	if errors.Is(err, servicestest.ErrNoHAProxy) {
		return []row{{"3 kernels behind HAProxy", "skipped", err.Error()}}, nil
	} else if err != nil {
		return nil, err
	}
	defer lb.Stop()
	time.Sleep(time.Second) // the balancer's first health checks
	var rows []row
	for _, conc := range o.concurrency {
		direct, err := measuredLoad(ctx, c.kernels[0].url, cred, conc, o.duration)
		if err != nil {
			return nil, fmt.Errorf("the lease holder directly at %d: %w", conc, err)
		}
		balanced, err := measuredLoad(ctx, lb.URL, cred, conc, o.duration)
		if err != nil {
			return nil, fmt.Errorf("through the balancer at %d: %w", conc, err)
		}
		rows = append(rows,
			row{fmt.Sprintf("lease holder directly, %d concurrent", conc), fmt.Sprintf("%.0f actions/s", direct.rate), fmt.Sprintf("receipt p50 %s, p99 %s", fmtDur(direct.p50), fmtDur(direct.p99))},
			row{fmt.Sprintf("%d kernels behind HAProxy, %d concurrent", len(c.kernels), conc), fmt.Sprintf("%.0f actions/s", balanced.rate),
				fmt.Sprintf("receipt p50 %s, p99 %s; %.2fx the direct rate (2 of 3 writes forwarded by a follower)", fmtDur(balanced.p50), fmtDur(balanced.p99), balanced.rate/direct.rate)})
	}
	r, err := c.takeoverUnderLoad(ctx, lb.URL, cred, o.concurrency[len(o.concurrency)-1])
	if err != nil {
		return nil, err
	}
	return append(rows, r), nil
}

type clusterRun struct {
	bin, dir string
	o        options
	so       storageOptions
	aws      *kernel.AWSStorage
	kernels  []*clusterKernel
}

func (c *clusterRun) stop() {
	for _, k := range c.kernels {
		k.stop()
	}
}

// start runs the holder on a new data folder, then the followers on
// copies of its identity, and waits until each follower follows the log.
func (c *clusterRun) start(ctx context.Context) (cred string, err error) {
	first := filepath.Join(c.dir, "cluster-0")
	for i := range 3 {
		dir := filepath.Join(c.dir, fmt.Sprintf("cluster-%d", i))
		if i > 0 {
			if err := kernel.CopyIdentity(first, dir); err != nil {
				return "", err
			}
		}
		k, credPath, err := c.startKernel(ctx, dir, fmt.Sprintf("kernel%d", i))
		if err != nil {
			return "", err
		}
		c.kernels = append(c.kernels, k)
		if i == 0 {
			raw, err := os.ReadFile(credPath)
			if err != nil {
				return "", err
			}
			cred = strings.TrimSpace(string(raw))
			continue
		}
		if err := awaitFollowing(ctx, k.url); err != nil {
			return "", err
		}
	}
	return cred, nil
}

// startKernel runs annald on dir, on the run's log, and waits until it
// listens (the holder: its URL and root credential) or serves as a
// follower (its URL).
func (c *clusterRun) startKernel(ctx context.Context, dir, name string) (*clusterKernel, string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, "", err
	}
	logFile, err := os.Create(dir + ".log")
	if err != nil {
		return nil, "", err
	}
	defer logFile.Close()
	args := annaldArgs(dir, c.o)
	args = append(args, "--storage", "aws", "--s3-bucket", c.aws.Bucket, "--s3-endpoint", c.aws.Endpoint,
		"--lease-holder", name, "--lease-ttl", c.so.clusterLeaseTTL.String(), "--checkpoint-interval", kernel.MinAWSCheckpointInterval.String())
	cmd := exec.Command(c.bin, args...)
	cmd.Env = append(os.Environ(), "ANNAL_DB_DSN="+c.aws.DSN, "AWS_ACCESS_KEY_ID="+c.aws.AccessKey, "AWS_SECRET_ACCESS_KEY="+c.aws.SecretKey)
	cmd.Stderr = logFile
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, "", err
	}
	if err := cmd.Start(); err != nil {
		return nil, "", err
	}
	k := &clusterKernel{name: name, childProcess: childProcess{cmd: cmd, done: make(chan struct{}), logPath: dir + ".log"}}
	type banner struct{ url, cred string }
	ready := make(chan banner, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		var b banner
		for sc.Scan() {
			line := sc.Text()
			if rest, ok := strings.CutPrefix(line, "annald: standby as "); ok {
				if _, after, ok := strings.Cut(rest, "serving at "); ok {
					b.url, _, _ = strings.Cut(after, " ")
					ready <- b
				}
			} else if u, ok := strings.CutPrefix(line, "annald: listening on "); ok {
				b.url = u
			} else if p, ok := strings.CutPrefix(line, "annald: root credential in "); ok && b.url != "" {
				b.cred = p
				ready <- b
			}
		}
		io.Copy(io.Discard, stdout)
		cmd.Wait()
		close(k.done)
	}()
	select {
	case b := <-ready:
		k.url = b.url
		return k, b.cred, nil
	case <-k.done:
		return nil, "", fmt.Errorf("annald %s exited: %s", name, logTail(k.logPath))
	case <-ctx.Done():
		k.stop()
		return nil, "", ctx.Err()
	case <-time.After(time.Minute):
		k.stop()
		return nil, "", fmt.Errorf("annald %s did not serve within a minute: see %s", name, k.logPath)
	}
}

// awaitFollowing waits until the kernel at u answers readyz 200.
func awaitFollowing(ctx context.Context, u string) error {
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		resp, err := http.Get(u + "/v1/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
	}
	return fmt.Errorf("the follower at %s was not ready within a minute", u)
}

// takeoverUnderLoad kills the holder while conc clients submit through the
// balancer, and times the first write acknowledged after the kill.
func (c *clusterRun) takeoverUnderLoad(ctx context.Context, lbURL, cred string, conc int) (row, error) {
	cl, err := client.New(lbURL, cred)
	if err != nil {
		return row{}, err
	}
	var killedAt atomic.Pointer[time.Time]
	var back atomic.Pointer[time.Time]
	var acked atomic.Uint64
	var mu sync.Mutex
	failures := map[string]int{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range conc {
		wg.Go(func() {
			for i := 0; i < 1_000_000; i++ {
				select {
				case <-stop:
					return
				default:
				}
				sent := time.Now()
				_, err := cl.Submit(ctx, api.ActionRequest{Type: "mutate", Target: fmt.Sprintf("workspace/takeover/%d/%d", w, i)})
				if err == nil {
					acked.Add(1)
					// Only a request sent after the kill shows that a
					// new holder serves: one in flight may still have
					// been answered by the old.
					if k := killedAt.Load(); k != nil && sent.After(*k) {
						now := time.Now()
						back.CompareAndSwap(nil, &now)
					}
					continue
				}
				mu.Lock()
				failures[failureKind(err)]++
				mu.Unlock()
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
	time.Sleep(2 * time.Second)
	holder := c.kernels[0]
	now := time.Now()
	holder.cmd.Process.Kill()
	killedAt.Store(&now)
	for deadline := now.Add(2 * time.Minute); back.Load() == nil && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
	}
	time.Sleep(time.Second)
	close(stop)
	wg.Wait()
	b := back.Load()
	if b == nil {
		return row{}, errors.New("no write was acknowledged within 2 minutes of the kill")
	}
	var kinds []string
	for k, n := range failures {
		kinds = append(kinds, fmt.Sprintf("%d %s", n, k))
	}
	sort.Strings(kinds)
	return row{fmt.Sprintf("takeover under load through HAProxy, %d concurrent (lease %v, holder SIGKILLed)", conc, c.so.clusterLeaseTTL),
		fmtDur(b.Sub(now)),
		fmt.Sprintf("until a write sent after the kill is acknowledged; %d acknowledged in all; failed: %s", acked.Load(), strings.Join(kinds, ", "))}, nil
}

// failureKind names how a write through the balancer failed.
func failureKind(err error) string {
	var e *client.Error
	switch {
	case !errors.As(err, &e):
		return "without an answer"
	case e.OutcomeUnknown:
		return "outcome unknown (in flight at the kill)"
	case e.Status == http.StatusServiceUnavailable && e.RetryAfter > 0:
		return "503 Retry-After (nothing done)"
	}
	return fmt.Sprintf("%d from the balancer or a kernel", e.Status)
}
