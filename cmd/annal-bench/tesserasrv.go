package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/annal-dev/annal/client"
	"github.com/annal-dev/annal/cmd/annal-bench/loadconn"
	"golang.org/x/mod/sumdb/note"
)

// The reference server: Tessera's own conformance POSIX server,
// POST /add, at the Tessera version the kernel runs on.
const (
	conformancePackage = "github.com/transparency-dev/tessera/cmd/conformance/posix"
	conformanceVersion = "v1.0.4"
)

// tesseraServer is a running conformance server.
type tesseraServer struct {
	url string
	childProcess
}

// buildConformance installs the conformance server into dir/bin from the
// module proxy, outside the bench's module (so its go.mod is untouched).
func buildConformance(ctx context.Context, dir string) (string, error) {
	work := filepath.Join(dir, "conformance-build")
	bin := filepath.Join(dir, "bin")
	if err := os.MkdirAll(work, 0o700); err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, "go", "install", conformancePackage+"@"+conformanceVersion)
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "GOBIN="+bin, "GOFLAGS=-mod=mod", "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go install %s@%s: %v\n%s", conformancePackage, conformanceVersion, err, out)
	}
	return filepath.Join(bin, "posix"), nil
}

// startConformance runs the server on 127.0.0.1 with a fresh log in dir.
func startConformance(ctx context.Context, bin, dir string) (*tesseraServer, error) {
	skey, _, err := note.GenerateKey(rand.Reader, "bench.local/conformance")
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	ln.Close()
	logFile, err := os.Create(filepath.Join(dir, "conformance.log"))
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	cmd := exec.Command(bin, "--storage_dir", filepath.Join(dir, "log"), "--listen", addr)
	cmd.Env = append(os.Environ(), "LOG_PRIVATE_KEY="+skey)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &tesseraServer{url: "http://" + addr, childProcess: childProcess{cmd: cmd, done: make(chan struct{}), logPath: logFile.Name()}}
	go func() { cmd.Wait(); close(s.done) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return s, nil
		}
		select {
		case <-s.done:
			return nil, fmt.Errorf("the conformance server exited: see %s", logFile.Name())
		case <-ctx.Done():
			s.stop()
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.stop()
			return nil, errors.New("the conformance server did not listen within 30 s")
		}
	}
}

// addLoad posts unique entries of about a kernel event's size from
// concurrency clients for d, and returns adds/s and the latencies.
func (s *tesseraServer) addLoad(concurrency int, d time.Duration, run string) (float64, []time.Duration, error) {
	conns := make([]*loadconn.Conn, concurrency)
	for i := range conns {
		var err error
		if conns[i], err = loadconn.New(s.url+"/add", http.Header{"Content-Type": {"application/octet-stream"}}, time.Minute); err != nil {
			return 0, nil, err
		}
		defer conns[i].Close()
	}
	pad := strings.Repeat("e", 330)
	lat := make([][]time.Duration, concurrency)
	rate, err := closedLoop(concurrency, d, func(w int, i uint64) error {
		body := fmt.Appendf(nil, "%s/%d/%s", run, i, pad) // unique: no deduplication answers
		t := time.Now()
		code, answer, err := conns[w].Post(context.Background(), body)
		if err != nil {
			return fmt.Errorf("POST /add: %w", err)
		}
		if code != http.StatusOK {
			return fmt.Errorf("POST /add: %d %s", code, firstLine(string(answer)))
		}
		lat[w] = append(lat[w], time.Since(t))
		return nil
	})
	all := slices.Concat(lat...)
	if err != nil && len(all) == 0 {
		return 0, nil, err
	}
	slices.Sort(all)
	return rate, all, nil
}

