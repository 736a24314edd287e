package witness

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestCAS_RacingRequestsFromSameOldSize is the race of c2sp.org/tlog-witness:
// requests from one old size, sent at once, must not both be cosigned, or
// the witness would roll its view of the log back.
func TestCAS_RacingRequestsFromSameOldSize(t *testing.T) {
	tw := startWitness(t, t.TempDir(), Options{})
	l := newTestLog(t, "example.com/log").growTo(5 + 32*5)
	tw.addLog(l)
	tw.mustCosign(l.request(0, 5))
	old := uint64(5)
	for round := range 5 {
		const racers = 32
		bodies := make([][]byte, racers)
		for i := range bodies {
			bodies[i] = l.request(old, old+1+uint64(i))
		}
		answers := make([]answer, racers)
		var start, done sync.WaitGroup
		start.Add(1)
		for i := range racers {
			done.Add(1)
			go func() {
				defer done.Done()
				start.Wait()
				answers[i] = tw.post(bodies[i])
			}()
		}
		start.Done()
		done.Wait()
		winner := -1
		for i, a := range answers {
			switch a.status {
			case http.StatusOK:
				if winner >= 0 {
					t.Fatalf("round %d: requests %d and %d from old size %d were both cosigned", round, winner, i, old)
				}
				winner = i
			case http.StatusConflict:
			default:
				t.Fatalf("round %d: request %d got %d %q, want 200 or 409", round, i, a.status, a.body)
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: no request was cosigned", round)
		}
		won := old + 1 + uint64(winner)
		for i, a := range answers {
			if i != winner && a.body != strconv.FormatUint(won, 10)+"\n" {
				t.Errorf("round %d: loser %d got %q, want the winner's size %d", round, i, a.body, won)
			}
		}
		if got := tw.storedSize(l.origin); got != int64(won) {
			t.Fatalf("round %d: stored size %d, want the winner's %d", round, got, won)
		}
		old = won
	}
}

// TestCAS_ManyLogsAtOnce runs requests of many logs concurrently, so that
// the committer groups them, and checks each log's chain of cosignatures.
func TestCAS_ManyLogsAtOnce(t *testing.T) {
	tw := startWitness(t, t.TempDir(), Options{})
	const logs, steps = 16, 10
	var wg sync.WaitGroup
	for i := range logs {
		l := newTestLog(t, "example.com/log"+strconv.Itoa(i)).growTo(steps * 3)
		tw.addLog(l)
		bodies := make([][]byte, steps)
		for s := range steps {
			bodies[s] = l.request(uint64(s)*3, uint64(s+1)*3)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, b := range bodies {
				if a := tw.post(b); a.status != http.StatusOK {
					t.Errorf("%s: %d %q", l.origin, a.status, a.body)
					return
				}
			}
		}()
	}
	wg.Wait()
	logsNow, err := tw.store.Logs()
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range logsNow {
		if st.Latest == nil || st.Latest.Size != steps*3 {
			t.Errorf("%s: latest %+v, want size %d", st.Origin, st.Latest, steps*3)
		}
	}
}

func TestRestart_KeepsStateAndKey(t *testing.T) {
	dir := t.TempDir()
	l := newTestLog(t, "example.com/log").growTo(30)
	fork := l.fork(8).growTo(30)

	tw := startWitness(t, dir, Options{})
	tw.addLog(l)
	tw.mustCosign(l.request(0, 5))
	tw.mustCosign(l.request(5, 12))
	vkey := tw.w.Cosigner().VerifierKey()
	servedBefore := tw.get(checkpointPath(l.origin)).body
	tw.stop()

	tw = startWitness(t, dir, Options{})
	if got := tw.w.Cosigner().VerifierKey(); got != vkey {
		t.Fatalf("verifier key changed across restart: %s, was %s", got, vkey)
	}
	if got := tw.get(checkpointPath(l.origin)).body; got != servedBefore {
		t.Errorf("served checkpoint changed across restart:\n%s\nwas\n%s", got, servedBefore)
	}
	// A client that forgot the witness's state learns it.
	if a := tw.post(l.request(0, 20)); a.status != http.StatusConflict || a.body != "12\n" {
		t.Errorf("old 0 after restart: %d %q, want 409 \"12\\n\"", a.status, a.body)
	}
	// A checkpoint from a split view is refused after the restart, as before.
	if a := tw.post(fork.request(12, 20)); a.status != http.StatusUnprocessableEntity {
		t.Errorf("inconsistent checkpoint after restart: %d %q, want 422", a.status, a.body)
	}
	if a := tw.post(fork.request(0, 12)); a.status != http.StatusConflict {
		t.Errorf("fork from 0 after restart: %d %q, want 409", a.status, a.body)
	}
	tw.mustCosign(l.request(12, 20))
}

func TestStore_SecondOpenRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), StateFileName)
	s, err := OpenStore(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	start := time.Now()
	_, err = OpenStore(path, 200*time.Millisecond)
	if !errors.Is(err, ErrDataDirInUse) || !strings.Contains(err.Error(), path) {
		t.Fatalf("second open: %v, want ErrDataDirInUse naming %s", err, path)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("second open took %v to give up", d)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2, err := OpenStore(path, 0)
	if err != nil {
		t.Fatalf("open after close: %v", err)
	}
	s2.Close()
}

func TestStore_LogConfiguration(t *testing.T) {
	s, err := OpenStore(filepath.Join(t.TempDir(), StateFileName), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	a := newTestLog(t, "example.com/a")
	b := newTestLog(t, "example.com/b")
	if err := s.AddLog(LogConfig{Origin: b.origin, Keys: []string{" " + b.vkey + "\n"}, TileURL: "https://b.example.com/tiles/"}); err != nil {
		t.Fatal(err)
	}
	if err := s.AddLog(a.config()); err != nil {
		t.Fatal(err)
	}
	if err := s.AddLog(a.config()); !errors.Is(err, ErrLogExists) {
		t.Errorf("second add: %v, want ErrLogExists", err)
	}
	logs, err := s.Logs()
	if err != nil {
		t.Fatal(err)
	}
	if len(logs) != 2 || logs[0].Origin != a.origin || logs[1].Origin != b.origin || logs[1].Keys[0] != b.vkey || logs[1].TileURL == "" {
		t.Errorf("logs %+v", logs)
	}
	if err := s.RemoveLog("example.com/none", false); !errors.Is(err, ErrUnknownLog) || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("remove unknown: %v", err)
	}
	if _, err := s.Log("example.com/none"); !errors.Is(err, ErrUnknownLog) {
		t.Errorf("unknown log: %v", err)
	}
}

// TestStore_RemoveKeepsStateUnlessForgotten: re-adding a removed log
// resumes from what the witness cosigned, so removal cannot be used to make
// it cosign a split view.
func TestStore_RemoveKeepsStateUnlessForgotten(t *testing.T) {
	tw := startWitness(t, t.TempDir(), Options{})
	l := newTestLog(t, "example.com/log").growTo(10)
	fork := l.fork(2).growTo(10)
	tw.addLog(l)
	tw.mustCosign(l.request(0, 7))
	if err := tw.store.RemoveLog(l.origin, false); err != nil {
		t.Fatal(err)
	}
	if a := tw.post(l.request(7, 10)); a.status != http.StatusNotFound {
		t.Errorf("removed log: %d, want 404", a.status)
	}
	tw.addLog(l)
	if a := tw.post(fork.request(0, 7)); a.status != http.StatusConflict || a.body != "7\n" {
		t.Errorf("re-added log: %d %q, want 409 \"7\\n\"", a.status, a.body)
	}
	if err := tw.store.RemoveLog(l.origin, true); err != nil {
		t.Fatal(err)
	}
	tw.addLog(l)
	tw.mustCosign(fork.request(0, 7))
}

func TestLogConfig_Validate(t *testing.T) {
	l := newTestLog(t, "example.com/log")
	witnessKey := mustCosigner(t).VerifierKey()
	many := make([]string, MaxKeysPerLog+1)
	for i := range many {
		many[i] = newTestLog(t, "example.com/k").vkey
	}
	for _, tc := range []struct {
		name string
		cfg  LogConfig
		want string // "" for valid
	}{
		{"valid", l.config(), ""},
		{"cosignature key as log key", LogConfig{Origin: "o", Keys: []string{witnessKey}}, ""},
		{"origin with spaces", LogConfig{Origin: "go.sum database tree", Keys: []string{l.vkey}}, ""},
		{"empty origin", LogConfig{Keys: []string{l.vkey}}, "origin is empty"},
		{"origin with newline", LogConfig{Origin: "a\nb", Keys: []string{l.vkey}}, "not one line"},
		{"origin with tab", LogConfig{Origin: "a\tb", Keys: []string{l.vkey}}, "not one line"},
		{"no key", LogConfig{Origin: "o"}, "no verifier key"},
		{"bad key", LogConfig{Origin: "o", Keys: []string{"example.com+12345678+AAAA"}}, "verifier key"},
		{"duplicate key", LogConfig{Origin: "o", Keys: []string{l.vkey, l.vkey}}, "two keys share"},
		{"too many keys", LogConfig{Origin: "o", Keys: many}, "more than 8"},
		{"relative URL", LogConfig{Origin: "o", Keys: []string{l.vkey}, TileURL: "/tiles"}, "not an absolute http(s) URL"},
		{"ftp URL", LogConfig{Origin: "o", Keys: []string{l.vkey}, TileURL: "ftp://x/"}, "not an absolute http(s) URL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("valid config refused: %v", err)
			case tc.want != "" && (!errors.Is(err, ErrInvalidLogConfig) || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("got %v, want ErrInvalidLogConfig containing %q", err, tc.want)
			}
		})
	}
}

