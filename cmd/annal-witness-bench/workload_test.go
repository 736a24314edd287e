package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/annal-dev/annal/checkpoints"
	"github.com/annal-dev/annal/cmd/annal-bench/loadconn"
	"github.com/annal-dev/annal/witness"
	"github.com/annal-dev/annal/witness/witnesstest"
	fnote "github.com/transparency-dev/formats/note"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
)

// inProcessWitness is an annal-witness (package witness) for logs, served
// by httptest on 127.0.0.1, with its state in a test folder.
type inProcessWitness struct {
	srv   *httptest.Server
	store *witness.Store
}

func newInProcessWitness(t *testing.T, logs []*benchLog, wrap func(http.Handler) http.Handler) *inProcessWitness {
	t.Helper()
	w := witnesstest.Start(t, "bench.test/witness", wrap)
	for _, l := range logs {
		if err := w.Store.AddLog(witness.LogConfig{Origin: l.origin, Keys: []string{l.vkey}}); err != nil {
			t.Fatal(err)
		}
	}
	return &inProcessWitness{srv: w.Server, store: w.Store}
}

// storedSize is the size of the latest checkpoint the witness cosigned for
// the log.
func (w *inProcessWitness) storedSize(t *testing.T, l *benchLog) uint64 {
	t.Helper()
	c, err := w.store.Latest(witness.LogID(l.origin))
	if err != nil {
		t.Fatalf("%s: %v", l.origin, err)
	}
	return c.Size
}

func testLogs(t *testing.T, n int) []*benchLog {
	t.Helper()
	logs, err := newBenchLogs(n)
	if err != nil {
		t.Fatal(err)
	}
	return logs
}

func testWorkload(steps int) workload {
	return workload{duration: time.Minute, steps: steps, maxGrow: DefaultMaxGrow, timeout: 10 * time.Second, maxAttempts: 10, backoff: time.Millisecond}
}

// sizeAfter is the size of a log's tree after steps steps: the workload
// depends only on the log.
func sizeAfter(l *benchLog, steps int) uint64 {
	w := newLogWriter(l, DefaultMaxGrow)
	for range steps {
		w.step()
	}
	return w.size
}

func checkClean(t *testing.T, m *measurement, wantOK int) {
	t.Helper()
	if m.ok != wantOK || m.sent != wantOK || m.errorCount() != 0 || m.retries != 0 || len(m.gaveUp) != 0 {
		t.Fatalf("ok %d, sent %d, errors %s, retries %d, stopped %v; want %d cosigned and nothing else",
			m.ok, m.sent, m.errorSummary(), m.retries, m.gaveUp, wantOK)
	}
	if len(m.latencies) != wantOK {
		t.Fatalf("%d latencies for %d cosignatures", len(m.latencies), wantOK)
	}
}

// Every request of the workload is one annal-witness cosigns, and the
// witness ends at each log's tree size.
func TestWorkload_AcceptedByAnnalWitness(t *testing.T) {
	logs := testLogs(t, 4)
	w := newInProcessWitness(t, logs, nil)
	const steps = 25
	m := testWorkload(steps).run(context.Background(), "annal-witness", w.srv.URL, logs)
	checkClean(t, m, len(logs)*steps)
	for _, l := range logs {
		if got, want := w.storedSize(t, l), sizeAfter(l, steps); got != want {
			t.Errorf("%s: witness at size %d, log at %d", l.origin, got, want)
		}
	}
}

// A second run of the same logs against a fresh witness sends the same
// checkpoints: both witnesses of a comparison get the same workload.
func TestWorkload_SameForEveryWitness(t *testing.T) {
	logs := testLogs(t, 2)
	var bodies [2][][]byte
	for run := range bodies {
		w := newLogWriter(logs[1], DefaultMaxGrow)
		for range 5 {
			w.step()
			body, err := w.request()
			if err != nil {
				t.Fatal(err)
			}
			bodies[run] = append(bodies[run], body)
			w.witnessSize = w.size
		}
	}
	for i := range bodies[0] {
		if !bytes.Equal(bodies[0][i], bodies[1][i]) {
			t.Fatalf("request %d differs between runs:\n%s\n%s", i, bodies[0][i], bodies[1][i])
		}
	}
}

