package ratelimit

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/annal-dev/annal/kernel/ring"
)

// clock is a fake clock for tests.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Unix(1700000000, 0)} }

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func TestSpec9_2_DefaultLimits(t *testing.T) {
	m := DefaultLimits()
	for _, tc := range []struct {
		r           ring.Ring
		rate, burst float64
	}{
		{ring.Root, 100, 200}, {ring.Privileged, 50, 100}, {ring.Standard, 20, 40}, {ring.Sandbox, 5, 10},
	} {
		if l := m[tc.r]; l.Rate != tc.rate || l.Burst != tc.burst {
			t.Errorf("%v: %v, want %g/s burst %g", tc.r, l, tc.rate, tc.burst)
		}
	}
	if len(m) != 4 {
		t.Errorf("%d limits", len(m))
	}
	if err := ValidateLimits(m); err != nil {
		t.Error(err)
	}
}

func TestSpec9_3_FallbackLimit(t *testing.T) {
	m := DefaultLimits()
	for _, r := range []ring.Ring{ring.Ring(-1), ring.Ring(4), ring.Ring(99)} {
		if l := LimitFor(m, r); l != m[ring.Standard] {
			t.Errorf("LimitFor(%v) = %v, want Standard's", r, l)
		}
	}
	custom := map[ring.Ring]Limit{ring.Standard: {Rate: 1, Burst: 3}}
	if l := LimitFor(custom, ring.Privileged); l != (Limit{1, 3}) {
		t.Errorf("LimitFor(custom, Privileged) = %v", l)
	}
	if l := LimitFor(map[ring.Ring]Limit{}, ring.Sandbox); l != (Limit{20, 40}) {
		t.Errorf("LimitFor(empty, Sandbox) = %v, want the default Standard", l)
	}
	// An invalid limit refuses everything rather than something unbounded.
	bad := map[ring.Ring]Limit{ring.Sandbox: {Rate: math.Inf(1), Burst: 10}}
	if l := LimitFor(bad, ring.Sandbox); l != (Limit{}) {
		t.Errorf("LimitFor(invalid) = %v", l)
	}
	c := newClock()
	lim := New(bad, 0, c.now)
	if err := lim.Allow("a", ring.Sandbox); !errors.Is(err, ErrRateLimited) {
		t.Errorf("Allow with an invalid limit = %v", err)
	}
}

func TestLimitValidate(t *testing.T) {
	for _, tc := range []struct {
		l  Limit
		ok bool
	}{
		{Limit{5, 10}, true}, {Limit{0, 1}, true},
		{Limit{-1, 10}, false}, {Limit{math.NaN(), 10}, false}, {Limit{math.Inf(1), 10}, false},
		{Limit{5, 0.5}, false}, {Limit{5, math.NaN()}, false}, {Limit{5, math.Inf(1)}, false},
	} {
		if err := tc.l.Validate(); (err == nil) != tc.ok {
			t.Errorf("Validate(%+v) = %v", tc.l, err)
		}
	}
	if ValidateLimits(map[ring.Ring]Limit{ring.Ring(5): {1, 1}}) == nil {
		t.Error("ValidateLimits accepted ring 5")
	}
	if ValidateLimits(map[ring.Ring]Limit{ring.Sandbox: {1, 0}}) == nil {
		t.Error("ValidateLimits accepted burst 0")
	}
}

