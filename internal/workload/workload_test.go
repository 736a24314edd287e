package workload

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/annal-dev/annal/internal/klogtest"
)

func TestMain(m *testing.M) { klogtest.Main(m) }

// TestWorkload runs the workload: a few seconds by default, so that the
// race detector's run of every test stays short; ANNAL_WORKLOAD=60s (any
// duration) runs it that long, ANNAL_WORKLOAD_SEED picks the seed
// (default: the time, printed), ANNAL_WORKLOAD_ONLY and ANNAL_WORKLOAD_SKIP
// (comma-separated operation names) narrow what it draws, and
// ANNAL_WORKLOAD_REFUSALS=1 (with -v) prints every refusal.
func TestWorkload(t *testing.T) {
	d := 3 * time.Second
	restarts := 1
	if v := os.Getenv("ANNAL_WORKLOAD"); v != "" {
		var err error
		if d, err = time.ParseDuration(v); err != nil {
			t.Fatalf("ANNAL_WORKLOAD=%q: %v", v, err)
		}
		restarts = int(d / (20 * time.Second))
	}
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("ANNAL_WORKLOAD_SEED"); v != "" {
		var err error
		if seed, err = strconv.ParseUint(v, 10, 64); err != nil {
			t.Fatalf("ANNAL_WORKLOAD_SEED=%q: %v", v, err)
		}
	}
	workers := 16
	if testing.Short() {
		d, restarts = time.Second, 0
	}
	t.Logf("seed %d, %v, %d workers, %d restarts (ANNAL_WORKLOAD_SEED=%d ANNAL_WORKLOAD=%v repeats the workers' choices)", seed, d, workers, restarts, seed, d)
	rep, err := Run(context.Background(), Config{Seed: seed, Duration: d, Workers: workers, Restarts: restarts, Dir: t.TempDir(),
		Refusals: os.Getenv("ANNAL_WORKLOAD_REFUSALS") != "",
		Only:     list(os.Getenv("ANNAL_WORKLOAD_ONLY")), Skip: list(os.Getenv("ANNAL_WORKLOAD_SKIP")),
		Progress: func(line string) {
			if testing.Verbose() || strings.Contains(line, "FAIL") {
				t.Log(line)
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	rep.WriteTable(&b)
	t.Log("\n" + b.String())
	if rep.Failed() {
		t.Fatalf("the workload failed with seed %d (ANNAL_WORKLOAD_SEED=%d ANNAL_WORKLOAD=%v repeats the workers' choices)", seed, seed, d)
	}
}

func list(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

// A handler's panic is reported by its first line and the frame of
// Annal's code that panicked.
func TestSummarizePanic(t *testing.T) {
	msg := "http: panic serving 127.0.0.1:40000: runtime error: invalid memory address or nil pointer dereference\n" +
		"goroutine 403 [running]:\nnet/http.(*conn).serve.func1()\n\t/usr/local/go/src/net/http/server.go:1897 +0xbd\n" +
		"panic({0x1213500?, 0x1df1500?})\n\t/usr/local/go/src/runtime/panic.go:860 +0x13a\n" +
		"github.com/annal-dev/annal/kernel.(*Kernel).Quarantine(0x22ee930ae008, {0x1422ee0?, 0x22ee93ad9180?})\n" +
		"\t/work/somewhere/kernel/killswitch.go:167 +0x55d\n"
	want := "a handler panicked: runtime error: invalid memory address or nil pointer dereference in kernel.(*Kernel).Quarantine (kernel/killswitch.go:167)"
	if got := summarizePanic(msg); got != want {
		t.Errorf("summarizePanic:\n got %s\nwant %s", got, want)
	}
}