// The body is c2sp.org/tlog-witness's: the old size, a consistency proof
// that verifies, and a checkpoint signed by the log's key; whether prepared
// before measuring or made when sent.
func TestRequest_IsTLogWitnessBody(t *testing.T) {
	for _, prepared := range []int{0, 12} {
		t.Run(fmt.Sprintf("prepared=%d", prepared), func(t *testing.T) {
			l := testLogs(t, 1)[0]
			if err := l.prepare(DefaultMaxGrow, prepared); err != nil {
				t.Fatal(err)
			}
			verifier, err := checkpoints.NewLogVerifier(l.vkey)
			if err != nil {
				t.Fatal(err)
			}
			w := newLogWriter(l, DefaultMaxGrow)
			// A second tree, grown along, gives the old roots.
			mirror := newLogWriter(l, DefaultMaxGrow)
			for step := range 20 {
				old, oldRoot := mirror.tree.Size(), mirror.tree.Hash()
				w.step()
				body, err := w.request()
				if err != nil {
					t.Fatal(err)
				}
				mirror.growTo(w.size)
				req, err := witness.ParseAddCheckpointRequest(body)
				if err != nil {
					t.Fatalf("step %d: %v\n%s", step, err, body)
				}
				if req.OldSize != old || req.Checkpoint.Size != w.size || req.Checkpoint.Origin != l.origin {
					t.Fatalf("step %d: old %d, size %d, origin %q; want %d, %d, %q", step, req.OldSize, req.Checkpoint.Size, req.Checkpoint.Origin, old, w.size, l.origin)
				}
				if req.Checkpoint.Hash != [32]byte(mirror.tree.Hash()) {
					t.Fatalf("step %d: checkpoint root is not the tree's", step)
				}
				if _, err := checkpoints.OpenCheckpoint(req.SignedCheckpoint, verifier); err != nil {
					t.Fatalf("step %d: log signature: %v", step, err)
				}
				if old == 0 {
					if len(req.Proof) != 0 {
						t.Fatalf("step %d: %d proof lines from size 0", step, len(req.Proof))
					}
				} else {
					p := make([][]byte, len(req.Proof))
					for i := range req.Proof {
						p[i] = req.Proof[i][:]
					}
					if err := proof.VerifyConsistency(rfc6962.DefaultHasher, old, req.Checkpoint.Size, p, oldRoot, req.Checkpoint.Hash[:]); err != nil {
						t.Fatalf("step %d: consistency proof: %v", step, err)
					}
				}
				w.witnessSize = w.size
			}
			if want := 20 - prepared; w.madeLive != want {
				t.Fatalf("%d requests made live, want %d (%d prepared)", w.madeLive, want, prepared)
			}
		})
	}
}

// A prepared request is the same bytes as the one made when sent: a
// measurement with prepared requests sends the workload one without sends.
func TestPrepare_SameBytesAsMadeWhenSent(t *testing.T) {
	l := testLogs(t, 1)[0]
	unprepared := *l
	if err := l.prepare(DefaultMaxGrow, 30); err != nil {
		t.Fatal(err)
	}
	if len(l.prepared) != 30 {
		t.Fatalf("%d prepared, want 30", len(l.prepared))
	}
	a, b := newLogWriter(l, DefaultMaxGrow), newLogWriter(&unprepared, DefaultMaxGrow)
	for step := range 30 {
		a.step()
		b.step()
		ba, err := a.request()
		if err != nil {
			t.Fatal(err)
		}
		bb, err := b.request()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(ba, bb) {
			t.Fatalf("step %d: prepared\n%s\nmade when sent\n%s", step, ba, bb)
		}
		a.witnessSize, b.witnessSize = a.size, b.size
	}
	if a.madeLive != 0 || b.madeLive != 30 {
		t.Fatalf("made live: %d prepared, %d unprepared; want 0 and 30", a.madeLive, b.madeLive)
	}
}

