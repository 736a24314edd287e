// Package ratelimit implements the per-ring token-bucket rate limits of
// Agent Hypervisor Execution Control 1.0 (§9).
//
// Contract. A Limiter keeps one token bucket per agent identifier, sized by
// the ring the agent runs at (§9.2, with Standard's limit for an unknown
// ring, §9.3). Allow either takes a token or returns an error wrapping
// ErrRateLimited (the specification's RateLimitExceeded, §9.4); it fails
// closed (§19.1).
//
// Buckets are keyed by agent, never by session, envelope or credential: an
// agent that could open sessions or envelopes at will would otherwise
// multiply its rate by the number it opens.
//
// When an agent's ring changes, its bucket is recreated with the new ring's
// limits (§9.5), but the tokens it had are carried over, capped at the new
// burst: a cycle of elevation and revocation cannot refill a drained bucket.
//
// The number of buckets is bounded (§9.6, §20.3). At the bound, only buckets
// that have refilled to full capacity are forgotten (a new bucket would
// start full anyway, so nothing is lost); if none has, a new agent is
// refused with ErrTooManyBuckets. Flooding the limiter with new identities
// therefore never evicts a drained bucket and gives it a fresh start.
//
// The package does no I/O and reads no clock of its own: the Limiter takes
// a clock function, and only differences between its readings are used.
package ratelimit
