package logstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
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
// drops its silent connection (wait_timeout, a few lease lifetimes), or
// until a standby that found the lease expired ends the transaction
// (frozen.go): the standby then takes over.
//
// Fencing: a trigger on Tessera's Seq table refuses, inside the very
// transaction that sequences a batch, a batch from a connection whose
// kernel is not the holder of an unexpired lease. So a kernel paused past
// its lease (SIGSTOP, a long GC pause, a partition) and resumed cannot
// append, whatever it believes: its batch fails and nothing of it is
// acknowledged. The trigger reads the lease row with a shared lock, held
// until the batch's transaction ends, so a standby cannot take the lease
// while a batch sequenced under it may still commit: it waits until the
// batch is committed (in the log, which it then folds) or rolled back.
//
// The trigger runs after the batch's row is inserted (AFTER INSERT), not
// before: Tessera's integration keeps the Seq rows it integrates locked
// while it writes tiles to the object store, and a sequencing insert waits
// for it. Checked before that wait, the shared lock on the lease row would
// be held through it, and the holder's renewals would queue behind it: an
// object-store outage would let a healthy kernel's lease expire. Checked
// after, the lock lasts from the check to the commit.
//
// Times are the database's SYSDATE(6), taken when the condition is
// evaluated, not NOW(6), the start of the statement: a takeover or a
// renewal that waited on the lease row's lock judges the expiry at the
// moment it holds it. An expired lease is taken, never renewed: Renew then
// returns ErrLeaseLost, even if no standby took it.
type Lease struct {
	db     *sql.DB
	holder string
	ttl    time.Duration
	logger *slog.Logger

	mu   sync.Mutex
	held bool
	// cannotEnd is set once the database refused to show or end another
	// connection's transaction (endFrozen).
	cannotEnd atomic.Bool
}

// ErrLeaseLost is returned by Renew when another kernel holds the lease,
// or when it expired: an expired lease is never renewed.
var ErrLeaseLost = errors.New("this kernel no longer holds the write lease")

var holderName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// leaseSchema creates the lease row's table.
const leaseSchema = `CREATE TABLE IF NOT EXISTS AnnalLease (
	id INT NOT NULL PRIMARY KEY,
	holder VARCHAR(128) NOT NULL,
	epoch BIGINT NOT NULL,
	expires_at DATETIME(6) NOT NULL
)`

// fenceVersion marks the trigger fenceTrigger installs; Fence replaces a
// trigger without it (an older release's, which checked before the insert
// and at the statement's start time).
const fenceVersion = "annal-fence-2"

// fenceTrigger refuses a Seq row (a sequenced batch) from a connection
// whose @annal_holder does not hold an unexpired lease. CREATE OR REPLACE
// (MariaDB) swaps an older release's trigger in one statement, so no batch
// is ever sequenced unfenced.
const fenceTrigger = `CREATE OR REPLACE TRIGGER AnnalFence AFTER INSERT ON Seq FOR EACH ROW
BEGIN
	DECLARE holding INT DEFAULT 0;
	-- ` + fenceVersion + `
	SELECT COUNT(*) INTO holding FROM AnnalLease
		WHERE id = 0 AND holder = @annal_holder AND expires_at > SYSDATE(6) LOCK IN SHARE MODE;
	IF holding = 0 THEN
		SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '` + fenceRefusal + `';
	END IF;
END`

// fenceRefusal is the trigger's error text: the batch was not sequenced.
const fenceRefusal = "annal: this kernel does not hold the write lease"

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
	dsn, err := mysql.ParseDSN(a.DSN)
	if err != nil {
		return nil, fmt.Errorf("lease database: %w", err)
	}
	if dsn.Params == nil {
		dsn.Params = map[string]string{}
	}
	// A takeover that waits on a batch still committing gives up after a
	// second and tries again (tryAcquire), rather than queue on the server
	// while the kernel has moved on.
	dsn.Params["innodb_lock_wait_timeout"] = "1"
	db, err := sql.Open("mysql", dsn.FormatDSN())
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
	err := l.db.QueryRowContext(ctx, `SELECT holder, epoch, TIMESTAMPDIFF(MICROSECOND, SYSDATE(6), expires_at) FROM AnnalLease WHERE id = 0`).Scan(&s.Holder, &s.Epoch, &micros)
	s.ExpiresIn = time.Duration(micros) * time.Microsecond
	return s, err
}

// tryAcquire takes the lease if it is this kernel's or has expired, and
// returns the lease as it found it. It reads the row first without a lock,
// so that a standby's tries never queue behind the holder's batches. The
// update waits for the shared locks of batches being sequenced under the
// lease (the fence's), at most the lease connection's lock wait, and
// judges the expiry once it holds the row.
func (l *Lease) tryAcquire(ctx context.Context) (bool, LeaseState, error) {
	s, err := l.State(ctx)
	if err != nil {
		return false, s, err
	}
	if s.Holder != l.holder && s.ExpiresIn > 0 {
		return false, s, nil
	}
	ended := 0
	if s.Holder != l.holder {
		ended = l.endFrozen(ctx, l.ttl/2)
	}
	res, err := l.db.ExecContext(ctx, `UPDATE AnnalLease
		SET epoch = IF(holder = ?, epoch, epoch + 1), holder = ?, expires_at = SYSDATE(6) + INTERVAL ? MICROSECOND
		WHERE id = 0 AND (holder = ? OR expires_at <= SYSDATE(6))`, l.holder, l.holder, l.ttl.Microseconds(), l.holder)
	var me *mysql.MySQLError
	if errors.As(err, &me) && me.Number == errLockWaitTimeout {
		return false, s, nil // a batch of the old holder is still committing
	} else if err != nil {
		return false, s, err
	}
	n, err := res.RowsAffected()
	if n == 1 && ended > 0 {
		l.endFrozenAfterTakeover(ctx)
	}
	return n == 1, s, err
}

