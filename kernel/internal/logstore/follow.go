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

// CloseFollowing closes a log OpenFollowing opened.
func (l *Log) CloseFollowing() error {
	l.cancel()
	return l.shutdown(context.Background())
}
