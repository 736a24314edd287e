package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/annal-dev/annal/api"
	"github.com/annal-dev/annal/internal/servicestest"
)

// outcome is one request through the balancer: when it ended, whether it
// was a write, which kernel answered (Annal-Served-By) and how it ended:
// "ok", or an error's kind.
type outcome struct {
	sent   time.Time
	at     time.Time
	write  bool
	server string
	kind   string
	path   string
	body   string // of an answer that is not ok
}

// outcomeKind names how a request ended: ok; "retry-503" (nothing done,
// Retry-After); "outcome-unknown" (a write that may be logged);
// "status-N" for another answer; "transport" when no answer came.
func outcomeKind(resp *http.Response, body []byte, err error) string {
	if err != nil {
		return "transport"
	}
	if resp.StatusCode < 300 {
		return "ok"
	}
	var e api.Error
	json.Unmarshal(body, &e)
	switch {
	case e.OutcomeUnknown:
		return "outcome-unknown"
	case resp.StatusCode == http.StatusServiceUnavailable && resp.Header.Get("Retry-After") != "":
		return "retry-503"
	}
	return fmt.Sprintf("status-%d", resp.StatusCode)
}

// clusterLoad sends writes and reads through the balancer at base until
// stop closes (each client at most maxRequests), recording every outcome
// and every receipt.
type clusterLoad struct {
	base, cred string
	http       *http.Client
	lastIndex  atomic.Uint64

	mu       sync.Mutex
	outcomes []outcome
	acks     []ack
}

const maxRequests = 20000

func (l *clusterLoad) record(o outcome, a *ack) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.outcomes = append(l.outcomes, o)
	if a != nil {
		l.acks = append(l.acks, *a)
	}
}

func (l *clusterLoad) do(method, path string, body []byte) (*http.Response, []byte, error) {
	req, err := http.NewRequest(method, l.base+path, bytes.NewReader(body))
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+l.cred)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := l.http.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	return resp, out, err
}

