package kernel

import (
	"context"
	"log/slog"
	"time"

	"github.com/annal-dev/annal/kernel/internal/logstore"
)

// Where the log lives, and the write lease of a log on shared storage. The
// log store (kernel/internal/logstore) defines them; the kernel's Config
// and annald's flags name them here.
type (
	// Storage says where the log's tiles, entry bundles and checkpoint
	// live. The zero Storage keeps them in the data folder.
	Storage = logstore.Storage
	// AWSStorage is the database and bucket of a log on Tessera's AWS
	// driver.
	AWSStorage = logstore.AWSStorage
	// Lease is the write lease of a log on shared storage: one kernel
	// writes at a time.
	Lease = logstore.Lease
	// LeaseState is who holds a lease and until when.
	LeaseState = logstore.LeaseState
)

// ErrLeaseLost: another kernel holds the write lease.
var ErrLeaseLost = logstore.ErrLeaseLost

// OpenLease opens the write lease of the log on a's database for holder,
// with time to live ttl (logstore.OpenLease).
func OpenLease(ctx context.Context, a *AWSStorage, holder string, ttl time.Duration, logger *slog.Logger) (*Lease, error) {
	return logstore.OpenLease(ctx, a, holder, ttl, logger)
}

// CopyIdentity copies a log's identity (signing key, verifier key, origin,
// root credential) from the data folder from into the folder to: all that
// a second machine of a log on shared storage (a standby) needs.
func CopyIdentity(from, to string) error { return logstore.CopyIdentity(from, to) }
