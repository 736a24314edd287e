package ratelimit

import (
	"fmt"
	"maps"
	"math"
	"time"

	"github.com/annal-dev/annal/kernel/ring"
)

// Limit is a token bucket's configuration: Rate tokens are added per second,
// up to Burst tokens.
type Limit struct {
	Rate  float64 `json:"rate"`
	Burst float64 `json:"burst"`
}

// Validate checks that Rate is finite and not negative and Burst is finite
// and at least 1 (a smaller burst would refuse every request).
func (l Limit) Validate() error {
	if math.IsNaN(l.Rate) || math.IsInf(l.Rate, 0) || l.Rate < 0 {
		return fmt.Errorf("rate limit: rate %v: must be a finite number of requests per second, not negative", l.Rate)
	}
	if math.IsNaN(l.Burst) || math.IsInf(l.Burst, 0) || l.Burst < 1 {
		return fmt.Errorf("rate limit: burst %v: must be a finite number, at least 1", l.Burst)
	}
	return nil
}

func (l Limit) String() string { return fmt.Sprintf("%g requests/s, burst %g", l.Rate, l.Burst) }

// DefaultLimits returns the ring-based limits of §9.2: Root 100/s burst 200,
// Privileged 50/s burst 100, Standard 20/s burst 40, Sandbox 5/s burst 10.
// The map is new on every call.
func DefaultLimits() map[ring.Ring]Limit {
	return map[ring.Ring]Limit{
		ring.Root:       {Rate: 100, Burst: 200},
		ring.Privileged: {Rate: 50, Burst: 100},
		ring.Standard:   {Rate: 20, Burst: 40},
		ring.Sandbox:    {Rate: 5, Burst: 10},
	}
}

// ValidateLimits checks every limit in m (Limit.Validate) and that every key
// is a valid ring. The kernel SHOULD call it on configured limits before New.
func ValidateLimits(m map[ring.Ring]Limit) error {
	for r, l := range m {
		if !r.Valid() {
			return fmt.Errorf("rate limits: %v: %w: not a valid execution ring", r, ring.ErrInvalidValue)
		}
		if err := l.Validate(); err != nil {
			return fmt.Errorf("rate limits: %v: %w", r, err)
		}
	}
	return nil
}

// LimitFor returns m's limit for r. When r is invalid or not in m it returns
// m's limit for Standard (§9.3), and when m has no Standard either,
// DefaultLimits' Standard. A limit that fails Validate is returned as the
// zero Limit, which refuses every request (fail closed).
func LimitFor(m map[ring.Ring]Limit, r ring.Ring) Limit {
	l, ok := m[r]
	if !ok || !r.Valid() {
		if l, ok = m[ring.Standard]; !ok {
			l = DefaultLimits()[ring.Standard]
		}
	}
	if l.Validate() != nil {
		return Limit{}
	}
	return l
}

func copyLimits(m map[ring.Ring]Limit) map[ring.Ring]Limit {
	if m == nil {
		return DefaultLimits()
	}
	return maps.Clone(m)
}

// Bucket is a token bucket (§9.1). It starts full. It reads no clock: every
// call takes the current time, and only differences between the times
// passed are used. The kernel passes time.Now() values, whose monotonic
// reading makes the differences immune to wall-clock steps; it never passes
// times parsed from text. A time earlier than the latest one seen refills
// nothing, so a clock going backwards cannot mint tokens. A Bucket is not
// safe for concurrent use; Limiter guards its buckets.
type Bucket struct {
	capacity float64
	tokens   float64
	rate     float64
	last     time.Time
}

// NewBucket returns a full bucket for l at now. A limit that fails
// Validate gives a bucket that refuses every request.
func NewBucket(l Limit, now time.Time) *Bucket {
	if l.Validate() != nil {
		l = Limit{}
	}
	return &Bucket{capacity: l.Burst, tokens: l.Burst, rate: l.Rate, last: now}
}

// refill adds the tokens earned since the latest time seen, capped at the
// capacity (§9.1 _refill).
func (b *Bucket) refill(now time.Time) {
	elapsed := now.Sub(b.last)
	if elapsed <= 0 {
		return
	}
	b.tokens = min(b.capacity, b.tokens+elapsed.Seconds()*b.rate)
	b.last = now
}

// Consume takes n tokens at now and reports whether there were enough
// (§9.1 consume). When there were not, it takes none. A negative, NaN or
// infinite n is refused (false), so it can never add tokens.
func (b *Bucket) Consume(n float64, now time.Time) bool {
	if math.IsNaN(n) || math.IsInf(n, 0) || n < 0 {
		return false
	}
	b.refill(now)
	if b.tokens < n {
		return false
	}
	b.tokens -= n
	return true
}

// Tokens returns the tokens available at now.
func (b *Bucket) Tokens(now time.Time) float64 {
	b.refill(now)
	return b.tokens
}

// fullAt returns when the bucket will be full if nothing is consumed, and
// false when it never will be (a rate of 0).
func (b *Bucket) fullAt() (time.Time, bool) {
	missing := b.capacity - b.tokens
	if missing <= 0 {
		return b.last, true
	}
	if b.rate <= 0 {
		return time.Time{}, false
	}
	secs := missing / b.rate
	const maxSecs = 100 * 365 * 24 * 3600
	if secs > maxSecs {
		return time.Time{}, false
	}
	// Round up, so the bucket is surely full at the time returned.
	return b.last.Add(time.Duration(math.Ceil(secs * float64(time.Second)))), true
}

// retryAfter returns how long until one token is available.
func (b *Bucket) retryAfter() time.Duration {
	if b.tokens >= 1 {
		return 0
	}
	if b.rate <= 0 {
		return -1
	}
	return time.Duration(math.Ceil((1 - b.tokens) / b.rate * float64(time.Second)))
}