func (l *clusterLoad) writer(stop <-chan struct{}) {
	body := []byte(`{"type":"mutate","target":"workspace/cluster"}`)
	for i := 0; i < maxRequests; i++ {
		select {
		case <-stop:
			return
		default:
		}
		sent := time.Now()
		resp, out, err := l.do("POST", "/v1/actions", body)
		o := outcome{sent: sent, at: time.Now(), write: true, kind: outcomeKind(resp, out, err)}
		if o.kind != "ok" {
			o.body = string(out)
		}
		if resp != nil {
			o.server = resp.Header.Get("Annal-Served-By")
		}
		var a *ack
		if o.kind == "ok" {
			var rc api.Receipt
			if err := json.Unmarshal(out, &rc); err != nil {
				o.kind = "bad-receipt"
			} else {
				a = &ack{rc.Index, rc.LeafHash, o.server}
				if rc.Index > l.lastIndex.Load() {
					l.lastIndex.Store(rc.Index)
				}
			}
		}
		l.record(o, a)
		if o.kind != "ok" {
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// reader reads, by which: the entry a writer was given last (which the
// kernel may have to wait for: it is read from the log), a page of
// history (from the kernel's folded state), or the checkpoint.
func (l *clusterLoad) reader(which int, stop <-chan struct{}) {
	for i := 0; i < maxRequests; i++ {
		select {
		case <-stop:
			return
		default:
		}
		var path string
		switch which {
		case 0:
			path = fmt.Sprintf("/v1/events/%d", l.lastIndex.Load())
		case 1:
			path = "/v1/events?" + url.Values{"kind": {"action"}, "limit": {"5"}}.Encode()
		default:
			path = "/checkpoint"
		}
		sent := time.Now()
		resp, out, err := l.do("GET", path, nil)
		o := outcome{sent: sent, at: time.Now(), kind: outcomeKind(resp, out, err), path: path}
		if o.kind != "ok" {
			o.body = string(out)
		}
		if resp != nil {
			o.server = resp.Header.Get("Annal-Served-By")
		}
		l.record(o, nil)
		time.Sleep(5 * time.Millisecond)
	}
}

// summary counts outcomes by write/read, kind and kernel.
func summary(os []outcome) string {
	counts := map[string]int{}
	for _, o := range os {
		what := "read"
		if o.write {
			what = "write"
		}
		counts[fmt.Sprintf("%s %s via %s", what, o.kind, o.server)]++
	}
	var lines []string
	for k, n := range counts {
		lines = append(lines, fmt.Sprintf("%6d %s", n, k))
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

func hostOf(u string) string { return strings.TrimPrefix(strings.TrimPrefix(u, "http://"), "https://") }

// Three kernels on one shared log behind a real load balancer (HAProxy,
// round robin, health-checked on /v1/readyz): writers and readers spread
// over all three, each kernel answers both (followers serve reads and
// forward writes to the lease holder). The holder is killed (SIGKILL): a
// follower takes over, no acknowledged write is lost (every receipt's
// entry is in the log at its index), and no request fails outside the
// takeover window, from the kill until the first write the new holder
// acknowledged (errors are counted and reported by kind).
func TestSpec002_StatelessExecution_AnyInstanceHandlesAnyRequest(t *testing.T) {
	a := servicestest.NewAWS(t)
	dir0 := t.TempDir()
	lease := []string{"--lease-ttl", "2s", "--checkpoint-interval", "1s"}
	kernels := []*daemon{startAWSDaemon(t, dir0, a, append(lease, "--lease-holder", "kernel0")...)}
	cred := kernels[0].rootCredential(t)
	for _, name := range []string{"kernel1", "kernel2"} {
		kernels = append(kernels, startAWSDaemon(t, copyIdentity(t, dir0), a, append(lease, "--lease-holder", name)...))
	}
	waitFollowing(t, kernels[1].url)
	waitFollowing(t, kernels[2].url)
	lb := servicestest.NewHAProxy(t, []string{hostOf(kernels[0].url), hostOf(kernels[1].url), hostOf(kernels[2].url)})
	// HAProxy's first health checks: every kernel in before the load.
	time.Sleep(time.Second)

	load := &clusterLoad{base: lb.URL, cred: cred, http: &http.Client{Timeout: 10 * time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: 32, Proxy: nil}}}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := 0; i < 6; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); load.writer(stop) }()
	}
	for i := 0; i < 6; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); load.reader(i%3, stop) }()
	}
	time.Sleep(3 * time.Second)
	killed := time.Now()
	kernels[0].kill(t)
	// Until one of the others holds the lease and acknowledges writes.
	var tookOver time.Time
	for deadline := time.Now().Add(60 * time.Second); tookOver.IsZero(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			close(stop)
			wg.Wait()
			t.Fatalf("no write acknowledged after the kill:\n%s", summary(load.outcomes))
		}
		load.mu.Lock()
		for _, o := range load.outcomes {
			// Sent after the kill: one in flight may have been answered
			// by the old holder.
			if o.write && o.kind == "ok" && o.sent.After(killed) {
				tookOver = o.at
				break
			}
		}
		load.mu.Unlock()
	}
	time.Sleep(3 * time.Second)
	close(stop)
	wg.Wait()

	var before, window, after []outcome
	for _, o := range load.outcomes {
		switch {
		case o.at.Before(killed):
			before = append(before, o)
		case !o.at.After(tookOver):
			window = append(window, o)
		default:
			after = append(after, o)
		}
	}
	for _, o := range window {
		if o.kind != "ok" && o.kind != "retry-503" {
			t.Logf("in the window: %s %s via %s: %.200s", o.kind, o.path, o.server, o.body)
		}
	}
	t.Logf("takeover window %v (lease 2s)\nbefore the kill:\n%s\nin the takeover window:\n%s\nafter it:\n%s",
		tookOver.Sub(killed).Round(time.Millisecond), summary(before), summary(window), summary(after))
	served := map[string]map[bool]int{}
	for _, o := range before {
		if o.kind != "ok" {
			t.Errorf("before the kill, a request failed: %+v", o)
		} else {
			if served[o.server] == nil {
				served[o.server] = map[bool]int{}
			}
			served[o.server][o.write]++
		}
	}
	for _, name := range []string{"kernel0", "kernel1", "kernel2"} {
		if served[name][true] == 0 || served[name][false] == 0 {
			t.Errorf("before the kill, %s answered %d writes and %d reads: the balancer did not spread the load", name, served[name][true], served[name][false])
		}
	}
	// Outside the window no request fails: those sent after the
	// takeover all succeed.
	for _, o := range after {
		if o.kind != "ok" && o.sent.After(tookOver) {
			t.Errorf("%v after the takeover, a request failed: %+v", o.sent.Sub(tookOver).Round(time.Millisecond), o)
		}
	}
	// No acknowledged write lost: every receipt is in the log at its index.
	var next *daemon
	for _, d := range kernels[1:] {
		if strings.Contains(d.stdout.String(), "annald: write lease held as") {
			next = d
		}
	}
	if next == nil {
		t.Fatal("neither follower says it holds the write lease")
	}
	next.waitActive(t, 10*time.Second)
	if len(load.acks) == 0 {
		t.Fatal("no receipts")
	}
	checkAcksInLog(t, next.client(t, cred), load.acks)
	t.Logf("%d receipts checked in the log", len(load.acks))
}

// checkAcksInLog: every receipt's entry is in the log at its index, with
// its leaf hash.
func checkAcksInLog(t *testing.T, c interface {
	Event(context.Context, uint64) ([]byte, error)
}, acks []ack) {
	t.Helper()
	seen := map[uint64]string{}
	for _, a := range acks {
		if by, dup := seen[a.index]; dup {
			t.Fatalf("index %d acknowledged twice (%s and %s)", a.index, by, a.by)
		}
		seen[a.index] = a.by
	}
	for _, a := range acks {
		entry, err := c.Event(context.Background(), a.index)
		if err != nil {
			t.Fatalf("receipt %d by %s: %v", a.index, a.by, err)
		}
		if leafHash(entry) != a.leaf {
			t.Fatalf("receipt %d by %s: the log holds another entry there", a.index, a.by)
		}
	}
}

func leafHash(entry []byte) string {
	leaf := sha256.Sum256(append([]byte{0}, entry...))
	return hex.EncodeToString(leaf[:])
}