// errLockWaitTimeout is MariaDB's and MySQL's ER_LOCK_WAIT_TIMEOUT.
const errLockWaitTimeout = 1205

// Acquire blocks until this kernel holds the lease (a standby waits here),
// calling waiting each time it finds another holder.
func (l *Lease) Acquire(ctx context.Context, waiting func(LeaseState)) error {
	for {
		ok, s, err := l.tryAcquire(ctx)
		if err == nil && ok {
			l.mu.Lock()
			l.held = true
			l.mu.Unlock()
			return nil
		}
		if err != nil {
			l.logger.Warn("could not try the write lease", "err", err)
		} else if waiting != nil {
			waiting(s)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(min(l.ttl/4, time.Second)):
		}
	}
}

// Renew extends the lease this kernel holds, if it has not expired. If it
// expired, or another kernel took it, ErrLeaseLost: a kernel whose lease
// ran out stops (its batches were refused since), and takes the lease
// again only the way a standby does, by Acquire.
func (l *Lease) Renew(ctx context.Context) error {
	res, err := l.db.ExecContext(ctx, `UPDATE AnnalLease SET expires_at = SYSDATE(6) + INTERVAL ? MICROSECOND
		WHERE id = 0 AND holder = ? AND expires_at > SYSDATE(6)`, l.ttl.Microseconds(), l.holder)
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n == 1 {
		return nil
	}
	// RowsAffected counts rows changed: an unchanged expiry (renewed
	// twice in one microsecond) still holds it; read the row to know.
	s, err := l.State(ctx)
	if err != nil {
		return err
	}
	if s.Holder == l.holder && s.ExpiresIn > 0 {
		return nil
	}
	l.mu.Lock()
	l.held = false
	l.mu.Unlock()
	if s.Holder != l.holder {
		return fmt.Errorf("%w: %s holds it", ErrLeaseLost, s.Holder)
	}
	return fmt.Errorf("%w: it expired %v ago", ErrLeaseLost, (-s.ExpiresIn).Round(time.Millisecond))
}

// Keep renews the lease every TTL/3 until ctx ends, and calls lost once
// the lease is lost: another kernel took it, or it expired. A database
// that cannot be reached is retried until the lease's expiry; past it, the
// log refuses this kernel's batches (the fence) and the first renewal that
// reaches the database finds the lease expired: lost.
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
	_, err := l.db.ExecContext(ctx, `UPDATE AnnalLease SET expires_at = SYSDATE(6) WHERE id = 0 AND holder = ?`, l.holder)
	return err
}

// Close releases the database.
func (l *Lease) Close() error { return l.db.Close() }

// Fence installs the trigger on Tessera's Seq table (which must exist),
// replacing an older release's, and checks that this kernel holds the
// lease.
func (l *Lease) Fence(ctx context.Context) error {
	var current int
	err := l.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.TRIGGERS
		WHERE TRIGGER_SCHEMA = DATABASE() AND TRIGGER_NAME = 'AnnalFence' AND ACTION_STATEMENT LIKE ?`, "%"+fenceVersion+"%").Scan(&current)
	if err != nil {
		return fmt.Errorf("read the write fence on Seq: %w", err)
	}
	if current == 0 {
		if err := l.installFence(ctx); err != nil {
			return fmt.Errorf("install the write fence on Seq (needs the TRIGGER privilege): %w", err)
		}
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

// installFence puts fenceTrigger in place of any older one. MySQL has no
// CREATE OR REPLACE TRIGGER (a parse error): there the older trigger is
// dropped and the new one created while Seq is locked, so that no batch is
// sequenced in between. (Tested on MariaDB only.)
func (l *Lease) installFence(ctx context.Context) error {
	_, err := l.db.ExecContext(ctx, fenceTrigger)
	var me *mysql.MySQLError
	if !errors.As(err, &me) || me.Number != errParse {
		return err
	}
	conn, err := l.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	create := strings.Replace(fenceTrigger, "CREATE OR REPLACE TRIGGER", "CREATE TRIGGER", 1)
	for _, q := range []string{"LOCK TABLES Seq WRITE", "DROP TRIGGER IF EXISTS AnnalFence", create} {
		if _, err = conn.ExecContext(ctx, q); err != nil {
			break
		}
	}
	if _, uerr := conn.ExecContext(ctx, "UNLOCK TABLES"); err == nil {
		err = uerr
	}
	return err
}

// errParse is MariaDB's and MySQL's ER_PARSE_ERROR.
const errParse = 1064

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
