package workload

import (
	"context"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/annal-dev/annal/api"
	"github.com/annal-dev/annal/client"
)

// Defaults of Config.
const (
	DefaultWorkers = 32
	// requestTimeout bounds every request: a kernel that does not answer
	// within it has hung, which is a failure.
	requestTimeout = 20 * time.Second
	// notReadyLimit is how long the kernel may refuse writes before the
	// workers stop: nothing more is learnt from a stopped kernel.
	notReadyLimit = 2 * time.Second
	// probeTimeout bounds a readiness probe: readyz reads one flag.
	probeTimeout = 2 * time.Second
)

// Config says how long and how wide a run is. Every loop of the run ends by
// Duration or MaxOps, whichever comes first.
type Config struct {
	// Seed makes each worker's choice of operations repeatable.
	Seed uint64
	// Duration bounds the run (0: MaxOps alone bounds it).
	Duration time.Duration
	// MaxOps bounds the operations (0: Duration alone bounds it).
	MaxOps int64
	// Workers is how many workers send requests at once (0: DefaultWorkers).
	Workers int
	// Only, if set, names the operations to draw from (OpNames); Skip
	// names operations not to draw. Agents are still created whenever too
	// few are alive.
	Only, Skip []string
	// Restarts is how many times the kernel is closed and opened again on
	// its folder during the run, evenly spaced (workers pause meanwhile).
	Restarts int
	// Dir is the folder the run's data folder is made in ("": the
	// system's temporary folder); KeepData keeps the data folder.
	Dir      string
	KeepData bool
	// Progress, if set, is told what the run does, a line at a time;
	// with Refusals, also every refusal with the kernel's message.
	Progress func(line string)
	Refusals bool
}

// Report is what a run did and found.
type Report struct {
	Seed     uint64
	Workers  int
	Elapsed  time.Duration
	DataDir  string
	Ops      map[string]map[string]int // operation kind → outcome → count
	Failures []Failure                 // the first maxFailures
	// FailureCount counts every failure, FailureKinds them by operation
	// and the start of their problem.
	FailureCount int
	FailureKinds map[string]int
	// Acks is how many acknowledged receipts (and recorded denials) were
	// read back from the log after the restart; LogSize the log's size
	// then, and LogKinds its events by kind.
	Acks     int
	LogSize  uint64
	LogKinds map[string]int
	// Audit says what the kernel's audit of the folder found.
	Audit string
	// KernelLog holds the kernel's first warning and error lines, and
	// KernelLogCount how many there were.
	KernelLog      []string
	KernelLogCount int
	// Stopped says why the workers stopped before the end, if they did.
	Stopped string
}

// Failure is one broken check.
type Failure struct {
	At      time.Duration
	Op      string
	Request string
	Problem string
}

func (f Failure) String() string {
	return fmt.Sprintf("%7.3fs %s %s: %s", f.At.Seconds(), f.Op, f.Request, f.Problem)
}

// Failed reports whether any check broke.
func (r *Report) Failed() bool { return r.FailureCount > 0 }

const maxFailures = 100

// runner is one run.
type runner struct {
	cfg   Config
	n     *node
	w     *world
	start time.Time
	begun atomic.Int64 // operations begun, against MaxOps
	// ops are the operations drawn from, weight their total weight.
	ops    []op
	weight int

	// pause is held shared by each operation and exclusively by a restart.
	pause sync.RWMutex

	stopOnce sync.Once
	stop     chan struct{}
	stopWhy  string

	mu   sync.Mutex
	rep  *Report
	acks []ack
	http *http.Client
}