func TestOriginLimiter(t *testing.T) {
	l := &originLimiter{max: 2, n: map[string]int{}}
	if !l.acquire("a") || !l.acquire("a") || l.acquire("a") {
		t.Fatal("limit of 2 not applied")
	}
	if !l.acquire("b") {
		t.Fatal("the limit is per origin")
	}
	l.release("a")
	if !l.acquire("a") {
		t.Fatal("release did not free a slot")
	}
	l.release("a")
	l.release("a")
	l.release("b")
	if len(l.n) != 0 {
		t.Errorf("counts left behind: %v", l.n)
	}
}

func TestClosedWitnessRefuses(t *testing.T) {
	tw := startWitness(t, t.TempDir(), Options{})
	l := newTestLog(t, "example.com/log").growTo(3)
	tw.addLog(l)
	tw.w.Close()
	if a := tw.post(l.request(0, 3)); a.status != http.StatusServiceUnavailable {
		t.Errorf("closed witness: %d %q, want 503", a.status, a.body)
	}
	if tw.storedSize(l.origin) != -1 {
		t.Error("closed witness changed the state")
	}
}

// testCommitter is a committer on a new store, both closed when the test
// ends.
func testCommitter(t *testing.T, maxBatch int, linger time.Duration, observe func(int)) *committer {
	t.Helper()
	s, err := OpenStore(filepath.Join(t.TempDir(), StateFileName), 0)
	if err != nil {
		t.Fatal(err)
	}
	c := newCommitter(s, maxBatch, linger, observe)
	t.Cleanup(func() {
		c.close()
		s.Close()
	})
	return c
}

