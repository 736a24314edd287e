package ratelimit

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/annal-dev/annal/kernel/ring"
)

// DefaultMaxBuckets is the bound on buckets when New is given none (§9.6).
const DefaultMaxBuckets = 100000

// SweepInterval is the least time between two sweeps for full buckets. A
// sweep visits every bucket, so it is made only when the Limiter is at its
// bound, a new agent arrives, some bucket may have refilled (see Limiter),
// and SweepInterval has passed since the last sweep: at most a few
// milliseconds of work per interval, whatever the traffic.
const SweepInterval = 100 * time.Millisecond

// ErrRateLimited is wrapped by the error Allow returns when the agent's
// bucket is empty (the specification's RateLimitExceeded, §9.4).
var ErrRateLimited = errors.New("rate limit exceeded")

// ErrTooManyBuckets is returned by Allow for a new agent when the Limiter
// holds its maximum number of buckets and none can be forgotten (§9.6).
var ErrTooManyBuckets = errors.New("too many rate-limit buckets")

// ExceededError is the error Allow returns when an agent is over its limit.
// It wraps ErrRateLimited.
type ExceededError struct {
	Agent string
	Ring  ring.Ring
	// Policy is the policy whose max_calls_per_minute the agent is over
	// (AllowPolicy); empty for its ring's limit.
	Policy string
	Limit  Limit
	// RetryAfter is how long until one token is available; negative when
	// none ever will be (a rate of 0).
	RetryAfter time.Duration
}

func (e *ExceededError) Error() string {
	if e.Policy != "" {
		return fmt.Sprintf("%v: agent %q is limited by policy %s to %.0f calls a minute", ErrRateLimited, e.Agent, e.Policy, e.Limit.Burst)
	}
	return fmt.Sprintf("%v: agent %q at %v is limited to %v", ErrRateLimited, e.Agent, e.Ring, e.Limit)
}

// Unwrap returns ErrRateLimited.
func (e *ExceededError) Unwrap() error { return ErrRateLimited }

type entry struct {
	bucket Bucket
	ring   ring.Ring
}

// Limiter rate-limits agents by their identifier, one token bucket per agent
// sized by the agent's ring. It is safe for concurrent use.
//
// To forget full buckets cheaply it keeps nextFull, a lower bound on the
// time at which some bucket will next be full: every sweep computes it
// exactly, and every change to a bucket after the sweep lowers it if that
// bucket will be full sooner. Consuming only delays a bucket's fullness, so
// the bound stays a bound; before it, a sweep would find nothing and is not
// made.
type Limiter struct {
	mu        sync.Mutex
	limits    map[ring.Ring]Limit
	max       int
	now       func() time.Time
	buckets   map[string]*entry
	lastSweep time.Time
	swept     bool
	nextFull  time.Time
	hasNext   bool
}

// New returns a Limiter with the given per-ring limits (DefaultLimits when
// nil; the map is copied), at most maxBuckets buckets (DefaultMaxBuckets
// when maxBuckets <= 0) and the clock now (time.Now when nil). Limits that
// fail ValidateLimits refuse every request of their ring; callers SHOULD
// validate them first.
func New(limits map[ring.Ring]Limit, maxBuckets int, now func() time.Time) *Limiter {
	if maxBuckets <= 0 {
		maxBuckets = DefaultMaxBuckets
	}
	if now == nil {
		now = time.Now
	}
	return &Limiter{limits: copyLimits(limits), max: maxBuckets, now: now, buckets: make(map[string]*entry)}
}

// Allow takes one token from agent's bucket, for an agent now running at
// ring r, and returns nil; or, when the bucket is empty, an *ExceededError
// wrapping ErrRateLimited that names the agent, the ring and its limit. It
// returns an error wrapping ring.ErrInvalidValue for an agent identifier
// that ring.ValidIdentifier refuses, and ErrTooManyBuckets for a new agent
// when the Limiter is full (see the package comment).
//
// When r differs from the ring the agent's bucket was made for, the bucket
// is recreated with r's limit (§9.5), keeping the tokens it had at this
// instant, capped at r's burst. An elevation thus raises the rate and the
// ceiling but grants no tokens at once, and a demotion followed by a new
// elevation cannot refill a drained bucket.
func (l *Limiter) Allow(agent string, r ring.Ring) error {
	if err := ring.ValidIdentifier(agent); err != nil {
		return fmt.Errorf("rate limit: agent: %w", err)
	}
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.buckets[agent]
	switch {
	case !ok:
		if err := l.makeRoom(agent, now); err != nil {
			return err
		}
		e = &entry{bucket: *NewBucket(LimitFor(l.limits, r), now), ring: r}
		l.buckets[agent] = e
	case e.ring != r:
		tokens := e.bucket.Tokens(now)
		e.bucket = *NewBucket(LimitFor(l.limits, r), now)
		e.bucket.tokens = min(tokens, e.bucket.capacity)
		e.ring = r
	}
	if !l.take(e, now) {
		return &ExceededError{Agent: agent, Ring: r, Limit: LimitFor(l.limits, r), RetryAfter: e.bucket.retryAfter()}
	}
	return nil
}