// Run runs the workload and reports what it found. It returns an error only
// when the run could not start (no data folder, no kernel at all); what
// the kernel does wrong is in the report.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if cfg.Workers <= 0 {
		cfg.Workers = DefaultWorkers
	}
	if cfg.Duration <= 0 && cfg.MaxOps <= 0 {
		return nil, errors.New("workload: give a duration or a number of operations")
	}
	sel, err := selectOps(cfg.Only, cfg.Skip)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(cfg.Dir, fmt.Sprintf("annal-workload-%d-", cfg.Seed))
	if err != nil {
		return nil, err
	}
	r := &runner{cfg: cfg, start: time.Now(), ops: sel, stop: make(chan struct{}), http: &http.Client{Timeout: probeTimeout},
		rep: &Report{Seed: cfg.Seed, Workers: cfg.Workers, DataDir: dir, Ops: map[string]map[string]int{}, FailureKinds: map[string]int{}}}
	for _, o := range sel {
		r.weight += o.weight
	}
	n, err := startNode(dir)
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("workload: start the kernel: %w", err)
	}
	r.n = n
	n.panicked = func(msg string) { r.failure("http.panic", "a handler of the API", msg) }
	defer func() {
		if !cfg.KeepData {
			os.RemoveAll(dir)
			r.rep.DataDir = ""
		}
	}()
	r.progress("seed %d, %d workers, kernel at %s, data in %s", cfg.Seed, cfg.Workers, n.url, dir)
	if err := r.setup(); err != nil {
		r.failure("setup", "", err.Error())
		r.halt("setup failed")
	}
	r.runWorkers(ctx)
	r.finish(ctx)
	r.rep.Elapsed = time.Since(r.start)
	r.rep.KernelLog, r.rep.KernelLogCount = n.errs.snapshot()
	return r.rep, nil
}

func (r *runner) progress(format string, args ...any) {
	if r.cfg.Progress != nil {
		r.cfg.Progress(fmt.Sprintf("%7.3fs ", time.Since(r.start).Seconds()) + fmt.Sprintf(format, args...))
	}
}

// halt stops the workers after their current operation.
func (r *runner) halt(why string) {
	r.stopOnce.Do(func() {
		r.stopWhy = why
		close(r.stop)
	})
}

func (r *runner) stopped() bool {
	select {
	case <-r.stop:
		return true
	default:
		return false
	}
}

// runWorkers runs the workers, the readiness probe and the restarts until
// the duration or the operations run out, or the kernel stops.
func (r *runner) runWorkers(ctx context.Context) {
	if r.cfg.Duration > 0 {
		t := time.AfterFunc(r.cfg.Duration, func() { r.halt("") })
		defer t.Stop()
	}
	go func() {
		select {
		case <-ctx.Done():
			r.halt("interrupted: " + ctx.Err().Error())
		case <-r.stop:
		}
	}()
	var wg sync.WaitGroup
	probeDone := make(chan struct{})
	go func() {
		defer close(probeDone)
		r.probeReadiness()
	}()
	if r.cfg.Restarts > 0 && r.cfg.Duration > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.restarts()
		}()
	}
	for i := range r.cfg.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wk := &worker{r: r, w: r.w, id: i, rng: mrand.New(mrand.NewPCG(r.cfg.Seed, uint64(i)+1))}
			for !r.stopped() {
				if r.cfg.MaxOps > 0 && r.begun.Add(1) > r.cfg.MaxOps {
					r.halt("")
					break
				}
				r.pause.RLock()
				if !r.stopped() { // a restart that failed stopped the run
					wk.step()
				}
				r.pause.RUnlock()
			}
		}()
	}
	wg.Wait()
	r.halt("")
	<-probeDone
	if r.stopWhy != "" {
		r.rep.Stopped = r.stopWhy
	}
	r.progress("workers stopped after %d operations%s", r.opCount(), map[bool]string{true: ": " + r.stopWhy, false: ""}[r.stopWhy != ""])
}

func (r *runner) opCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, outs := range r.rep.Ops {
		for _, c := range outs {
			n += c
		}
	}
	return n
}

