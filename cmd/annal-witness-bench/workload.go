package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"net/http"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/annal-dev/annal/checkpoints"
	"github.com/annal-dev/annal/cmd/annal-bench/loadconn"
	"github.com/annal-dev/annal/internal/ctxsleep"
	"github.com/transparency-dev/merkle/rfc6962"
	"github.com/transparency-dev/merkle/testonly"
	"golang.org/x/mod/sumdb/note"
)

// benchLog is one log of the workload: an origin and its Ed25519 note key
// (named after the origin, as checkpoints.GenerateLogKey makes it). The same
// benchLogs are fed to every witness of a run.
type benchLog struct {
	index  int
	origin string
	signer note.Signer
	vkey   string
	// prepared holds request bodies made before any measurement (prepare),
	// by the step they ask the witness to take. Only read while measuring.
	prepared map[stepKey][]byte
}

// stepKey is one add-checkpoint step of a log: from the size the witness
// cosigned to the size of the new checkpoint.
type stepKey struct{ old, size uint64 }

// prepare makes the request bodies of the log's first steps, each from the
// size of the step before: the path on which every request is cosigned, so
// that a measurement's client mostly sends bytes made before it started
// (signing a checkpoint and proving consistency cost the client about as
// much CPU as cosigning costs a witness, on the same cores). A request off
// that path (after a 409) or beyond it is made when it is sent.
func (l *benchLog) prepare(maxGrow, steps int) error {
	w := newLogWriter(l, maxGrow)
	prepared := make(map[stepKey][]byte, steps)
	for range steps {
		w.step()
		body, err := w.makeRequest()
		if err != nil {
			return fmt.Errorf("log %s: %w", l.origin, err)
		}
		prepared[stepKey{w.witnessSize, w.size}] = body
		w.witnessSize = w.size
	}
	l.prepared = prepared
	return nil
}