// TestSpec21_2_TokenConsumptionAndExhaustion covers §9.1.
func TestSpec21_2_TokenConsumptionAndExhaustion(t *testing.T) {
	t0 := time.Unix(1000, 0)
	b := NewBucket(Limit{Rate: 2, Burst: 4}, t0)
	if b.capacity != 4 || b.rate != 2 || b.Tokens(t0) != 4 {
		t.Fatalf("new bucket: %+v", b)
	}
	for i := range 4 {
		if !b.Consume(1, t0) {
			t.Fatalf("consume %d failed", i+1)
		}
	}
	if b.Consume(1, t0) {
		t.Fatal("consumed from an empty bucket")
	}
	if b.Consume(1, t0.Add(499*time.Millisecond)) {
		t.Fatal("consumed 1 after 0.499 s at 2/s")
	}
	if !b.Consume(1, t0.Add(500*time.Millisecond)) {
		t.Fatal("could not consume 1 after 0.5 s at 2/s")
	}
	// Refill is capped at capacity.
	if got := b.Tokens(t0.Add(time.Hour)); got != 4 {
		t.Fatalf("tokens after an hour = %v, want 4", got)
	}
	// Consume(n) is all or nothing.
	if b.Consume(5, t0.Add(time.Hour)) || b.Tokens(t0.Add(time.Hour)) != 4 {
		t.Fatal("a refused Consume(5) took tokens")
	}
	if !b.Consume(2.5, t0.Add(time.Hour)) || b.Tokens(t0.Add(time.Hour)) != 1.5 {
		t.Fatal("Consume(2.5)")
	}
	// Negative, NaN and infinite amounts never add tokens.
	for _, n := range []float64{-1, math.NaN(), math.Inf(1), math.Inf(-1)} {
		if b.Consume(n, t0.Add(time.Hour)) {
			t.Errorf("Consume(%v) succeeded", n)
		}
	}
	if got := b.Tokens(t0.Add(time.Hour)); got != 1.5 {
		t.Fatalf("tokens = %v after bad amounts, want 1.5", got)
	}
}

// TestAttack_ClockBackwards: a time before the latest one seen refills
// nothing, and going forward again only refills from the latest time.
func TestAttack_ClockBackwards(t *testing.T) {
	t0 := time.Unix(1000, 0)
	b := NewBucket(Limit{Rate: 1, Burst: 2}, t0)
	b.Consume(2, t0)
	for _, back := range []time.Duration{-time.Second, -time.Hour, -1000 * time.Hour} {
		if b.Consume(1, t0.Add(back)) {
			t.Fatalf("consumed after the clock went back %v", back)
		}
	}
	if b.Consume(1, t0.Add(999*time.Millisecond)) {
		t.Fatal("the backward readings minted tokens")
	}
	if !b.Consume(1, t0.Add(time.Second)) {
		t.Fatal("no token after one second")
	}
}

func TestSpec22_4_RateLimitExhaustion(t *testing.T) {
	c := newClock()
	l := New(nil, 0, c.now)
	for i := range 10 {
		if err := l.Allow("agent-1", ring.Sandbox); err != nil {
			t.Fatalf("request %d: %v", i+1, err)
		}
	}
	err := l.Allow("agent-1", ring.Sandbox)
	if !errors.Is(err, ErrRateLimited) {
		t.Fatalf("11th request: %v, want ErrRateLimited", err)
	}
	for _, want := range []string{"agent-1", "ring 3", "5 requests/s", "burst 10"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not mention %q", err, want)
		}
	}
	var ex *ExceededError
	if !errors.As(err, &ex) || ex.Agent != "agent-1" || ex.Ring != ring.Sandbox || ex.Limit != (Limit{5, 10}) || ex.RetryAfter != 200*time.Millisecond {
		t.Fatalf("ExceededError = %+v", ex)
	}
	// Another agent is not affected, and the first recovers at 5/s.
	if err := l.Allow("agent-2", ring.Sandbox); err != nil {
		t.Fatal(err)
	}
	c.advance(200 * time.Millisecond)
	if err := l.Allow("agent-1", ring.Sandbox); err != nil {
		t.Fatalf("after 0.2 s: %v", err)
	}
	if err := l.Allow("agent-1", ring.Sandbox); !errors.Is(err, ErrRateLimited) {
		t.Fatalf("second request after 0.2 s: %v", err)
	}
}

func TestSpec9_2_PerRingBurst(t *testing.T) {
	for r, lim := range DefaultLimits() {
		c := newClock()
		l := New(nil, 0, c.now)
		n := 0
		for l.Allow("a", r) == nil {
			n++
			if n > 1000 {
				t.Fatalf("%v: no limit", r)
			}
		}
		if float64(n) != lim.Burst {
			t.Errorf("%v: %d requests passed, want %g", r, n, lim.Burst)
		}
	}
}

