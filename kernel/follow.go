package kernel

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/annal-dev/annal/checkpoints"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/transparency-dev/tessera"
)

// Follow keeps a standby's state warm: until ctx ends, it folds what the
// shared log (Storage.AWS) integrated into the data folder's state cache
// every interval, reading the bucket and the database only — no Tessera
// appender, no lease — so that a takeover folds only the last entries.
// It holds the data folder while it runs; Open it after Follow returned.
func Follow(ctx context.Context, cfg Config, interval time.Duration) error {
	if cfg.Storage.OnDisk() {
		return errors.New("follow: only a log on shared storage can be followed")
	}
	dir, err := OpenDataDir(cfg.DataDir, cfg.Origin)
	if err != nil {
		return err
	}
	defer dir.Close()
	verifier, err := checkpoints.NewLogVerifier(dir.VerifierKey)
	if err != nil {
		return err
	}
	reader, closeReader, err := cfg.Storage.AWS.readOnly(ctx)
	if err != nil {
		return err
	}
	defer closeReader()
	tl := &Log{Reader: reader, Verifier: verifier}
	if err := tl.CheckOwnLog(ctx, dir.Origin); err != nil {
		return err
	}
	cache, err := openCheckedState(dir, cfg.Logger, tl.leafAt(ctx))
	if err != nil {
		return err
	}
	k := &Kernel{cfg: cfg, dir: dir, log: tl, store: cache.store, ledger: cache.ledger, logger: cfg.Logger}
	defer k.store.close()
	for {
		size, err := tl.IntegratedSize(ctx)
		if err == nil && size > k.ledger.Size {
			if err = foldLog(ctx, tl, k.ledger, size, k.indexFolded); err == nil {
				err = k.persist()
			}
		}
		if err != nil && ctx.Err() == nil {
			cfg.Logger.Warn("standby: could not follow the log; trying again", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(interval):
		}
	}
}

// readOnly is a reader of the log in the bucket, with its sizes read from
// Tessera's tables: what a standby follows the log with.
func (a *AWSStorage) readOnly(ctx context.Context) (tessera.LogReader, func(), error) {
	sdk, s3opts, err := a.S3Config(ctx)
	if err != nil {
		return nil, nil, err
	}
	db, err := sql.Open("mysql", a.DSN)
	if err != nil {
		return nil, nil, err
	}
	db.SetMaxOpenConns(2)
	return BucketReader{LogReader: tableSizes{db: db}, S3: s3.NewFromConfig(sdk, s3opts), Bucket: a.Bucket}, func() { db.Close() }, nil
}

// tableSizes reads the log's sizes from Tessera's coordination tables; its
// reads of objects are the bucket reader's.
type tableSizes struct {
	tessera.LogReader
	db *sql.DB
}

func (t tableSizes) IntegratedSize(ctx context.Context) (uint64, error) {
	var n uint64
	if err := t.db.QueryRowContext(ctx, "SELECT seq FROM IntCoord WHERE id = 0").Scan(&n); err != nil {
		return 0, fmt.Errorf("read the integrated size: %w", err)
	}
	return n, nil
}

func (t tableSizes) NextIndex(ctx context.Context) (uint64, error) {
	var n uint64
	if err := t.db.QueryRowContext(ctx, "SELECT next FROM SeqCoord WHERE id = 0").Scan(&n); err != nil {
		return 0, fmt.Errorf("read the sequenced size: %w", err)
	}
	return n, nil
}