// settle waits until annald has published a checkpoint of every entry it
// has answered for. Why: its receipts come before the tiles and the
// checkpoint (the write-ahead log), and that work is annald's; without the
// wait it would run during the conformance server's next phase, on the
// cores that phase is measured on.
func settle(ctx context.Context, srv *benchServer) error {
	c, err := client.New(srv.url, srv.cred)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(settleTimeout)
	for {
		info, err := c.Info(ctx)
		if err != nil {
			return fmt.Errorf("waiting for annald's checkpoint: %w", err)
		}
		if info.CheckpointSize >= info.Size {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("annald published no checkpoint of its %d entries within %v (the latest covers %d)", info.Size, settleTimeout, info.CheckpointSize)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

const settleTimeout = 30 * time.Second

// interleavedGoverned runs the governed phases; with --tessera-server, in
// --rounds rounds each preceded by the conformance server at the same
// concurrencies (A, B, A, B, …), and adds the server's rows and the ratio
// of the governed rate to the server's, each the mean of its runs. The
// governed phases' other rows (the Go client, every gate) are of the last
// round.
func interleavedGoverned(ctx context.Context, dir string, srv *benchServer, o options, ungoverned map[int]float64) ([]row, error) {
	if !o.tesseraServer {
		return governedPhases(ctx, srv, o, ungoverned, true)
	}
	tdir := filepath.Join(dir, "conformance")
	if err := os.MkdirAll(tdir, 0o700); err != nil {
		return nil, err
	}
	bin, err := buildConformance(ctx, tdir)
	if err != nil {
		rows, gerr := governedPhases(ctx, srv, o, ungoverned, true)
		return append(rows, row{"Tessera conformance server", "skipped", firstLine(err.Error())}), gerr
	}
	conformance, err := startConformance(ctx, bin, tdir)
	if err != nil {
		return nil, err
	}
	defer conformance.stop()
	server := conformanceRuns{rate: map[int][]float64{}, cpu: map[int][]time.Duration{}, p50: map[int][]time.Duration{}}
	governed := map[int][]float64{}
	var rows []row
	last := o.rounds - 1
	for round := range o.rounds {
		if err := settle(ctx, srv); err != nil {
			return nil, err
		}
		if err := server.measure(conformance, o, round); err != nil {
			return nil, err
		}
		gov, err := governedPhases(ctx, srv, o, ungoverned, round == last)
		if err != nil {
			return nil, err
		}
		eachRate(gov, governedName, func(c int, rate float64) { governed[c] = append(governed[c], rate) })
		if round == last {
			rows = append(rows, gov...)
		}
	}
	for _, c := range o.governed {
		s, g := server.rate[c], governed[c]
		if len(s) < o.rounds || len(g) < o.rounds {
			continue
		}
		rows = append(rows,
			row{fmt.Sprintf("Tessera conformance server POST /add, %d concurrent", c), joinEach(s, wholeNumber) + " adds/s",
				fmt.Sprintf("p50 %s, runs interleaved with the governed ones%s", joinEach(server.p50[c], fmtDur),
					cpuNote(mean(server.cpu[c]), "its"))},
			row{fmt.Sprintf("governed actions, %d agents, %s", c, everyRound(o.rounds)), joinEach(g, wholeNumber) + " actions/s",
				ratioNote(mean(g)/mean(s), server.p50[c])})
	}
	return rows, nil
}

// conformanceRuns are the conformance server's runs by concurrency, one
// a round: its rate, its CPU for each add, its p50.
type conformanceRuns struct {
	rate map[int][]float64
	cpu  map[int][]time.Duration
	p50  map[int][]time.Duration
}

// measure runs the conformance server once at each governed concurrency.
func (r conformanceRuns) measure(conformance *tesseraServer, o options, round int) error {
	for _, c := range o.governed {
		var lat []time.Duration
		rate, cpu, err := measureCPU(conformance.cpu, func() (float64, error) {
			rate, l, err := conformance.addLoad(c, o.duration, fmt.Sprintf("round%d-c%d", round, c))
			lat = l
			return rate, err
		})
		if err != nil {
			return fmt.Errorf("conformance server at %d: %w", c, err)
		}
		r.rate[c] = append(r.rate[c], rate)
		r.cpu[c] = append(r.cpu[c], cpu)
		r.p50[c] = append(r.p50[c], percentile(lat, 50))
	}
	return nil
}

// everyRound names the rounds of a row: "both rounds" for two.
func everyRound(rounds int) string {
	switch rounds {
	case 1:
		return "one round"
	case 2:
		return "both rounds"
	}
	return fmt.Sprintf("all %d rounds", rounds)
}

// joinEach formats each of xs and joins them with " / ", in the order
// measured.
func joinEach[T any](xs []T, format func(T) string) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = format(x)
	}
	return strings.Join(parts, " / ")
}

func wholeNumber(x float64) string { return fmt.Sprintf("%.0f", x) }

func mean[T float64 | time.Duration](xs []T) T {
	var sum T
	for _, x := range xs {
		sum += x
	}
	return sum / T(len(xs))
}

// ratioNote is the note of the governed rate against the conformance
// server's. A server whose requests waited out its batch age (one second:
// it integrates when a batch fills or ages) was paced by that clock, not
// by its work, and the ratio compares nothing.
func ratioNote(ratio float64, serverP50 []time.Duration) string {
	for _, p := range serverP50 {
		if p < conformanceBatchAge/2 {
			return fmt.Sprintf("%.2fx of the conformance server (means)", ratio)
		}
	}
	return fmt.Sprintf("%.2fx of the conformance server (means), whose requests waited out its %v batch age (p50 above): not a comparison of work", ratio, conformanceBatchAge)
}

// conformanceBatchAge is the conformance server's batch age
// (cmd/conformance/posix: WithBatching(256, time.Second)).
const conformanceBatchAge = time.Second

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