func TestAllowInvalidAgent(t *testing.T) {
	l := New(nil, 0, newClock().now)
	for _, a := range []string{"", "a\n", "a b", strings.Repeat("a", 257)} {
		if err := l.Allow(a, ring.Sandbox); !errors.Is(err, ring.ErrInvalidValue) {
			t.Errorf("Allow(%q) = %v", a, err)
		}
	}
	if l.bucketCount() != 0 {
		t.Errorf("invalid agents made %d buckets", l.bucketCount())
	}
}

// TestSpec9_5_RingChange: the bucket takes the new ring's limits, keeping
// its tokens capped at the new burst.
func TestSpec9_5_RingChange(t *testing.T) {
	c := newClock()
	l := New(nil, 0, c.now)
	for range 10 {
		l.Allow("a", ring.Standard) // 40 - 10 = 30 left
	}
	// Demotion to Sandbox: capped at its burst of 10.
	if err := l.Allow("a", ring.Sandbox); err != nil {
		t.Fatal(err)
	}
	if tok, _ := l.tokens("a"); tok != 9 {
		t.Fatalf("tokens after demotion = %v, want 9", tok)
	}
	// Elevation to Privileged: the 9 tokens are kept, not topped up to 100.
	if err := l.Allow("a", ring.Privileged); err != nil {
		t.Fatal(err)
	}
	if tok, _ := l.tokens("a"); tok != 8 {
		t.Fatalf("tokens after elevation = %v, want 8", tok)
	}
	// ...and refill at the new rate (50/s) up to the new burst (100).
	c.advance(time.Second)
	if tok, _ := l.tokens("a"); tok != 58 {
		t.Fatalf("tokens 1 s after elevation = %v, want 58", tok)
	}
	c.advance(time.Hour)
	if tok, _ := l.tokens("a"); tok != 100 {
		t.Fatalf("tokens an hour after elevation = %v, want 100", tok)
	}
}

// TestAttack_ElevationCycleRefill: draining the bucket, then cycling
// between rings, yields no tokens.
func TestAttack_ElevationCycleRefill(t *testing.T) {
	c := newClock()
	l := New(nil, 0, c.now)
	for l.Allow("a", ring.Sandbox) == nil {
	}
	for i, r := range []ring.Ring{ring.Standard, ring.Sandbox, ring.Privileged, ring.Root, ring.Sandbox, ring.Ring(7), ring.Standard} {
		if err := l.Allow("a", r); !errors.Is(err, ErrRateLimited) {
			t.Fatalf("step %d (%v): a drained bucket gave a token: %v", i, r, err)
		}
	}
}

// TestAttack_SessionMultiplication: the limiter is keyed by agent, so the
// same agent in many sessions shares one bucket. (The API takes no session:
// this test pins that one agent's requests, however they are labelled
// elsewhere, draw on one budget.)
func TestAttack_SessionMultiplication(t *testing.T) {
	c := newClock()
	l := New(nil, 0, c.now)
	passed := 0
	for s := range 5 {
		_ = s // five sessions of the same agent
		for range 10 {
			if l.Allow("agent-1", ring.Sandbox) == nil {
				passed++
			}
		}
	}
	if passed != 10 || l.bucketCount() != 1 {
		t.Fatalf("%d requests passed over %d buckets, want 10 over 1", passed, l.bucketCount())
	}
}

