package logstore

import (
	"context"
	"log/slog"
	"time"

	"github.com/transparency-dev/tessera"
	"golang.org/x/mod/sumdb/note"
)

// OpenFollowing opens a log on shared storage for reading only: its
// bucket and Tessera's tables, no appender, no lease. Entries, tiles,
// checkpoints and proofs read as from a log open for appends; a wait for a
// checkpoint (AwaitPublished) polls the bucket every poll. Append must not
// be called; close it with CloseFollowing.
func OpenFollowing(ctx context.Context, a *AWSStorage, verifier note.Verifier, poll time.Duration, now func() time.Time, logger *slog.Logger) (*Log, error) {
	reader, closeReader, err := a.ReadOnly(ctx)
	if err != nil {
		return nil, err
	}
	awaitCtx, cancel := context.WithCancel(context.Background())
	l := &Log{
		Reader:   reader,
		Verifier: verifier,
		awaiter:  tessera.NewPublicationAwaiter(awaitCtx, reader.ReadCheckpoint, poll),
		cancel:   cancel,
		shutdown: func(context.Context) error { closeReader(); return nil },
		cp:       verifiedCheckpoint{now: now, logger: logger},
	}
	return l, nil
}

// CloseFollowing closes a log OpenFollowing opened. Its database is
// closed only once the longest a read waits for integration has passed:
// a follower that takes the lease over closes its log while reads of
// entries just sequenced may still wait on it (the new holder integrates
// them), and they are answered rather than cut by a closed database.
func (l *Log) CloseFollowing() error {
	l.cancel()
	time.AfterFunc(integrationWait+time.Second, func() { l.shutdown(context.Background()) })
	return nil
}
