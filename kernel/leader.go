package kernel

import (
	"context"

	"github.com/annal-dev/annal/kernel/internal/logstore"
)

// Where the kernels of a log on shared storage are reached (logstore's
// Leaders): every kernel advertises its URL, and a follower sends the
// writes it cannot decide to the lease holder's.
type (
	// Leaders is the table of advertised URLs.
	Leaders = logstore.Leaders
	// Leader is the lease holder now and the URL it advertised.
	Leader = logstore.Leader
)

// ErrNoLease: no kernel has taken the write lease yet.
var ErrNoLease = logstore.ErrNoLease

// OpenLeaders opens the table of advertised URLs of the log in a's
// database.
func OpenLeaders(ctx context.Context, a *AWSStorage) (*Leaders, error) {
	return logstore.OpenLeaders(ctx, a)
}

// CheckAdvertiseURL refuses a URL other kernels could not send requests to.
func CheckAdvertiseURL(url string) error { return logstore.CheckAdvertiseURL(url) }