// TestSpec9_6_BucketLimit: at the bound, full buckets are forgotten to make
// room; when none is full, a new agent is refused.
func TestSpec9_6_BucketLimit(t *testing.T) {
	c := newClock()
	l := New(nil, 3, c.now)
	for _, a := range []string{"a", "b", "c"} {
		if err := l.Allow(a, ring.Sandbox); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Allow("d", ring.Sandbox); !errors.Is(err, ErrTooManyBuckets) {
		t.Fatalf("4th agent at the bound: %v", err)
	}
	if l.bucketCount() != 3 {
		t.Fatalf("Len = %d", l.bucketCount())
	}
	// After 0.2 s at 5/s every bucket is full again and may be forgotten.
	c.advance(200 * time.Millisecond)
	if err := l.Allow("d", ring.Sandbox); err != nil {
		t.Fatalf("4th agent after the others refilled: %v", err)
	}
	if l.bucketCount() != 1 {
		t.Fatalf("Len = %d, want 1 (the three full buckets forgotten)", l.bucketCount())
	}
	// Forget frees a slot at once.
	l.Allow("e", ring.Sandbox)
	l.Allow("f", ring.Sandbox)
	if err := l.Allow("g", ring.Sandbox); !errors.Is(err, ErrTooManyBuckets) {
		t.Fatalf("at the bound again: %v", err)
	}
	l.Forget("e")
	if err := l.Allow("g", ring.Sandbox); err != nil {
		t.Fatalf("after Forget: %v", err)
	}
	if DefaultMaxBuckets != 100000 || New(nil, 0, nil).max != DefaultMaxBuckets || New(nil, -5, nil).max != DefaultMaxBuckets {
		t.Error("DefaultMaxBuckets not applied")
	}
}

// TestAttack_FloodEvictsDrainedBucket: flooding with new identities never
// evicts a drained bucket and so never gives it a fresh start. The attacker
// keeps its own agent drained while it floods, hoping the bucket is
// forgotten and comes back full.
func TestAttack_FloodEvictsDrainedBucket(t *testing.T) {
	c := newClock()
	l := New(nil, 100, c.now)
	start := c.now()
	passed := 0
	refused := 0
	for i := range 10000 {
		if i%100 == 0 {
			c.advance(SweepInterval) // let sweeps happen
		}
		c.advance(time.Microsecond)
		if l.Allow("victim", ring.Sandbox) == nil {
			passed++
		}
		if err := l.Allow(fmt.Sprintf("sybil-%d", i), ring.Sandbox); errors.Is(err, ErrTooManyBuckets) {
			refused++
		}
		if l.bucketCount() > 100 {
			t.Fatalf("%d buckets, bound 100", l.bucketCount())
		}
		if _, ok := l.tokens("victim"); !ok {
			t.Fatalf("after %d sybils the drained bucket was forgotten", i+1)
		}
	}
	if refused == 0 {
		t.Fatal("no sybil was refused")
	}
	// The victim got its burst plus what it earned over the elapsed time,
	// never a fresh burst.
	earned := c.now().Sub(start).Seconds() * 5
	if max := 10 + int(earned) + 1; passed > max {
		t.Fatalf("victim passed %d requests in %v, at most %d allowed", passed, c.now().Sub(start), max)
	}
	if passed < 10+int(earned)-1 {
		t.Fatalf("victim passed only %d requests, expected about %v", passed, 10+earned)
	}
}

// TestSweepAmortised: while no bucket can be full, new agents at the bound
// are refused without visiting the buckets, and sweeps happen at most once
// per SweepInterval.
func TestSweepAmortised(t *testing.T) {
	c := newClock()
	l := New(map[ring.Ring]Limit{ring.Standard: {Rate: 0.001, Burst: 1}}, 1000, c.now)
	for i := range 1000 {
		if err := l.Allow(fmt.Sprintf("a%d", i), ring.Standard); err != nil {
			t.Fatal(err)
		}
	}
	first := l.lastSweep
	for i := range 100 {
		c.advance(time.Millisecond)
		if err := l.Allow(fmt.Sprintf("n%d", i), ring.Standard); !errors.Is(err, ErrTooManyBuckets) {
			t.Fatal(err)
		}
	}
	if l.lastSweep != first || l.swept {
		t.Fatalf("swept although no bucket could be full before %v", l.nextFull)
	}
	c.advance(1000 * time.Second) // every bucket is full
	if err := l.Allow("late", ring.Standard); err != nil {
		t.Fatal(err)
	}
	if l.bucketCount() != 1 {
		t.Fatalf("Len = %d after the sweep, want 1", l.bucketCount())
	}
}

func TestConcurrentAllow(t *testing.T) {
	c := newClock()
	l := New(nil, 0, c.now)
	var wg sync.WaitGroup
	var mu sync.Mutex
	passed := 0
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				if l.Allow("shared", ring.Standard) == nil {
					mu.Lock()
					passed++
					mu.Unlock()
				}
				l.Allow(fmt.Sprintf("own-%d", g), ring.Sandbox)
			}
		}()
	}
	wg.Wait()
	if passed != 40 {
		t.Fatalf("%d requests passed for one Standard agent, want its burst of 40", passed)
	}
}

