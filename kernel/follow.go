package kernel

import (
	"context"
	"errors"
	"time"

	"github.com/annal-dev/annal/checkpoints"
	"github.com/annal-dev/annal/kernel/internal/history"
	"github.com/annal-dev/annal/kernel/internal/logstore"
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
	dir, err := logstore.OpenDataDir(cfg.DataDir, cfg.Origin)
	if err != nil {
		return err
	}
	defer dir.Close()
	verifier, err := checkpoints.NewLogVerifier(dir.VerifierKey)
	if err != nil {
		return err
	}
	reader, closeReader, err := cfg.Storage.AWS.ReadOnly(ctx)
	if err != nil {
		return err
	}
	defer closeReader()
	tl := &logstore.Log{Reader: reader, Verifier: verifier}
	if err := tl.CheckOwnLog(ctx, dir.Origin); err != nil {
		return err
	}
	cache, err := history.OpenCheckedState(dir, cfg.Logger, tl.LeafAt(ctx))
	if err != nil {
		return err
	}
	k := &Kernel{cfg: cfg, dir: dir, log: tl, store: cache.Store, ledger: cache.Ledger, logger: cfg.Logger}
	defer k.store.Close()
	for {
		size, err := tl.IntegratedSize(ctx)
		if err == nil && size > k.ledger.Size {
			if err = history.FoldLog(ctx, tl, k.ledger, size, k.indexFolded); err == nil {
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