// TestCommitter_GroupSeesEarlierWrites checks the committer's promise: jobs
// committed together run in order in one transaction, each seeing the
// writes of those before it, as if each had its own transaction.
func TestCommitter_GroupSeesEarlierWrites(t *testing.T) {
	c := testCommitter(t, 16, time.Millisecond, nil)
	const jobs = 200
	seen := make([]uint64, jobs)
	var wg sync.WaitGroup
	for i := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			arrived := c.expect()
			defer arrived()
			err := c.commit(context.Background(), arrived, func(g *groupTx) error {
				var n uint64
				head, err := g.latestHead("counter.example")
				if err != nil {
					return err
				}
				if head != nil {
					n = head.Size
				}
				seen[i] = n + 1
				return g.putLatest(&CosignedCheckpoint{Origin: "counter.example", Size: n + 1, Root: make([]byte, 32)})
			})
			if err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	got := map[uint64]bool{}
	for _, n := range seen {
		got[n] = true
	}
	if len(got) != jobs {
		t.Errorf("%d distinct counter values for %d jobs: two jobs read the same state", len(got), jobs)
	}
	c.close()
	if err := c.commit(context.Background(), nil, func(*groupTx) error { return nil }); !errors.Is(err, ErrClosed) {
		t.Errorf("commit after close: %v, want ErrClosed", err)
	}
}

// A group waits for the changes announced while its first is queued, and
// only for them: a lone change is committed at once, and a change given up
// ends the wait.
func TestCommitter_LingersForAnnouncedChanges(t *testing.T) {
	groups := make(chan int, 16)
	// A linger no test run reaches: every group below ends because
	// nothing more is announced, not by the timer.
	c := testCommitter(t, 16, time.Hour, func(n int) { groups <- n })
	nop := func(*groupTx) error { return nil }
	ctx := context.Background()

	if err := c.commit(ctx, c.expect(), nop); err != nil {
		t.Fatal(err)
	}
	if n := <-groups; n != 1 {
		t.Fatalf("lone change: group of %d", n)
	}

	// Three announced; the first queued at once, the others later, one of
	// them given up.
	first, second, dropped := c.expect(), c.expect(), c.expect()
	done := make(chan error, 2)
	go func() { done <- c.commit(ctx, first, nop) }()
	time.Sleep(50 * time.Millisecond)
	select {
	case n := <-groups:
		t.Fatalf("a group of %d committed while two changes were announced", n)
	default:
	}
	go func() { done <- c.commit(ctx, second, nop) }()
	time.Sleep(50 * time.Millisecond)
	select {
	case n := <-groups:
		t.Fatalf("a group of %d committed while a change was announced", n)
	default:
	}
	dropped()
	dropped() // a second call does nothing
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if n := <-groups; n != 2 {
		t.Fatalf("group of %d, want the 2 changes queued", n)
	}
	if got := c.coming.Load(); got != 0 {
		t.Fatalf("%d changes still announced", got)
	}
}