// prepareLogs prepares steps steps of every log, on every core.
func prepareLogs(logs []*benchLog, maxGrow, steps int) error {
	var next atomic.Int64
	errs := make([]error, len(logs))
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(logs)) {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < len(logs); i = int(next.Add(1) - 1) {
				errs[i] = logs[i].prepare(maxGrow, steps)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// newBenchLogs makes n logs with origins "bench.example/log-<i>".
func newBenchLogs(n int) ([]*benchLog, error) {
	logs := make([]*benchLog, n)
	for i := range logs {
		origin := fmt.Sprintf("bench.example/log-%d", i)
		skey, vkey, err := checkpoints.GenerateLogKey(origin)
		if err != nil {
			return nil, fmt.Errorf("log %s: %w", origin, err)
		}
		signer, err := checkpoints.NewLogSigner(skey)
		if err != nil {
			return nil, fmt.Errorf("log %s: %w", origin, err)
		}
		logs[i] = &benchLog{index: i, origin: origin, signer: signer, vkey: vkey}
	}
	return logs, nil
}

// logWriter is a log as one witness sees it during one measurement: the
// log's size, grown step by step, its in-memory tree (grown to that size
// only when a request is not prepared), and the size the client believes
// the witness cosigned last. The entries and the growth steps depend only
// on the log's index, so every witness gets the same checkpoints in the
// same order.
type logWriter struct {
	log         *benchLog
	size        uint64
	tree        *testonly.Tree
	rng         *rand.Rand
	maxGrow     int
	witnessSize uint64
	// madeLive counts the requests made when sent, not prepared.
	madeLive int
}

func newLogWriter(l *benchLog, maxGrow int) *logWriter {
	return &logWriter{
		log:     l,
		tree:    testonly.New(rfc6962.DefaultHasher),
		rng:     rand.New(rand.NewPCG(uint64(l.index), 0x5eed)),
		maxGrow: maxGrow,
	}
}

// growTo appends entries until the tree has size leaves. Entry i of a log
// is always the same bytes.
func (w *logWriter) growTo(size uint64) {
	for w.tree.Size() < size {
		w.tree.AppendData(fmt.Appendf(nil, "%s entry %d", w.log.origin, w.tree.Size()))
	}
}

// step grows the log by 1 to maxGrow entries.
func (w *logWriter) step() {
	w.size += 1 + w.rng.Uint64N(uint64(w.maxGrow))
}

// request is the c2sp.org/tlog-witness add-checkpoint body that moves the
// witness from witnessSize to the log's size: the prepared one, or one made
// now.
func (w *logWriter) request() ([]byte, error) {
	if body, ok := w.log.prepared[stepKey{w.witnessSize, w.size}]; ok {
		return body, nil
	}
	w.madeLive++
	return w.makeRequest()
}

// makeRequest makes the body request sends:
//
//	old <n>\n
//	<base64 proof hash>\n...
//	\n
//	<signed checkpoint>
func (w *logWriter) makeRequest() ([]byte, error) {
	w.growTo(w.size)
	size := w.size
	signed, err := checkpoints.SignCheckpoint(checkpoints.Checkpoint{
		Origin: w.log.origin, Size: size, Hash: [32]byte(w.tree.Hash()),
	}, w.log.signer)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "old %d\n", w.witnessSize)
	if w.witnessSize > 0 && w.witnessSize < size {
		proof, err := w.tree.ConsistencyProof(w.witnessSize, size)
		if err != nil {
			return nil, err
		}
		for _, h := range proof {
			b.WriteString(base64.StdEncoding.EncodeToString(h))
			b.WriteByte('\n')
		}
	}
	b.WriteByte('\n')
	b.Write(signed)
	return b.Bytes(), nil
}

// resync takes the size a 409 answer says the witness cosigned. A witness
// can only be ahead of the client with checkpoints of this same log (a
// request whose answer was lost), so the log is grown to that size if
// needed, and the next request starts from it.
func (w *logWriter) resync(stored uint64) {
	w.size = max(w.size, stored)
	w.witnessSize = stored
}

// workload says how each log's client runs.
type workload struct {
	// duration bounds the whole measurement; no step starts after it.
	duration time.Duration
	// steps, if not 0, is the number of steps per log.
	steps int
	// maxGrow bounds the entries added per step (at least 1).
	maxGrow int
	// timeout bounds one HTTP request.
	timeout time.Duration
	// maxAttempts bounds the requests sent for one step; a log whose step
	// fails that often stops and is reported. Retries also stop at the end
	// of the duration.
	maxAttempts int
	// backoff is the wait before the n-th retry of a step after an answer
	// other than 200 and 409 (429 is a witness's pushback): n×backoff, at
	// most maxBackoff. A 409 is retried at once, from the witness's size.
	backoff time.Duration
}

// maxBackoff bounds the wait before a retry.
const maxBackoff = 50 * time.Millisecond

// measurement is what one witness did under the workload.
type measurement struct {
	witness string
	// round is the measurement's place among the witness's rounds, from 1.
	round int
	logs  int
	// ok counts 200 answers, the throughput.
	ok int
	// sent counts every request sent, answered or not.
	sent    int
	elapsed time.Duration
	// latencies of the steps that got a 200 answer: from the step's first
	// request to the 200, retries and backoff included.
	latencies []time.Duration
	// errors counts every answer other than 200 by status code, and
	// requests with no answer as "transport".
	errors map[string]int
	// retries counts requests sent again for a step after an answer other
	// than 200 (a 409 is retried from the size in its body).
	retries int
	// madeLive counts the requests made while measuring, not prepared
	// before it (see benchLog.prepare).
	madeLive int
	// gaveUp lists the logs that stopped early, with the reason.
	gaveUp []string
	// serverCPU and clientCPU are the CPU time the witness process and
	// this process used during the measurement (0 if not known).
	serverCPU, clientCPU time.Duration
}

func (m *measurement) rate() float64 {
	if m.elapsed <= 0 {
		return 0
	}
	return float64(m.ok) / m.elapsed.Seconds()
}

func (m *measurement) errorCount() int {
	n := 0
	for _, c := range m.errors {
		n += c
	}
	return n
}

// errorSummary is "0" or the non-200 answers by kind, e.g. "409×2 429×7".
func (m *measurement) errorSummary() string {
	if len(m.errors) == 0 {
		return "0"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m.errors)) {
		parts = append(parts, fmt.Sprintf("%s×%d", k, m.errors[k]))
	}
	return strings.Join(parts, " ")
}

// run drives the witness at baseURL with one goroutine per log, all at
// once, and returns what it measured. It returns when every log has done
// its steps, the duration has passed (requests in flight then finish), or
// ctx ends.
func (wl workload) run(ctx context.Context, name, baseURL string, logs []*benchLog) *measurement {
	url := strings.TrimSuffix(baseURL, "/") + "/add-checkpoint"
	total := &measurement{witness: name, logs: len(logs), errors: map[string]int{}}
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(wl.duration)
	for _, l := range logs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := newLogWriter(l, wl.maxGrow)
			m := wl.runLog(ctx, url, w, deadline)
			mu.Lock()
			defer mu.Unlock()
			total.madeLive += w.madeLive
			total.ok += m.ok
			total.sent += m.sent
			total.retries += m.retries
			total.latencies = append(total.latencies, m.latencies...)
			for k, v := range m.errors {
				total.errors[k] += v
			}
			total.gaveUp = append(total.gaveUp, m.gaveUp...)
		}()
	}
	wg.Wait()
	total.elapsed = time.Since(start)
	return total
}

