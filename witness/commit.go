package witness

import (
	"context"
	"errors"
	"sync"

	bolt "go.etcd.io/bbolt"
)

// ErrClosed is returned for a request made after the Witness was closed.
var ErrClosed = errors.New("witness is closed")

// committer applies state changes in groups: it takes every change queued
// while the previous group was being written, applies them in order in one
// bbolt read-write transaction, and commits (one fsync). A lone change is
// committed at once; there is no timer. Because the changes of a group run
// one after the other in the same transaction, each sees the writes of the
// ones before it, exactly as if each had its own transaction.
//
// bbolt's own DB.Batch groups too, but waits up to MaxBatchDelay for a
// group to fill, which a witness with one log and one client would pay on
// every request.
type committer struct {
	db       *bolt.DB
	maxBatch int
	queue    chan *commitJob
	// observe, if set, is told the size of each group committed.
	observe func(groupSize int)

	mu     sync.RWMutex // held for reading while queueing; Close takes it to stop new jobs
	closed bool
	stop   chan struct{}
	done   chan struct{}
}

// commitJob is one change. apply runs inside the group's transaction. It
// MUST NOT write anything unless the change is to be kept, and it returns an
// error only when the whole transaction must be rolled back (a storage
// failure): a request that is refused records its refusal itself and
// returns nil.
type commitJob struct {
	apply  func(tx *bolt.Tx) error
	result chan error // buffered: the loop never waits for the requester
}

func newCommitter(db *bolt.DB, maxBatch int, observe func(groupSize int)) *committer {
	c := &committer{
		db:       db,
		maxBatch: maxBatch,
		observe:  observe,
		queue:    make(chan *commitJob, maxBatch),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
	}
	go c.loop()
	return c
}

// commit runs apply in a transaction and returns once that transaction has
// committed (nil) or rolled back (the error). If ctx ends first, commit
// returns ctx's error, but the change may still be applied and kept.
func (c *committer) commit(ctx context.Context, apply func(tx *bolt.Tx) error) error {
	job := &commitJob{apply: apply, result: make(chan error, 1)}
	c.mu.RLock()
	if c.closed {
		c.mu.RUnlock()
		return ErrClosed
	}
	select {
	case c.queue <- job:
	case <-ctx.Done():
		c.mu.RUnlock()
		return ctx.Err()
	}
	c.mu.RUnlock()
	select {
	case err := <-job.result:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c *committer) loop() {
	defer close(c.done)
	batch := make([]*commitJob, 0, c.maxBatch)
	for {
		batch = batch[:0]
		select {
		case job := <-c.queue:
			batch = append(batch, job)
		case <-c.stop:
			// close has stopped new jobs; answer the ones already queued.
			for {
				select {
				case job := <-c.queue:
					job.result <- ErrClosed
				default:
					return
				}
			}
		}
	fill:
		for len(batch) < c.maxBatch {
			select {
			case job := <-c.queue:
				batch = append(batch, job)
			default:
				break fill
			}
		}
		err := c.db.Update(func(tx *bolt.Tx) error {
			for _, job := range batch {
				if err := job.apply(tx); err != nil {
					return err
				}
			}
			return nil
		})
		for _, job := range batch {
			job.result <- err
		}
		if c.observe != nil {
			c.observe(len(batch))
		}
	}
}

// close stops the loop after the group being written, if any; jobs still
// queued get ErrClosed.
func (c *committer) close() {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	c.mu.Unlock()
	close(c.stop)
	<-c.done
}
