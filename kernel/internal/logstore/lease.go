package logstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strconv"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"
)

// Lease is the write lease of a log on shared storage (Tessera's AWS
// driver): at most one kernel holds it, and only the holder's entries can
// be sequenced. The lease is a row in the log's database whose expiry the
// database's own clock sets, so the kernels' clocks do not matter; the
// holder renews it every TTL/3, a standby takes it only once it expired.
//
// A kernel paused inside a transaction holds its locks until the database
// drops its silent connection (wait_timeout, a few lease lifetimes): the
// standby then takes over.
//
// Fencing: a trigger on Tessera's Seq table refuses, inside the very
// transaction that sequences a batch, a batch from a connection whose
// kernel is not the holder of an unexpired lease. So a kernel paused past
// its lease (SIGSTOP, a long GC pause, a partition) and resumed cannot
// append, whatever it believes: its batch fails and nothing of it is
// acknowledged. The trigger reads the lease row with a shared lock, so a
// standby cannot take the lease while a batch sequenced under it is still
// committing.
type Lease struct {
	db     *sql.DB
	holder string
	ttl    time.Duration
	logger *slog.Logger

	mu   sync.Mutex
	held bool
}

// ErrLeaseLost is returned by Renew when another kernel holds the lease.
var ErrLeaseLost = errors.New("another kernel holds the write lease")

var holderName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// leaseSchema creates the lease row's table.
const leaseSchema = `CREATE TABLE IF NOT EXISTS AnnalLease (
	id INT NOT NULL PRIMARY KEY,
	holder VARCHAR(128) NOT NULL,
	epoch BIGINT NOT NULL,
	expires_at DATETIME(6) NOT NULL
)`

// fenceTrigger refuses a Seq row (a sequenced batch) from a connection
// whose @annal_holder does not hold an unexpired lease.
const fenceTrigger = `CREATE TRIGGER IF NOT EXISTS AnnalFence BEFORE INSERT ON Seq FOR EACH ROW
BEGIN
	DECLARE holding INT DEFAULT 0;
	SELECT COUNT(*) INTO holding FROM AnnalLease
		WHERE id = 0 AND holder = @annal_holder AND expires_at > NOW(6) LOCK IN SHARE MODE;
	IF holding = 0 THEN
		SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'annal: this kernel does not hold the write lease';
	END IF;
END`

// OpenLease opens the lease of the log in a's database for holder (a name
// for this kernel, [A-Za-z0-9._-], unique among the kernels of the log).
func OpenLease(ctx context.Context, a *AWSStorage, holder string, ttl time.Duration, logger *slog.Logger) (*Lease, error) {
	if !holderName.MatchString(holder) {
		return nil, fmt.Errorf("lease holder %q: 1 to 128 of A-Z a-z 0-9 . _ -", holder)
	}
	if ttl < time.Second {
		return nil, fmt.Errorf("lease TTL %v: at least 1s", ttl)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	db, err := sql.Open("mysql", a.DSN)
	if err != nil {
		return nil, fmt.Errorf("lease database: %w", err)
	}
	db.SetMaxOpenConns(2)
	for _, q := range []string{leaseSchema, `INSERT IGNORE INTO AnnalLease (id, holder, epoch, expires_at) VALUES (0, '', 0, '1970-01-01 00:00:01')`} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			db.Close()
			return nil, fmt.Errorf("lease table: %w", err)
		}
	}
	return &Lease{db: db, holder: holder, ttl: ttl, logger: logger}, nil
}

// Holder is this kernel's name in the lease.
func (l *Lease) Holder() string { return l.holder }

// TTL is how long the lease lasts unrenewed.
func (l *Lease) TTL() time.Duration { return l.ttl }

// LeaseState is the lease row as the database has it now.
type LeaseState struct {
	Holder    string
	Epoch     int64
	ExpiresIn time.Duration // negative once expired
}

// State reads the lease.
func (l *Lease) State(ctx context.Context) (LeaseState, error) {
	var s LeaseState
	var micros int64
	err := l.db.QueryRowContext(ctx, `SELECT holder, epoch, TIMESTAMPDIFF(MICROSECOND, NOW(6), expires_at) FROM AnnalLease WHERE id = 0`).Scan(&s.Holder, &s.Epoch, &micros)
	s.ExpiresIn = time.Duration(micros) * time.Microsecond
	return s, err
}

