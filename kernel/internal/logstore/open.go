package logstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"golang.org/x/mod/sumdb/note"
)

// Options says how Open opens a data folder's log.
type Options struct {
	LogOptions
	Signer   note.Signer
	Verifier note.Verifier
	// Witnesses sees the witnesses' answers (nil without a policy).
	Witnesses *WitnessWatch
	// DisableWriteAhead writes entries through Tessera's own batching; the
	// write-ahead log's tail, if any, is first replayed into the tiles.
	DisableWriteAhead bool
	// ScrubAtStart is the largest log scrubbed whole before Open returns;
	// a larger one is left to Scrub in the background (Opened.Unscrubbed).
	// DisableScrub leaves every log unscrubbed and says nothing of it.
	ScrubAtStart uint64
	DisableScrub bool
}

// Unscrubbed is the part of a log Open did not scrub: its size and root,
// for Scrub to read in the background.
type Unscrubbed struct {
	Size uint64
	Root []byte
}

// Open checks the data folder's log and opens it for appends. For a log in
// the data folder, the start-up check reads its newest files against the
// signed tree (and a small log whole), and what the write-ahead log holds
// past the tiles goes into them, before Tessera opens the folder; for a
// shared log, the lease's fence is installed and its checkpoint must be
// this log's. Either way, before anything can be appended, checkState is
// handed how to read the log's leaf hashes, so that the caller can check
// the state it keeps against the log (its error closes the log again).
//
// Nothing is appended or folded until Start.
func Open(dir *DataDir, o Options, checkState func(leafAt func(uint64) ([]byte, bool)) error) (*Log, *Unscrubbed, error) {
	if !o.Storage.OnDisk() {
		l, err := openShared(dir, o, checkState)
		return l, nil, err
	}
	unscrubbed, err := checkAtStart(dir, o)
	if err != nil {
		return nil, nil, err
	}
	// What the write-ahead log holds past the tiles goes into them before
	// anything reads the log.
	var wa *WriteAhead
	if o.DisableWriteAhead {
		err = ReplayWriteAhead(dir, o.Logger)
	} else {
		wa, err = openWriteAhead(dir, int(o.MaxOutstanding), o.Logger)
	}
	if err != nil {
		return nil, nil, err
	}
	var l *Log
	if err = checkState(DiskLeafAt(dir.LogPath())); err == nil {
		l, err = OpenLog(dir.LogPath(), o.Signer, o.Verifier, o.LogOptions, o.Witnesses, wa)
	}
	if err != nil {
		if wa != nil {
			wa.WAL.Close()
		}
		return nil, nil, err
	}
	return l, unscrubbed, nil
}

// checkAtStart is the start-up check of the data folder's log, which reads
// a small log whole; it returns the part left to scrub in the background.
func checkAtStart(dir *DataDir, o Options) (*Unscrubbed, error) {
	check, err := CheckLog(context.Background(), dir.LogPath(), o.Verifier)
	if err == nil && check.Size > 0 && check.Size <= o.ScrubAtStart && !o.DisableScrub {
		// A small log is read whole before it is served (tens of ms); a
		// larger one after, in the background.
		err = ScrubLog(context.Background(), dir.LogPath(), check.Size, check.Root)
		check.Size = 0
	}
	if err != nil {
		return nil, fmt.Errorf("start-up check of the log: %w", err)
	}
	if check.TempFiles > 0 {
		o.Logger.Info("removed temporary files that interrupted writes left in the log folder", "count", check.TempFiles)
	}
	if check.Size == 0 || o.DisableScrub {
		return nil, nil
	}
	return &Unscrubbed{Size: check.Size, Root: check.Root}, nil
}

// openShared opens a log on shared storage: it is read through Tessera, and
// its checkpoint must be this log's before anything is appended to it.
func openShared(dir *DataDir, o Options, checkState func(leafAt func(uint64) ([]byte, bool)) error) (*Log, error) {
	l, err := OpenLog(dir.LogPath(), o.Signer, o.Verifier, o.LogOptions, o.Witnesses, nil)
	if err != nil {
		return nil, err
	}
	if lease := o.Storage.AWS.Lease; lease != nil {
		err = lease.Fence(context.Background())
	}
	if err == nil {
		err = l.CheckOwnLog(context.Background(), dir.Origin)
	}
	if err == nil {
		err = checkState(l.LeafAt(context.Background()))
	}
	if err != nil {
		l.closeSoon()
		return nil, err
	}
	return l, nil
}

// closeSoon closes a log that was opened but will not be used, giving
// Tessera ten seconds.
func (l *Log) closeSoon() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = l.Close(ctx)
}

// Hooks are how the kernel takes part in the log's writes.
type Hooks struct {
	// OnDurable sees each group once it is durable, before its callers
	// hear back (the group committer's OnDurable): the kernel folds it there.
	OnDurable func(group []*CommitRequest, results []CommitResult)
	// Sequencer, if set, sees each group before it is written and may keep
	// entries out of it.
	Sequencer Sequencer
	// OnFailure hears when the tiles refuse what the write-ahead log holds,
	// and again (nil) once they take it (the write-ahead log's onFailure).
	OnFailure func(err error, resumable bool)
	// HoldTiles and FailTiles are tests' hooks into the write-ahead log's
	// integrator (its hold and fail).
	HoldTiles <-chan struct{}
	FailTiles func(landed bool) error
}

// Start connects the kernel's hooks and starts writing the tiles behind
// the write-ahead log. Appends wait for it.
func (l *Log) Start(h Hooks) {
	l.group.OnDurable = h.OnDurable
	if h.Sequencer != nil {
		l.group.Seq = h.Sequencer
	}
	if l.wa == nil {
		return
	}
	l.wa.onFailure = h.OnFailure
	l.wa.hold, l.wa.fail = h.HoldTiles, h.FailTiles
	l.wa.checkEdge = func() error {
		_, err := VerifyLogEdge(context.Background(), l.path, l.Verifier)
		return err
	}
	l.wa.start()
}

// Quiet is nil once nothing is being written: no entry in flight, and the
// tiles hold every entry of the write-ahead log.
func (l *Log) Quiet() error {
	if !l.group.idle() {
		return errors.New("entries are still being written")
	}
	if l.wa != nil && !l.wa.caughtUp() {
		return errors.New("the tile log does not yet hold every entry of the write-ahead log")
	}
	return nil
}

// Edge is the size of the log as it stands after a failed append: for the
// data folder's log, after checking its newest files against the signed
// tree (an error is damage); for a shared log, everything sequenced, once
// integrated (an error is storage that is away: try again).
func (l *Log) Edge(ctx context.Context) (uint64, error) {
	if !l.onDisk {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		return l.SettledSize(ctx)
	}
	check, err := VerifyLogEdge(ctx, l.path, l.Verifier)
	if err != nil {
		return 0, err
	}
	return check.Size, nil
}