// restarts closes the kernel and opens it again, evenly spaced over the
// run, with every worker paused.
func (r *runner) restarts() {
	every := r.cfg.Duration / time.Duration(r.cfg.Restarts+1)
	for i := 1; i <= r.cfg.Restarts; i++ {
		select {
		case <-r.stop:
			return
		case <-time.After(time.Until(r.start.Add(time.Duration(i) * every))):
		}
		r.pause.Lock()
		err := r.n.restart()
		if err != nil {
			r.halt("the kernel did not restart")
		}
		r.pause.Unlock()
		if err != nil {
			r.count("kernel.restart", "fail")
			r.failure("kernel.restart", "close and open the kernel on its folder", err.Error())
			return
		}
		r.count("kernel.restart", "ok")
		r.progress("restarted the kernel")
	}
}

// probeReadiness asks GET /v1/readyz every 100 ms until the workers stop;
// a kernel that stays unready stops them.
func (r *runner) probeReadiness() {
	var since time.Time
	for !r.stopped() {
		r.pause.RLock()
		if r.stopped() {
			r.pause.RUnlock()
			break
		}
		ok, body := r.ready()
		r.pause.RUnlock()
		r.count("probe.readyz", map[bool]string{true: "ok", false: "fail"}[ok])
		if ok {
			since = time.Time{}
		} else {
			r.failure("probe.readyz", "GET /v1/readyz", body)
			if since.IsZero() {
				since = time.Now()
			} else if time.Since(since) > notReadyLimit {
				r.halt("the kernel stopped taking writes: " + body)
			}
		}
		select {
		case <-r.stop:
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// ready asks the kernel whether it takes writes.
func (r *runner) ready() (bool, string) {
	resp, err := r.http.Get(r.n.url + "/v1/readyz")
	if err != nil {
		return false, err.Error()
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 4096)
	m, _ := resp.Body.Read(buf)
	b.Write(buf[:m])
	return resp.StatusCode == http.StatusOK, fmt.Sprintf("%d %s", resp.StatusCode, strings.TrimSpace(b.String()))
}

// count records one answer of op.
func (r *runner) count(op, outcome string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := r.rep.Ops[op]
	if m == nil {
		m = map[string]int{}
		r.rep.Ops[op] = m
	}
	m[outcome]++
}

// failure records a broken check.
func (r *runner) failure(op, req, problem string) {
	f := Failure{At: time.Since(r.start), Op: op, Request: req, Problem: problem}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rep.FailureCount++
	key := problemKey(op, problem)
	r.rep.FailureKinds[key]++
	if r.rep.FailureKinds[key] > 3 || len(r.rep.Failures) >= maxFailures {
		return // the first few of each kind are enough
	}
	r.rep.Failures = append(r.rep.Failures, f)
	if r.cfg.Progress != nil {
		r.cfg.Progress("FAIL " + f.String())
	}
}

// refusalPrefix is how the client writes a kernel's error answer.
var refusalPrefix = regexp.MustCompile(`^annal: (\d+) [A-Za-z ]+(?: \(stage [a-z_]+\))?: (?:[a-z_]+(?: \([a-z_]+\))?: )?`)

// problemKey is what failures are counted by: an error answer by its status
// and message (whatever operation met it: once the kernel stops, they all
// do), any other problem by its operation and start.
func problemKey(op, problem string) string {
	key := op + ": " + problem
	if m := refusalPrefix.FindStringSubmatch(problem); m != nil {
		key = m[1] + " " + problem[len(m[0]):]
	}
	if len(key) > 110 {
		key = key[:110] + "…"
	}
	return key
}

// ack is an answer the log must hold after a restart: a receipt, or the
// index an answer gave (a creation, an envelope, a recorded denial).
type ack struct {
	op      string
	index   uint64
	leaf    string   // hex leaf hash, when the answer gave one
	eventID string   // when the answer gave one
	actors  []string // the event's actor is one of these
	kinds   []string // its kind is one of these
	typ     string   // for actions: the type and target asked
	target  string
	subject string // for actor.created: the new actor's id
}

// expect is what an answer must be: one of kinds, by one of actors.
type expect struct {
	kinds  []string
	actors []string
	typ    string
	target string
}

func kinds(k ...string) []string  { return k }
func actors(a ...string) []string { return a }

// worker is one sender of requests.
type worker struct {
	r   *runner
	w   *world
	id  int
	rng *mrand.Rand
}

func (wk *worker) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), requestTimeout)
}

