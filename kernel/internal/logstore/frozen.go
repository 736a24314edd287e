package logstore

import (
	"context"
	"fmt"
	"time"
)

// A kernel frozen inside a database transaction (SIGSTOP, a stalled VM)
// holds its locks for as long as the database keeps its silent connection
// (wait_timeout: three lease lifetimes, at least 10 s; dsnAs): the fence's
// shared lock on the lease row, which a takeover waits for, and Tessera's
// locks on Seq and IntCoord, which the new holder's integration waits for.
// Measured (TestAWSStorage_TakeoverUnderLoadInParts), each wait is the
// whole idle limit: about 21 s before the standby served after a 2 s lease.
//
// So a kernel taking an expired lease ends, first, the transactions left
// idle in the log's database for over half a lease lifetime (a frozen
// holder's: the lease expires at least two thirds of a lifetime after its
// last renewal), then, if it ended one, once it holds the lease, every
// transaction idle there. Nothing it ends was
// acknowledged: a batch is acknowledged once its transaction commits, and
// the lease had expired, so its holder could not renew it and stops. The
// database rolls each ended transaction back.

// endFrozen ends the transactions of connections to the log's database
// idle inside a transaction for at least idle, and reports how many. It
// needs MariaDB (PROCESSLIST's TIME_MS) and the PROCESS privilege to see
// them (and, for another database user's connections, CONNECTION ADMIN to
// end them); without, it says so once and the idle limit ends them.
func (l *Lease) endFrozen(ctx context.Context, idle time.Duration) int {
	if l.cannotEnd.Load() {
		return 0
	}
	rows, err := l.db.QueryContext(ctx, `SELECT p.ID FROM information_schema.INNODB_TRX t
		JOIN information_schema.PROCESSLIST p ON p.ID = t.trx_mysql_thread_id
		WHERE p.DB = DATABASE() AND p.COMMAND = 'Sleep' AND p.TIME_MS >= ? AND p.ID <> CONNECTION_ID()`,
		float64(idle.Microseconds())/1000)
	if err != nil {
		l.cannotSee(err)
		return 0
	}
	var ids []uint64
	for rows.Next() {
		var id uint64
		if err := rows.Scan(&id); err == nil {
			ids = append(ids, id)
		}
	}
	rows.Close()
	ended := 0
	for _, id := range ids {
		// KILL takes no placeholder; id is a number the server gave.
		if _, err := l.db.ExecContext(ctx, fmt.Sprintf("KILL CONNECTION %d", id)); err != nil {
			l.logger.Warn("could not end a transaction left idle by a kernel whose lease expired", "connection", id, "err", err)
			continue
		}
		ended++
		l.logger.Info("ended a transaction left idle by a kernel whose lease expired", "connection", id, "idle_over", idle)
	}
	return ended
}

// cannotSee says once that frozen transactions wait for the idle limit.
func (l *Lease) cannotSee(err error) {
	if !l.cannotEnd.Swap(true) {
		l.logger.Warn("cannot see the database's idle transactions (needs MariaDB and the PROCESS privilege): a kernel frozen inside one holds its locks until the database drops its connection",
			"idle_limit", l.idleLimit(), "err", err)
	}
}

// endFrozenAfterTakeover ends, right after this kernel took the lease
// from a kernel frozen inside a transaction (endFrozen ended one), every
// transaction idle in the log's database: the frozen kernel's others, which
// may only now have got the locks they waited for behind the one ended
// (Tessera's integration, waiting on the batch's Seq row). This kernel has
// not opened the log yet, and a follower holds no transaction. Once more
// after a moment, for one that was still getting its locks.
func (l *Lease) endFrozenAfterTakeover(ctx context.Context) {
	l.endFrozen(ctx, 0)
	time.Sleep(50 * time.Millisecond)
	l.endFrozen(ctx, 0)
}