// runLog is one log's client: step, send, and on anything but 200 retry
// the step (from the witness's size after a 409, after a short backoff
// otherwise), at most maxAttempts times.
func (wl workload) runLog(ctx context.Context, url string, w *logWriter, deadline time.Time) *measurement {
	m := &measurement{errors: map[string]int{}}
	conn, err := loadconn.New(url, nil, wl.timeout)
	if err != nil {
		m.giveUp(w, "%v", err)
		return m
	}
	defer conn.Close()
	for step := 0; wl.steps == 0 || step < wl.steps; step++ {
		if ctx.Err() != nil || !time.Now().Before(deadline) {
			return m
		}
		w.step()
		if !wl.sendStep(ctx, conn, w, m, step, deadline) {
			return m
		}
	}
	return m
}

// sendStep sends the step's request until the witness cosigns it,
// counting in m, and reports whether the log's client goes on: not once
// it gave up, ctx ended, or the deadline passed.
func (wl workload) sendStep(ctx context.Context, conn *loadconn.Conn, w *logWriter, m *measurement, step int, deadline time.Time) bool {
	var stepStart time.Time
	for attempt := 1; ; attempt++ {
		if attempt > wl.maxAttempts {
			m.giveUp(w, "step %d failed %d times", step, wl.maxAttempts)
			return false
		}
		if attempt > 1 {
			if !time.Now().Before(deadline) {
				return false
			}
			m.retries++
		}
		body, err := w.request()
		if err != nil {
			m.giveUp(w, "make request: %v", err)
			return false
		}
		if attempt == 1 {
			stepStart = time.Now()
		}
		code, answer, err := conn.Post(ctx, body)
		m.sent++
		if err != nil {
			if ctx.Err() != nil {
				return false
			}
			m.errors["transport"]++
			wl.wait(ctx, attempt)
			continue
		}
		switch m.take(w, code, answer, stepStart) {
		case cosigned:
			return true
		case failed:
			return false
		case refused:
			wl.wait(ctx, attempt)
		}
	}
}

// outcome is what an answer means for its step.
type outcome int

const (
	cosigned outcome = iota // 200: the step is done
	resynced                // 409: sent again at once, from the witness's size
	refused                 // any other status: sent again after a backoff
	failed                  // the log's client gives up
)

// take counts the answer to a step's request, first sent at stepStart,
// and says what it means.
func (m *measurement) take(w *logWriter, code int, answer []byte, stepStart time.Time) outcome {
	if code == http.StatusOK {
		if !bytes.HasPrefix(answer, []byte("— ")) {
			m.errors["200 without cosignature"]++
			m.giveUp(w, "200 answer is not a note signature line: %q", answer)
			return failed
		}
		m.ok++
		m.latencies = append(m.latencies, time.Since(stepStart))
		w.witnessSize = w.size
		return cosigned
	}
	m.errors[strconv.Itoa(code)]++
	if code != http.StatusConflict {
		return refused
	}
	stored, err := parseSizeAnswer(answer)
	if err != nil {
		m.giveUp(w, "409 answer: %v", err)
		return failed
	}
	w.resync(stored)
	return resynced
}

// giveUp notes that w's log stopped early, and why.
func (m *measurement) giveUp(w *logWriter, format string, args ...any) {
	m.gaveUp = append(m.gaveUp, w.log.origin+": "+fmt.Sprintf(format, args...))
}

// parseSizeAnswer reads the body of a 409 answer: the witness's size in
// decimal and a newline (c2sp.org/tlog-witness, text/x.tlog.size).
func parseSizeAnswer(body []byte) (uint64, error) {
	s, ok := strings.CutSuffix(string(body), "\n")
	if !ok {
		return 0, fmt.Errorf("body %q is not a size and a newline", body)
	}
	n, err := checkpoints.ParseDecimal(s)
	if err != nil {
		return 0, fmt.Errorf("body %q: %w", body, err)
	}
	return n, nil
}

// wait is the backoff after the attempt-th failed attempt of a step; it
// ends early if ctx ends.
func (wl workload) wait(ctx context.Context, attempt int) {
	d := min(time.Duration(attempt)*wl.backoff, maxBackoff)
	if d <= 0 {
		return
	}
	ctxsleep.Sleep(ctx, d) // an ended ctx is the caller's to see
}

// percentile is the nearest-rank p-th percentile of d (0 if d is empty).
func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := int(math.Ceil(float64(len(s))*p/100)) - 1
	return s[max(0, min(len(s)-1, i))]
}

// mean is the mean of d (not empty).
func mean(d []time.Duration) time.Duration {
	var sum time.Duration
	for _, x := range d {
		sum += x
	}
	return sum / time.Duration(len(d))
}

// slowShare is the share of the total of d spent in the durations over
// bound: with one client, how much of the rate the slow answers cost.
func slowShare(d []time.Duration, bound time.Duration) float64 {
	var sum, slow time.Duration
	for _, x := range d {
		sum += x
		if x > bound {
			slow += x
		}
	}
	if sum == 0 {
		return 0
	}
	return float64(slow) / float64(sum)
}

func fmtShare(f float64) string { return fmt.Sprintf("%.0f%%", 100*f) }