// A run partly prepared is cosigned step by step like one made live, and
// counts the requests it made while measuring.
func TestWorkload_PreparedThenLive(t *testing.T) {
	logs := testLogs(t, 3)
	if err := prepareLogs(logs, DefaultMaxGrow, 10); err != nil {
		t.Fatal(err)
	}
	w := newInProcessWitness(t, logs, nil)
	const steps = 25
	m := testWorkload(steps).run(context.Background(), "annal-witness", w.srv.URL, logs)
	checkClean(t, m, len(logs)*steps)
	if want := len(logs) * (steps - 10); m.madeLive != want {
		t.Fatalf("%d requests made while measuring, want %d", m.madeLive, want)
	}
	for _, l := range logs {
		if got, want := w.storedSize(t, l), sizeAfter(l, steps); got != want {
			t.Errorf("%s: witness at size %d, log at %d", l.origin, got, want)
		}
	}
}

// A witness ahead of the client answers 409 with its size; the client
// retries from that size and the step is cosigned. Prepared requests are
// of the path the 409 left: the rest are made when sent.
func TestWorkload_409ResyncsFromWitnessSize(t *testing.T) {
	for _, prepared := range []int{0, 3} {
		t.Run(fmt.Sprintf("prepared=%d", prepared), func(t *testing.T) {
			logs := testLogs(t, 1)
			w := newInProcessWitness(t, logs, nil)
			// Another client of the same log moved the witness to size 40,
			// beyond the first step (at most 16 entries).
			ahead := newLogWriter(logs[0], DefaultMaxGrow)
			ahead.size = 40
			body, err := ahead.request()
			if err != nil {
				t.Fatal(err)
			}
			conn, err := loadconn.New(w.srv.URL+"/add-checkpoint", nil, 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			code, answer, err := conn.Post(context.Background(), body)
			if err != nil || code != http.StatusOK {
				t.Fatalf("moving the witness to 40: %d %q %v", code, answer, err)
			}
			if err := logs[0].prepare(DefaultMaxGrow, prepared); err != nil {
				t.Fatal(err)
			}
			m := testWorkload(3).run(context.Background(), "annal-witness", w.srv.URL, logs)
			if m.ok != 3 || m.errors["409"] != 1 || m.errorCount() != 1 || m.retries != 1 || len(m.gaveUp) != 0 {
				t.Fatalf("ok %d, errors %s, retries %d, stopped %v; want 3 cosigned, one 409 retried", m.ok, m.errorSummary(), m.retries, m.gaveUp)
			}
			if want := 4 - min(prepared, 1); m.madeLive != want {
				t.Fatalf("%d requests made while measuring, want %d", m.madeLive, want)
			}
			if got := w.storedSize(t, logs[0]); got < 40 {
				t.Fatalf("witness at %d, want at least 40", got)
			}
		})
	}
}

// A witness's pushback (429) is an error, and the step is retried after a
// backoff until it is cosigned.
func TestWorkload_429RetriedWithBackoff(t *testing.T) {
	logs := testLogs(t, 2)
	var n atomic.Int64
	pushback := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			if n.Add(1)%3 == 0 {
				http.Error(rw, "busy", http.StatusTooManyRequests)
				return
			}
			h.ServeHTTP(rw, r)
		})
	}
	w := newInProcessWitness(t, logs, pushback)
	const steps = 10
	m := testWorkload(steps).run(context.Background(), "annal-witness", w.srv.URL, logs)
	if m.ok != len(logs)*steps || m.errors["429"] == 0 || m.errorCount() != m.errors["429"] || m.retries != m.errors["429"] || len(m.gaveUp) != 0 {
		t.Fatalf("ok %d, errors %s, retries %d, stopped %v", m.ok, m.errorSummary(), m.retries, m.gaveUp)
	}
	if m.sent != m.ok+m.errorCount() {
		t.Fatalf("sent %d, want %d cosigned + %d refused", m.sent, m.ok, m.errorCount())
	}
}