// makeRoom makes room for one more bucket, sweeping out the full ones if
// the limiter is at its bound, or refuses agent (§9.6). The caller holds
// l.mu.
func (l *Limiter) makeRoom(agent string, now time.Time) error {
	if len(l.buckets) < l.max {
		return nil
	}
	l.sweep(now)
	if len(l.buckets) >= l.max {
		return fmt.Errorf("%w: %d buckets, none refilled to full capacity; agent %q refused (§9.6)", ErrTooManyBuckets, l.max, agent)
	}
	return nil
}

// take takes one token from e's bucket and reports whether it had one.
// The caller holds l.mu.
func (l *Limiter) take(e *entry, now time.Time) bool {
	allowed := e.bucket.Consume(1, now)
	l.noteChange(&e.bucket)
	if !allowed {
		e.bucket.refill(now)
	}
	return allowed
}

// noteChange lowers nextFull to b's full time if that is sooner.
func (l *Limiter) noteChange(b *Bucket) {
	t, ok := b.fullAt()
	if ok && (!l.hasNext || t.Before(l.nextFull)) {
		l.nextFull, l.hasNext = t, true
	}
}

// sweep forgets the buckets that are full at now, when one may be and
// SweepInterval has passed since the last sweep (or the clock went back),
// and recomputes nextFull.
func (l *Limiter) sweep(now time.Time) {
	if !l.hasNext || now.Before(l.nextFull) {
		return
	}
	if l.swept && now.Sub(l.lastSweep) < SweepInterval && !now.Before(l.lastSweep) {
		return
	}
	l.lastSweep, l.swept = now, true
	l.hasNext = false
	for agent, e := range l.buckets {
		e.bucket.refill(now)
		if e.bucket.tokens >= e.bucket.capacity {
			delete(l.buckets, agent)
			continue
		}
		l.noteChange(&e.bucket)
	}
}

// Forget drops agent's bucket, for an agent that was terminated. If the
// agent acts again it starts with a full bucket, so Forget MUST NOT be used
// for agents that may still act.
func (l *Limiter) Forget(agent string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.buckets, agent)
}

// Peek returns the tokens agent's bucket holds now for ring r, without
// taking one, and r's limit: a full bucket for an agent that has none yet
// (as Allow would make it), and the carried-over tokens, capped at r's
// burst, when the bucket was made for another ring.
func (l *Limiter) Peek(agent string, r ring.Ring) (tokens float64, limit Limit) {
	limit = LimitFor(l.limits, r)
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.buckets[agent]
	if !ok {
		return limit.Burst, limit
	}
	b := e.bucket // a copy: peeking refills nothing
	b.refill(now)
	return min(b.tokens, limit.Burst), limit
}

// AllowPolicy takes one token from the bucket of agent under policy, which
// allows perMinute requests a minute (a burst of perMinute, refilled at
// perMinute a minute), and returns nil; or, when it is empty, an
// *ExceededError wrapping ErrRateLimited that names the policy. The bucket
// is the agent's under that policy, apart from its ring's; a change of
// perMinute (a new version of the policy) starts it afresh.
func (l *Limiter) AllowPolicy(agent, policy string, perMinute int) error {
	if err := ring.ValidIdentifier(agent); err != nil {
		return fmt.Errorf("rate limit: agent: %w", err)
	}
	lim := Limit{Rate: float64(perMinute) / 60, Burst: float64(perMinute)}
	key := agent + "\x00policy:" + policy
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.buckets[key]
	if !ok || e.bucket.capacity != lim.Burst {
		if !ok {
			if err := l.makeRoom(agent, now); err != nil {
				return err
			}
		}
		e = &entry{bucket: *NewBucket(lim, now)}
		l.buckets[key] = e
	}
	if !l.take(e, now) {
		return &ExceededError{Agent: agent, Policy: policy, Limit: lim, RetryAfter: e.bucket.retryAfter()}
	}
	return nil
}
