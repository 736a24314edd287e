package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/annal-dev/annal/api"
	"github.com/annal-dev/annal/client"
)

func testOptions(t *testing.T) options {
	return options{
		dir: t.TempDir(), duration: 200 * time.Millisecond, concurrency: []int{1, 4}, sequentialN: 5, proofN: 5,
		batchSize: 256, batchAge: 10 * time.Millisecond, checkpointIv: 100 * time.Millisecond,
		governed: []int{2, 4}, holdN: 2, rebuildN: 0,
	}
}

// startPoster starts a kernel in process and a poster of root's actions to
// it, both stopped when the test ends.
func startPoster(t *testing.T) (url, cred string, p *actionPoster) {
	t.Helper()
	o := testOptions(t)
	_, url, cred, stop, err := startKernel(o.dir, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	if p, err = newActionPoster(url, cred); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.conn.Close)
	return url, cred, p
}

// A poster's submit succeeds only on the action's committed receipt; a
// refusal or a hold is an error naming it.
func TestActionPoster_CommittedReceiptOnly(t *testing.T) {
	url, _, p := startPoster(t)
	ctx := context.Background()
	for i := range 3 {
		if err := p.submit(ctx, api.ActionRequest{Type: "mutate", Target: "workspace/poster", Payload: benchPayload(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.mutate(ctx, "workspace/poster/mutate", 3); err != nil {
		t.Fatal(err)
	}
	if err := p.submit(ctx, api.ActionRequest{Type: "fly", Target: "workspace/poster"}); err == nil || !strings.Contains(err.Error(), "400") {
		t.Fatalf("invalid action: %v, want a 400 error", err)
	}
	bad, err := newActionPoster(url, "not-a-credential")
	if err != nil {
		t.Fatal(err)
	}
	defer bad.conn.Close()
	if err := bad.submit(ctx, api.ActionRequest{Type: "mutate", Target: "workspace/poster"}); err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("unknown credential: %v, want a 401 error", err)
	}
}

// The hand-made request body is the one encoding/json makes of the same
// request, and the payload the one the phases always sent.
func TestAppendMutateBody(t *testing.T) {
	for _, i := range []int{0, 7, 255, 1 << 40} {
		target := "workspace/gov/3/" + strconv.Itoa(i)
		want, err := json.Marshal(api.ActionRequest{Type: "mutate", Target: target,
			Payload: []byte(fmt.Sprintf(`{"content_oid":"sha256:%064x","bytes":%d}`, i, i))})
		if err != nil {
			t.Fatal(err)
		}
		if got := appendMutateBody(nil, target, i); string(got) != string(want) {
			t.Errorf("body %d:\n got %s\nwant %s", i, got, want)
		}
	}
}

func TestIsCommittedReceipt(t *testing.T) {
	const target = "workspace/gov/1/1"
	for _, c := range []struct {
		answer string
		want   bool
	}{
		{`{"status":"committed","index":4,"target":"workspace/gov/1/1","cost":1}`, true},
		{`{"status":"held","index":4,"target":"workspace/gov/1/1"}`, false},
		{`{"status":"committed","target":"workspace/gov/1/12"}`, false},
		{`{"status":"committed","target":"workspace/gov/1/"}`, false},
		{`{"status":"denied","reason":"\"status\":\"committed\"","target":"workspace/gov/1/1"}`, false},
		{`"status":"committed","target":"workspace/gov/1/1"`, false},
		{``, false},
	} {
		if got := isCommittedReceipt([]byte(c.answer), target); got != c.want {
			t.Errorf("isCommittedReceipt(%s) = %v, want %v", c.answer, got, c.want)
		}
	}
}

// The whole phase list runs on a small scale and prints each row,
// without the conformance server (which needs the module proxy) and
// the rebuild.
func TestRun_SmallScale(t *testing.T) {
	if testing.Short() {
		t.Skip("runs every phase")
	}
	var out bytes.Buffer
	o := testOptions(t)
	if err := run(context.Background(), o, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	for _, want := range []string{
		"annald POST /v1/actions, 4 concurrent",
		"governed actions, 4 concurrent agents",
		"governed actions, 4 agents, each through the Go client (client/)",
		"all gates (ring, rate, quarantine, session, resources, policy), 4 agents",
		"hold approve",
		// annald ran as its own process, so its CPU is told apart from
		// the load generator's.
		"annald: " + filepath.Join(o.dir, "bin", "annald") + " serve, its own process",
		"µs of annald CPU each",
		// The floor under a receipt, measured beside it.
		"overwrite + fdatasync (the WAL's form), p50",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("no %q in\n%s", want, out.String())
		}
	}
}

// With --annald in-process the kernel runs in the bench's process, whose
// CPU is the load generator's too: no CPU figures then.
func TestRun_InProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("runs every phase")
	}
	o := testOptions(t)
	o.annald, o.concurrency, o.governed = inProcess, []int{2}, []int{2}
	var out bytes.Buffer
	if err := run(context.Background(), o, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	for _, want := range []string{"the kernel in this process", "annald POST /v1/actions, 2 concurrent", "governed actions, 2 concurrent agents"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("no %q in\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "CPU each") {
		t.Errorf("CPU figures for an in-process kernel:\n%s", out.String())
	}
}

// An annald that fails to start is reported with what it said.
func TestStartAnnald_FailureSaysWhy(t *testing.T) {
	dir := t.TempDir()
	fake := filepath.Join(dir, "annald")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\necho 'annald: unknown flag: --gc-headroom' >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := startAnnald(context.Background(), fake, filepath.Join(dir, "data"), testOptions(t))
	if err == nil || !strings.Contains(err.Error(), "unknown flag: --gc-headroom") {
		t.Fatalf("start of a failing annald: %v, want its words", err)
	}
}

// processCPUOf reads a process's CPU time from /proc: this process's
// grows with work done.
func TestProcessCPUOf(t *testing.T) {
	before, err := processCPUOf(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	x := 0
	for start := time.Now(); time.Since(start) < 200*time.Millisecond; {
		x++
	}
	after, err := processCPUOf(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if d := after - before; d < 100*time.Millisecond || d > 10*time.Second {
		t.Errorf("200 ms of work took %v of CPU by /proc (x=%d)", d, x)
	}
	if _, err := processCPUOf(1 << 30); err == nil {
		t.Error("no error for a process that does not exist")
	}
}

// The governed-to-conformance ratio is a comparison of work only when the
// server's requests did not wait out its batch age.
func TestRatioNote(t *testing.T) {
	if got := ratioNote(1.02, []time.Duration{33 * time.Millisecond, 31 * time.Millisecond}); got != "1.02x of the conformance server (means)" {
		t.Errorf("at 512: %q", got)
	}
	if got := ratioNote(170.6, []time.Duration{1007 * time.Millisecond, 1008 * time.Millisecond}); !strings.Contains(got, "not a comparison of work") {
		t.Errorf("at 64, paced by the batch age: %q", got)
	}
}

// The conformance comparison's rows show every round's figure, in order,
// and the ratio is of the means.
func TestRoundFigures(t *testing.T) {
	if got := joinEach([]float64{12453.4, 9963.6, 11000}, wholeNumber); got != "12453 / 9964 / 11000" {
		t.Errorf("rates: %q", got)
	}
	if got := joinEach([]time.Duration{31 * time.Millisecond, 1500 * time.Microsecond}, fmtDur); got != fmtDur(31*time.Millisecond)+" / "+fmtDur(1500*time.Microsecond) {
		t.Errorf("latencies: %q", got)
	}
	if got := mean([]float64{10, 20, 45}); got != 25 {
		t.Errorf("mean of rates: %v", got)
	}
	if got := mean([]time.Duration{80 * time.Microsecond, 90 * time.Microsecond}); got != 85*time.Microsecond {
		t.Errorf("mean of CPU times: %v", got)
	}
	for rounds, want := range map[int]string{1: "one round", 2: "both rounds", 4: "all 4 rounds"} {
		if got := everyRound(rounds); got != want {
			t.Errorf("everyRound(%d) = %q, want %q", rounds, got, want)
		}
	}
}

// --rounds below one is refused before anything runs.
func TestRoundsFlag_Refused(t *testing.T) {
	for _, arg := range []string{"--rounds=0", "--rounds=-2"} {
		cmd := newCommand()
		var out bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetErr(&out)
		cmd.SetArgs([]string{arg, "--dir", t.TempDir()})
		err := cmd.Execute()
		if err == nil || !strings.Contains(err.Error(), "1 or more") {
			t.Errorf("%s: %v", arg, err)
		}
		if strings.Contains(out.String(), "annal-bench:") {
			t.Errorf("%s: ran anyway:\n%s", arg, out.String())
		}
	}
}

// settle returns once annald's checkpoint covers every entry it has
// answered for, which a receipt does not wait for.
func TestSettle_WaitsForTheCheckpoint(t *testing.T) {
	url, cred, p := startPoster(t)
	ctx := context.Background()
	for i := range 20 {
		if err := p.mutate(ctx, "workspace/settle/"+strconv.Itoa(i), i); err != nil {
			t.Fatal(err)
		}
	}
	srv := &benchServer{url: url, cred: cred}
	if err := settle(ctx, srv); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(url, cred)
	if err != nil {
		t.Fatal(err)
	}
	info, err := c.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.Size < 21 || info.CheckpointSize < info.Size {
		t.Fatalf("after settle: %d entries, checkpoint of %d", info.Size, info.CheckpointSize)
	}
}