func BenchmarkAllow(b *testing.B) {
	l := New(map[ring.Ring]Limit{ring.Standard: {Rate: 1e9, Burst: 1e9}}, 0, time.Now)
	agents := make([]string, 1024)
	for i := range agents {
		agents[i] = fmt.Sprintf("agent-%d", i)
	}
	i := 0
	for b.Loop() {
		l.Allow(agents[i%len(agents)], ring.Standard)
		i++
	}
}

// BenchmarkAllowAtBound measures refusing new agents when the Limiter holds
// DefaultMaxBuckets buckets that are not full: the sweep is amortised, so
// this stays far below the cost of visiting 100,000 buckets per call.
func BenchmarkAllowAtBound(b *testing.B) {
	l := New(map[ring.Ring]Limit{ring.Standard: {Rate: 0.001, Burst: 10}}, 0, time.Now)
	for i := range DefaultMaxBuckets {
		if err := l.Allow(fmt.Sprintf("a%d", i), ring.Standard); err != nil {
			b.Fatal(err)
		}
	}
	i := 0
	for b.Loop() {
		if err := l.Allow(fmt.Sprintf("n%d", i), ring.Standard); !errors.Is(err, ErrTooManyBuckets) {
			b.Fatal(err)
		}
		i++
	}
}

// bucketCount is the number of buckets l holds.
func (l *Limiter) bucketCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.buckets)
}

// tokens is what agent has at l's current time; false when it has no bucket
// (it would start full).
func (l *Limiter) tokens(agent string) (float64, bool) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.buckets[agent]
	if !ok {
		return 0, false
	}
	return e.bucket.Tokens(now), true
}

// AllowPolicy: a policy's max_calls_per_minute is a bucket of its own per
// agent, a burst of that many refilled at that many a minute, apart from
// the ring's; a new bound starts the bucket afresh.
func TestAllowPolicy(t *testing.T) {
	c := newClock()
	l := New(nil, 0, c.now)
	for i := range 2 {
		if err := l.AllowPolicy("a", "banking", 2); err != nil {
			t.Fatalf("call %d: %v", i+1, err)
		}
	}
	err := l.AllowPolicy("a", "banking", 2)
	var ex *ExceededError
	if !errors.As(err, &ex) || ex.Policy != "banking" || !errors.Is(err, ErrRateLimited) {
		t.Fatalf("3rd call: %v", err)
	}
	if err := l.AllowPolicy("b", "banking", 2); err != nil {
		t.Fatalf("another agent: %v", err)
	}
	if err := l.Allow("a", ring.Sandbox); err != nil {
		t.Fatalf("the ring's bucket is apart: %v", err)
	}
	c.advance(30 * time.Second) // one call at 2 a minute
	if err := l.AllowPolicy("a", "banking", 2); err != nil {
		t.Fatalf("30 s later: %v", err)
	}
	if err := l.AllowPolicy("a", "banking", 5); err != nil {
		t.Fatalf("a new version of the policy with a higher bound: %v", err)
	}
	if err := l.AllowPolicy("a\n", "banking", 5); err == nil {
		t.Fatal("an invalid agent id was admitted")
	}
}