// outcome classifies an answer: "ok", or the HTTP status of a refusal;
// problem is set when the answer breaks a check (a 5xx, an unknown
// outcome, no answer).
func outcome(err error) (out, problem string) {
	if err == nil {
		return "ok", ""
	}
	var ce *client.Error
	switch {
	case errors.As(err, &ce) && ce.OutcomeUnknown:
		return "unknown", "outcome unknown: " + ce.Error()
	case errors.As(err, &ce) && ce.Status >= 500:
		return "5xx", ce.Error()
	case errors.As(err, &ce):
		return fmt.Sprint(ce.Status), ""
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout", fmt.Sprintf("no answer within %v: %v", requestTimeout, err)
	default:
		return "error", err.Error()
	}
}

// done records the answer to one request of op: its outcome, a failure if
// it breaks a check, and the receipt (or recorded denial) to read back.
func (wk *worker) done(op, req string, err error, rc *api.Receipt, e expect) string {
	ok, problem := "ok", ""
	if err == nil && rc != nil {
		switch rc.Status {
		case "committed":
		case "held":
			ok = "held"
		default:
			problem = fmt.Sprintf("receipt status %q is neither committed nor held", rc.Status)
		}
		if problem == "" {
			problem = wk.r.checkReceipt(rc, e)
		}
		if problem == "" {
			wk.r.addAck(ack{op: op, index: rc.Index, leaf: rc.LeafHash, eventID: rc.EventID, actors: e.actors,
				kinds: e.kinds, typ: e.typ, target: e.target})
		}
	}
	var ce *client.Error
	if errors.As(err, &ce) {
		wk.w.learn(ce.Message)
	}
	if errors.As(err, &ce) && ce.DenialIndex != nil && len(e.actors) > 0 {
		// A denial the kernel says it recorded must be in the log too: an
		// action.denied, or for an approval refused on re-check the
		// hold.answered that ended the hold.
		recorded := kinds("action.denied")
		if slices.Contains(e.kinds, "hold.answered") {
			recorded = kinds("hold.answered")
		}
		wk.r.addAck(ack{op: op + " (denial)", index: *ce.DenialIndex, actors: e.actors, kinds: recorded})
	}
	return wk.r.record(op, req, err, problem, ok)
}

// record counts one answer of op and records the failure it is, if it is
// one: a problem found in it, or an answer that is no answer (outcome). ok
// names the outcome of an answer without error.
func (r *runner) record(op, req string, err error, problem, ok string) string {
	out, p := outcome(err)
	if out == "ok" {
		out = ok
	}
	if problem == "" {
		problem = p
	}
	if problem != "" {
		out = "fail"
		r.failure(op, req, problem)
	} else if err != nil && r.cfg.Refusals && r.cfg.Progress != nil {
		r.progress("%s %s: %s %v", op, req, out, err)
	}
	r.count(op, out)
	return out
}

// checkReceipt checks an answer against what was asked.
func (r *runner) checkReceipt(rc *api.Receipt, e expect) string {
	switch {
	case len(rc.LeafHash) != 64:
		return fmt.Sprintf("receipt at index %d has leaf hash %q", rc.Index, rc.LeafHash)
	case rc.Index == 0:
		return "receipt at index 0, the genesis entry"
	case len(e.actors) > 0 && !slices.Contains(e.actors, rc.Actor):
		return fmt.Sprintf("receipt at index %d names actor %s, want one of %v", rc.Index, rc.Actor, e.actors)
	case e.typ != "" && (rc.Type != e.typ || rc.Target != e.target):
		return fmt.Sprintf("receipt at index %d is %s on %q, the request asked %s on %q", rc.Index, rc.Type, rc.Target, e.typ, e.target)
	}
	return ""
}

func (r *runner) addAck(a ack) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.acks = append(r.acks, a)
}
