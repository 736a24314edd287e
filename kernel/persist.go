package kernel

import (
	"context"
	"slices"
	"time"

	"github.com/annal-dev/annal/kernel/event"
	"github.com/annal-dev/annal/kernel/internal/history"
)

// foldLoop persists what the ledger folded every FoldInterval, and lets go
// of the state file's mapped pages now and then.
func (k *Kernel) foldLoop() {
	defer close(k.foldDone)
	t := time.NewTicker(k.cfg.FoldInterval)
	defer t.Stop()
	released := time.Now()
	for {
		select {
		case <-k.stopFold:
			return
		case <-t.C:
			if err := k.persist(); err != nil {
				k.logger.Error("persist state", "err", err)
			}
			if time.Since(released) >= releaseMappedInterval {
				released = time.Now()
				if err := k.store.ReleaseMappedPages(); err != nil {
					k.logger.Warn("state file", "err", err)
				}
			}
		}
	}
}

// releaseMappedInterval is how often the kernel lets go of the state
// file's pages it has read (store.releaseMappedPages).
const releaseMappedInterval = 10 * time.Second

// indexFolded queues the history terms of a folded event (the caller
// holds k.mu, or is alone with the kernel as at start).
func (k *Kernel) indexFolded(index uint64, ev *event.Event) {
	k.unindexed = append(k.unindexed, history.IndexedEvent{Index: index, Terms: history.IndexTerms(ev)})
}

// persist writes what changed in the ledger since the last call, and the
// history terms of what it folded, to the state file. The terms leave the
// queue only once written, so History always finds an event in one place
// or the other.
func (k *Kernel) persist() error {
	k.persistMu.Lock()
	defer k.persistMu.Unlock()
	k.mu.Lock()
	values := map[string][]byte{}
	dirty := k.ledger.TakeDirty()
	for _, key := range dirty {
		v, ok := k.ledger.Encode(key)
		if !ok {
			v = nil // the object is gone from the ledger: the store deletes it
		}
		values[key] = v
	}
	size := k.ledger.Size
	index := slices.Clone(k.unindexed)
	k.mu.Unlock()
	if len(values) == 0 && len(index) == 0 {
		return nil
	}
	folded, err := history.FoldedAt(context.Background(), k.log, size)
	if err == nil {
		err = k.store.Write(values, index, folded)
	}
	if err != nil {
		// Nothing of the transaction was written: its keys are written
		// with the next, or the fold record would cover values it lacks.
		k.mu.Lock()
		k.ledger.MarkDirty(dirty)
		k.mu.Unlock()
		return err
	}
	k.mu.Lock()
	k.unindexed = k.unindexed[len(index):]
	k.mu.Unlock()
	return nil
}