// The duration bounds a run with no step count.
func TestWorkload_DurationBoundsRun(t *testing.T) {
	logs := testLogs(t, 2)
	w := newInProcessWitness(t, logs, nil)
	wl := testWorkload(0)
	wl.duration = 300 * time.Millisecond
	start := time.Now()
	m := wl.run(context.Background(), "annal-witness", w.srv.URL, logs)
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("a %v run took %v", wl.duration, took)
	}
	if m.ok == 0 || m.errorCount() != 0 {
		t.Fatalf("ok %d, errors %s", m.ok, m.errorSummary())
	}
}

func TestParseSizeAnswer_TLogSize(t *testing.T) {
	for _, tc := range []struct {
		body string
		want uint64
		ok   bool
	}{
		{"0\n", 0, true},
		{"1234\n", 1234, true},
		{"1234", 0, false},
		{"01\n", 0, false},
		{"\n", 0, false},
		{"12 \n", 0, false},
		{"", 0, false},
	} {
		got, err := parseSizeAnswer([]byte(tc.body))
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("parseSizeAnswer(%q) = %d, %v; want %d, ok %v", tc.body, got, err, tc.want, tc.ok)
		}
	}
}

func TestPercentile_NearestRank(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		d := make([]time.Duration, len(v))
		for i := range v {
			d[i] = time.Duration(v[i]) * time.Millisecond
		}
		return d
	}
	for _, tc := range []struct {
		d    []time.Duration
		p    float64
		want time.Duration
	}{
		{nil, 50, 0},
		{ms(7), 99, 7 * time.Millisecond},
		{ms(4, 1, 3, 2), 50, 2 * time.Millisecond},
		{ms(4, 1, 3, 2), 99, 4 * time.Millisecond},
		{ms(10, 9, 8, 7, 6, 5, 4, 3, 2, 1), 90, 9 * time.Millisecond},
	} {
		if got := percentile(tc.d, tc.p); got != tc.want {
			t.Errorf("percentile(%v, %v) = %v, want %v", tc.d, tc.p, got, tc.want)
		}
	}
}

// The -additional_logs file follows omniwitness.ConfigYAML: a "Logs" list
// of Origin and PublicKey.
func TestOmniwitnessLogsYAML_Schema(t *testing.T) {
	logs := []*benchLog{
		{origin: "bench.example/log-0", vkey: "bench.example/log-0+01234567+AQID"},
		{origin: "bench.example/log-1", vkey: "bench.example/log-1+89abcdef+BAUG"},
	}
	want := `Logs:
  - Origin: "bench.example/log-0"
    PublicKey: "bench.example/log-0+01234567+AQID"
  - Origin: "bench.example/log-1"
    PublicKey: "bench.example/log-1+89abcdef+BAUG"
`
	if got := string(omniwitnessLogsYAML(logs)); got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}

// omniwitness reads its key with formats/note.NewSignerForCosignatureV1.
func TestOmniwitnessKey_ReadByCosignatureV1Signer(t *testing.T) {
	skey, err := newOmniwitnessKey(omniwitnessName)
	if err != nil {
		t.Fatal(err)
	}
	s, err := fnote.NewSignerForCosignatureV1(skey)
	if err != nil {
		t.Fatal(err)
	}
	if s.Name() != omniwitnessName {
		t.Fatalf("key name %q, want %q", s.Name(), omniwitnessName)
	}
}

// The real annal-witness binary, configured with `logs add` and run with
// `serve`, cosigns the workload, and stops on SIGTERM.
func TestAnnalWitnessBinary_LogsAddAndServe(t *testing.T) {
	if testing.Short() {
		t.Skip("builds annal-witness")
	}
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command to build annal-witness with")
	}
	ctx := context.Background()
	dir := t.TempDir()
	bin, err := buildAnnalWitness(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	logs := testLogs(t, 3)
	p, err := startAnnalWitness(ctx, bin, dir, logs)
	if err != nil {
		t.Fatal(err)
	}
	defer p.stop()
	const steps = 5
	m := testWorkload(steps).run(ctx, "annal-witness", p.url, logs)
	checkClean(t, m, len(logs)*steps)
	p.stop()
	select {
	case <-p.exited:
	default:
		t.Fatal("annal-witness still running after stop")
	}
}