// After a group of more than one change, the next one waits for changes
// not announced yet: under load more are on their way than are announced.
func TestCommitter_UnderLoadWaitsForLaterChanges(t *testing.T) {
	groups := make(chan int, 16)
	// Groups of 2 at most, and a linger no test run reaches: a group ends
	// when it is full.
	c := testCommitter(t, 2, time.Hour, func(n int) { groups <- n })
	nop := func(*groupTx) error { return nil }
	ctx := context.Background()
	done := make(chan error, 4)
	a, b := c.expect(), c.expect()
	go func() { done <- c.commit(ctx, a, nop) }()
	go func() { done <- c.commit(ctx, b, nop) }()
	if n := <-groups; n != 2 {
		t.Fatalf("group of %d, want 2", n)
	}
	// Nothing announced now; the next change still waits for another.
	go func() { done <- c.commit(ctx, nil, nop) }()
	time.Sleep(50 * time.Millisecond)
	select {
	case n := <-groups:
		t.Fatalf("after a group of 2, a group of %d committed without waiting", n)
	default:
	}
	go func() { done <- c.commit(ctx, nil, nop) }()
	if n := <-groups; n != 2 {
		t.Fatalf("group of %d, want the 2 later changes", n)
	}
	for range 4 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

// With announced changes that never come, a group waits linger and no
// more.
func TestCommitter_LingerBounded(t *testing.T) {
	c := testCommitter(t, 16, 20*time.Millisecond, nil)
	never := c.expect()
	defer never()
	if err := c.commit(context.Background(), c.expect(), func(*groupTx) error { return nil }); err != nil {
		t.Fatal(err)
	}
}

// decodeHead reads a stored record's origin, size and root as a whole
// decode does, and declines a record whose first members are not those.
func TestDecodeHead(t *testing.T) {
	cp := &CosignedCheckpoint{Origin: "example.com/log", Size: 1234, Root: bytes.Repeat([]byte{7}, 32),
		Note: bytes.Repeat([]byte("x"), 5000), CosignedAt: time.Unix(1700000000, 0).UTC()}
	v, err := json.Marshal(cp)
	if err != nil {
		t.Fatal(err)
	}
	var origin string
	var size uint64
	var root []byte
	if !decodeHead(v, &origin, &size, &root) || origin != cp.Origin || size != cp.Size || !bytes.Equal(root, cp.Root) {
		t.Fatalf("decodeHead = %q %d %x", origin, size, root)
	}
	for _, other := range []string{`{"size":1,"origin":"a","root":"AAAA"}`, `[1]`, `{"origin":"a"}`, `{"origin":1,"size":1,"root":""}`, ``} {
		if decodeHead([]byte(other), &origin, &size, &root) {
			t.Errorf("decodeHead(%s) should leave it to a whole decode", other)
		}
	}
}

// The store's cache of log configurations follows AddLog and RemoveLog:
// a removed log is unknown at once, a log added again with another key is
// read with that key, and a caller changing the configuration it got does
// not change what the next one gets.
func TestLogConfigCacheFollowsChanges(t *testing.T) {
	store, err := OpenStore(filepath.Join(t.TempDir(), StateFileName), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	first, second := newTestLog(t, "cache.example"), newTestLog(t, "cache.example")
	if err := store.AddLog(LogConfig{Origin: first.origin, Keys: []string{first.vkey}}); err != nil {
		t.Fatal(err)
	}
	for range 2 { // the second read comes from the cache
		cfg, err := store.Log(first.origin)
		if err != nil || !slices.Equal(cfg.Keys, []string{first.vkey}) {
			t.Fatalf("%+v, %v", cfg, err)
		}
		cfg.Keys[0] = "changed by the caller"
	}
	if err := store.RemoveLog(first.origin, false); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Log(first.origin); !errors.Is(err, ErrUnknownLog) {
		t.Fatalf("a removed log reads as %v", err)
	}
	if err := store.AddLog(LogConfig{Origin: second.origin, Keys: []string{second.vkey}}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if cfg, err := store.Log(second.origin); err != nil || !slices.Equal(cfg.Keys, []string{second.vkey}) {
			t.Fatalf("added again with another key: %+v, %v", cfg, err)
		}
	}

	// Reads racing changes (run with -race) never leave a configuration
	// behind a change: once the changes stop, the last one is read.
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
					store.Log(first.origin)
				}
			}
		})
	}
	for i := range 50 {
		log := first
		if i%2 == 1 {
			log = second
		}
		if err := store.RemoveLog(first.origin, false); err != nil {
			t.Fatal(err)
		}
		if err := store.AddLog(LogConfig{Origin: log.origin, Keys: []string{log.vkey}}); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	if cfg, err := store.Log(first.origin); err != nil || !slices.Equal(cfg.Keys, []string{second.vkey}) {
		t.Fatalf("after the changes: %+v, %v; want the last key", cfg, err)
	}
}
