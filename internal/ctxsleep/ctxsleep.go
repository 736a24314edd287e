// Package ctxsleep is a sleep that a context can cut short: the loops
// that pace or back off between steps (the log's background scrub, saga
// retries, the witness bench's backoff) wait through it, so that ending
// their context ends their wait at once.
package ctxsleep

import (
	"context"
	"time"
)

// Sleep waits for d, or until ctx ends; it returns ctx's error if ctx
// ended first, else nil.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