// --prepare: as given, else --steps, else enough for DefaultPreparedRate
// over --duration; below -1 refused.
func TestOptions_PreparedSteps(t *testing.T) {
	base := options{logs: 100, duration: 10 * time.Second, maxGrow: 1, timeout: time.Second, rounds: 1}
	for _, tc := range []struct {
		prepare, steps int
		want           int
	}{
		{-1, 0, 10 * DefaultPreparedRate / 100},
		{-1, 7, 7},
		{0, 7, 0},
		{5, 0, 5},
	} {
		o := base
		o.prepare, o.steps = tc.prepare, tc.steps
		if err := o.validate(); err != nil {
			t.Fatalf("%+v: %v", tc, err)
		}
		if got := o.preparedSteps(); got != tc.want {
			t.Errorf("--prepare %d --steps %d: %d prepared, want %d", tc.prepare, tc.steps, got, tc.want)
		}
	}
	o := base
	o.prepare = -2
	if err := o.validate(); err == nil {
		t.Fatal("--prepare -2 accepted")
	}
}

// The ratios are by round and of the means, and the verdict is on the
// ratio of the means against the configuration with the higher mean.
func TestPrintResults_RatiosOfMeans(t *testing.T) {
	logs := 64
	m := func(name string, round, ok int) *measurement {
		return &measurement{witness: name, round: round, logs: logs, ok: ok, sent: ok, elapsed: time.Second, errors: map[string]int{}}
	}
	results := []*measurement{
		m("annal-witness", 1, 4800), m("omniwitness", 1, 500), m("omniwitness --db_max_conns=1", 1, 2000),
		m("annal-witness", 2, 5400), m("omniwitness", 2, 600), m("omniwitness --db_max_conns=1", 2, 2000),
	}
	var out bytes.Buffer
	if err := printResults(&out, results); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"ratio annal-witness / omniwitness: 9.60×, 9.00× by round; 9.27× of the means",
		"ratio annal-witness / omniwitness --db_max_conns=1: 2.40×, 2.70× by round; 2.55× of the means",
		"target annal-witness ≥ 2.5× the fastest omniwitness (omniwitness --db_max_conns=1) with 64 logs, means of 2 rounds: 2.55×, met (met in 1 of 2 rounds)",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("no %q in\n%s", want, out.String())
		}
	}
	results[3].ok = 4000 // means 4400 / 2000 = 2.2
	out.Reset()
	if err := printResults(&out, results); err != nil {
		t.Fatal(err)
	}
	if want := "means of 2 rounds: 2.20×, NOT met (met in 0 of 2 rounds)"; !strings.Contains(out.String(), want) {
		t.Errorf("no %q in\n%s", want, out.String())
	}
	// With one log (one client) the target is to match omniwitness.
	logs = 1
	results = []*measurement{m("annal-witness", 1, 1150), m("omniwitness", 1, 1000), m("annal-witness", 2, 950), m("omniwitness", 2, 1000)}
	out.Reset()
	if err := printResults(&out, results); err != nil {
		t.Fatal(err)
	}
	if want := "target annal-witness ≥ 1.0× the fastest omniwitness (omniwitness) with 1 log, means of 2 rounds: 1.05×, met (met in 1 of 2 rounds)"; !strings.Contains(out.String(), want) {
		t.Errorf("no %q in\n%s", want, out.String())
	}
}

// Rounds alternate the order of the witnesses: A, B, C in odd rounds,
// C, B, A in even ones, so that no witness always follows the same one.
func TestRoundOrder_ReversedEveryOtherRound(t *testing.T) {
	sides := []side{{name: "a"}, {name: "b"}, {name: "c"}}
	var got []string
	for round := 1; round <= 3; round++ {
		for _, s := range roundOrder(sides, round) {
			got = append(got, s.name)
		}
	}
	if strings.Join(got, "") != "abccbaabc" {
		t.Errorf("order %v, want a b c c b a a b c", got)
	}
	if sides[0].name != "a" {
		t.Error("roundOrder reordered its argument")
	}
}