// tryAcquire takes the lease if it is this kernel's or has expired.
func (l *Lease) tryAcquire(ctx context.Context) (bool, error) {
	res, err := l.db.ExecContext(ctx, `UPDATE AnnalLease
		SET epoch = IF(holder = ?, epoch, epoch + 1), holder = ?, expires_at = NOW(6) + INTERVAL ? MICROSECOND
		WHERE id = 0 AND (holder = ? OR expires_at <= NOW(6))`, l.holder, l.holder, l.ttl.Microseconds(), l.holder)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// Acquire blocks until this kernel holds the lease (a standby waits here),
// calling waiting each time it finds another holder.
func (l *Lease) Acquire(ctx context.Context, waiting func(LeaseState)) error {
	for {
		ok, err := l.tryAcquire(ctx)
		if err == nil && ok {
			l.mu.Lock()
			l.held = true
			l.mu.Unlock()
			return nil
		}
		if err != nil {
			l.logger.Warn("could not try the write lease", "err", err)
		} else if waiting != nil {
			if s, err := l.State(ctx); err == nil {
				waiting(s)
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(min(l.ttl/4, time.Second)):
		}
	}
}

// Renew extends the lease this kernel holds. If it expired and no other
// kernel took it, it is this kernel's again (writes refused meanwhile
// resume); if another took it, ErrLeaseLost.
func (l *Lease) Renew(ctx context.Context) error {
	res, err := l.db.ExecContext(ctx, `UPDATE AnnalLease SET expires_at = NOW(6) + INTERVAL ? MICROSECOND WHERE id = 0 AND holder = ?`,
		l.ttl.Microseconds(), l.holder)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil {
		return err
	} else if n == 0 {
		// RowsAffected counts rows changed: an unchanged expiry (renewed
		// twice in one microsecond) still holds it; read the row to know.
		if s, err := l.State(ctx); err != nil || s.Holder != l.holder {
			l.mu.Lock()
			l.held = false
			l.mu.Unlock()
			return ErrLeaseLost
		}
	}
	return nil
}

// Keep renews the lease every TTL/3 until ctx ends, and calls lost once if
// another kernel takes it. A database that cannot be reached is retried:
// while the lease is expired the log refuses this kernel's batches (the
// fence), and they are taken again once it is renewed.
func (l *Lease) Keep(ctx context.Context, lost func(error)) {
	t := time.NewTicker(l.ttl / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		rctx, cancel := context.WithTimeout(ctx, l.ttl/3)
		err := l.Renew(rctx)
		cancel()
		switch {
		case errors.Is(err, ErrLeaseLost):
			lost(err)
			return
		case err != nil && ctx.Err() == nil:
			l.logger.Warn("could not renew the write lease; retrying", "err", err)
		}
	}
}

// Release gives the lease up at once (a clean stop), so a standby need not
// wait for it to expire.
func (l *Lease) Release(ctx context.Context) error {
	l.mu.Lock()
	held := l.held
	l.held = false
	l.mu.Unlock()
	if !held {
		return nil
	}
	_, err := l.db.ExecContext(ctx, `UPDATE AnnalLease SET expires_at = NOW(6) WHERE id = 0 AND holder = ?`, l.holder)
	return err
}

// Close releases the database.
func (l *Lease) Close() error { return l.db.Close() }

// Fence installs the trigger on Tessera's Seq table (which must exist) and
// checks that this kernel holds the lease.
func (l *Lease) Fence(ctx context.Context) error {
	if _, err := l.db.ExecContext(ctx, fenceTrigger); err != nil {
		return fmt.Errorf("install the write fence on Seq (needs the TRIGGER privilege): %w", err)
	}
	s, err := l.State(ctx)
	if err != nil {
		return err
	}
	if s.Holder != l.holder {
		return fmt.Errorf("%w: %s", ErrLeaseLost, s.Holder)
	}
	return nil
}

// dsnAs returns dsn with this kernel's name set on every connection: the
// fence checks it.
func (l *Lease) dsnAs(dsn string) (string, error) {
	c, err := mysql.ParseDSN(dsn)
	if err != nil {
		return "", fmt.Errorf("database DSN: %w", err)
	}
	if c.Params == nil {
		c.Params = map[string]string{}
	}
	c.Params["@annal_holder"] = "'" + l.holder + "'"
	// A kernel paused in the middle of a transaction (SIGSTOP, a stalled
	// VM) would hold its row locks for as long as its connection lives,
	// and a standby could neither take the lease nor sequence. The server
	// drops a connection silent for this long, which ends its transaction.
	c.Params["wait_timeout"] = strconv.Itoa(int(l.idleLimit().Seconds()))
	return c.FormatDSN(), nil
}

// idleLimit is how long the database keeps a silent connection of this
// kernel: a few lease lifetimes, and never less than 10 s, so that a
// transaction that waits on the object store is not cut.
func (l *Lease) idleLimit() time.Duration { return max(3*l.ttl, 10*time.Second) }
