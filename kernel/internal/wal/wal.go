// Package wal is the kernel's write-ahead log: it makes a group of entries
// durable at their log indices with one write and one fdatasync, so that
// receipts can go out before the entries reach the tile log, which takes
// them behind. After a crash, Open returns what the tile log lacks, to be
// written at exactly those indices.
//
// # Contract
//
// Append(first, entries) writes entries at indices first, first+1, … and
// returns once they are durable and the write's commit record is written
// (not synced: see "Commit records"); first must be Next(). Its return is
// what lets the caller acknowledge the entries. On an error nothing of the
// call stays in the log (the segment is cut back and synced), so the
// entries never replay; if the cut-back fails too the Log is broken and
// every later call fails: the caller restarts and Open decides from the
// disk.
//
// An acknowledged write is never cut off. After a crash, Open cuts off only
// a write that was never acknowledged (a torn tail); damage to a write that
// was, wherever it lies, fails Open with a *DamageError (ErrDamaged) that
// names the file, the byte offset and the indices that do not read back,
// and changes nothing: the next entries must never take indices that
// receipts already name. The one exception is stated under "The residual
// window".
//
// Open(dir, from) returns the records whose index is at least from, where
// from is the tile log's durable size (every entry below it is in the tile
// log). They are contiguous and start at from: a log whose first record at
// or past from is beyond from has lost entries (ErrGap). A from past the
// end of the log is fine (the tile log is ahead, e.g. the log was written
// without this WAL, or the WAL's folder is new): no records, and Next() is
// from. Otherwise Next() is the index after the last record.
//
// Release(upTo) says every entry below upTo is in the tile log: segments
// all of whose records are below upTo are removed. It may run concurrently
// with Append.
//
// # Format (testvectors/FORMATS.md, "Write-ahead log")
//
// The log is a folder of segment files, each named %020d.wal by the index of
// its first record. A segment is the 16-byte SegmentHeader (version 3)
// followed by writes. A write (one Append) is its records, then its commit
// record. A record is
//
//	u32 big-endian word: entry length (at most MaxEntrySize), top bit set
//	    on the first record of each write
//	u32 big-endian CRC-32C (Castagnoli) of (word || u64 big-endian index || entry)
//	u64 big-endian index
//	entry
//
// and a commit record, 24 bytes, is
//
//	u32 big-endian word: 0x40000008 (bit 30, which no record's word has, and
//	    the length of what follows the index, 8)
//	u32 big-endian CRC-32C of (word || u64 first || u32 count || u32 write CRC)
//	u64 big-endian first: the index of the write's first record
//	u32 big-endian count: the write's records
//	u32 big-endian write CRC: CRC-32C of the write's records, every byte from
//	    its first record's word to its last record's last byte
//
// The records may be followed by zero bytes to the end of the file: where
// only zeros are left the records end, in any segment, and that is no
// fault. An Append that does not fit in the file grows it by up to
// Options.GrowBytes of zeros after its records, in the same write, so that
// its commit record and the Appends after it write inside the file: the
// fdatasync of a write that leaves the size alone writes no metadata. No
// record is all zeros (its CRC would have to be that of zero bytes).
//
// Segments of version 2 (SegmentHeaderV2) and version 1 (SegmentHeaderV1)
// are still read, by their rules (below). Version 2 has no commit records;
// version 1 marks no first record, and its CRC covers index || entry only.
// An Append never writes to either: it starts a segment of version 3.
//
// Indices are consecutive within a segment and across segments, and a
// segment's name is its first record's index. Only the newest segment may
// be empty (header only). A segment is made as a temporary file
// (%020d.wal.tmp) holding the header, synced, renamed to its name, and the
// folder synced: a segment with a name always has its header. Once a
// segment has reached Options.SegmentBytes the next Append syncs its last
// commit record and starts a new one. Files with other names are left
// alone.
//
// # Commit records
//
// One write and one fdatasync make a group durable, and that is all a
// receipt waits for. But the bytes of the last write alone cannot tell a
// write that a crash cut short (never acknowledged: cut it) from one that
// completed and was acknowledged and then came back damaged (a disk that
// returns bad data: refuse). Both leave a write that does not verify at
// the end of the log. So once a write's fdatasync has returned, and before
// Append returns, Append writes the write's commit record right after its
// records, without syncing it: no second sync on the way to the receipt.
//
// A process crash (kill -9, a panic, the out-of-memory killer) keeps what
// the process wrote in the operating system's page cache, which writes it
// to the disk: after one, every acknowledged write has its commit record.
// Against a power loss or a crash of the operating system, the commit
// record becomes durable with the next write's fdatasync (the same file:
// fdatasync writes every dirty page of it), with the sync of a segment
// that is closed or of a Log that is closed, or, when no write follows,
// with the idle sync Options.CommitSyncDelay after the last Append. The
// idle sync is off the answer's path; an Append that starts during it may
// wait for it.
//
// A commit record names the write (first index, count) and carries the
// CRC of all its records, so it cannot be mistaken for another write's, and
// once one is found past a fault, that fault lies in a write that was
// synced.
//
// # Recovery
//
// Open reads only the segments that may hold a record at or past from (the
// last one whose name is at most from, and those after it): older ones are
// waiting for Release. A record is good when it is whole, at most
// MaxEntrySize long, its CRC holds and its index is the one due; in
// version 3 also when it is where it belongs: a write's first record
// marked and the others not, each write followed by its commit record, and
// each commit record naming the write before it and holding its CRC. The
// first record that is not good, where more than zeros are left, is a
// fault, and:
//
//   - in any segment but the newest, the log is damaged: such a segment
//     was closed only after all its records (and in version 3, its last
//     commit record) were synced. So is a version 3 segment that is not the
//     newest and whose last write has no commit record;
//   - in the newest, it is a torn tail, which a crash during a write that
//     was never acknowledged leaves (any of the write's pages may have
//     landed and any not, leaving zeros or garbage where the file grew),
//     unless a record that verifies (whole, its CRC holding, its index
//     within the segment's size in bytes of the index due) and that the
//     interrupted write cannot have made starts at or after the fault:
//     then the fault lies in bytes that were synced and may have been
//     acknowledged (ErrDamaged). Such a record is, in version 3, a commit
//     record (written only after its write was synced); in versions 2 and
//     3, a record marked as a write's first, one at the fault itself, or
//     one whose index is at most the one due; unmarked records with later
//     indices are the interrupted write's own and are cut with it
//     (OpenInfo.TornRecordsAfter). One marked record is not proof in
//     version 3: the one at index due right after the place of a missing
//     commit record, since a power loss during the next write may keep
//     that write's pages and lose the unsynced commit record before it;
//     that next write was never acknowledged. Version 1 marks no first
//     record, so there any record that verifies past the fault is damage.
//     A torn tail is cut off (truncated, synced) and reported in OpenInfo.
//
// A write starts only after the one before it is synced (Append returns
// after its fdatasync), and its commit record is written only after that
// too, which is what makes the mark and the commit record proofs.
//
// The good records of the newest segment's last write are returned even
// when no commit record follows them (a crash between the write's
// fdatasync and its commit record, a power loss before the commit record
// was synced, or a torn write's first records): an entry that was durable,
// and perhaps acknowledged. Open writes their commit record (and syncs
// it), so that every write but the newest is committed again; Read only
// reports them (OpenInfo.UncommittedRecords). An Open that fails because of
// what it read changes nothing on disk.
//
// # The residual window
//
// After a power loss or a crash of the operating system within
// CommitSyncDelay (and one fdatasync) after the last acknowledged write,
// that write may come back without its commit record. If its bytes read
// back it is kept, and nothing is lost. If the disk besides returns bad
// bytes for that same write, or for the commit record of the write before
// it (which only the last write's fdatasync made durable), the reader
// cannot tell the damage from a write the crash cut short, and cuts it:
// the acknowledged entries from the fault on are lost, and the next
// entries take their indices. Both must happen together: the power loss
// in that window and damage to those very bytes. The same holds, without
// a power loss, for damage that takes the last write's commit record
// together with the bytes it vouches for (one bad sector holding both):
// nothing else vouches for the last write. A disk that cannot read a
// sector at all makes Open fail (an I/O error), never cut. Segments of
// versions 2 and 1 keep their rules: in them, damage to the last write
// reads as a torn tail and is cut.
package wal

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/annal-dev/annal/internal/atomicfile"
	"github.com/annal-dev/annal/internal/durable"
)

var (
	// ErrGap: the write-ahead log does not hold every entry from the tile
	// log's size on; entries were lost.
	ErrGap = errors.New("wal: entries are missing")
	// ErrDamaged: a record or segment that was synced, and may have been
	// acknowledged, does not read back. Nothing is cut off or replayed.
	// Where the bytes of a segment are at fault the error is a
	// *DamageError.
	ErrDamaged = errors.New("wal: damaged")
	// ErrBroken: an Append failed and cutting it back failed too, so what
	// the log holds is unknown until it is opened again.
	ErrBroken = errors.New("wal: broken, reopen it")
	// ErrClosed: the Log is closed.
	ErrClosed = errors.New("wal: closed")
	// ErrEntryTooLarge: an entry is longer than MaxEntrySize.
	ErrEntryTooLarge = errors.New("wal: entry too large")
)

// DamageError is a fault in a segment's bytes that Open and Read refuse:
// the bytes were synced, and may hold acknowledged entries. It matches
// ErrDamaged.
type DamageError struct {
	File   string // the segment
	Offset int64  // where its first record that is not good starts
	// Problem says what is wrong there and how the reader knows the bytes
	// were synced.
	Problem string
	// The indices at risk: First, the first whose record does not read
	// back, and when EndKnown every one up to End-1: to the end of the
	// damaged write as its commit record names it, or to the first index
	// of the later write that shows the damage. None when End is First
	// (every record reads back, a commit record does not). Receipts may
	// name any of them, and they are not in the tile log unless it is
	// past them.
	First    uint64
	End      uint64
	EndKnown bool
}

func (e *DamageError) Error() string {
	return fmt.Sprintf("%s at offset %d: %v: %s; %s", e.File, e.Offset, ErrDamaged, e.Problem, e.AtRisk())
}

// AtRisk says which indices are at risk.
func (e *DamageError) AtRisk() string {
	switch {
	case !e.EndKnown:
		return fmt.Sprintf("the entries from index %d on are at risk (how many is not known)", e.First)
	case e.End == e.First:
		return "no entry is at risk: every record reads back, but a commit record does not"
	case e.End == e.First+1:
		return fmt.Sprintf("the entry at index %d is at risk", e.First)
	}
	return fmt.Sprintf("the entries at indices %d to %d are at risk (from the fault to the end of the damaged write)", e.First, e.End-1)
}

func (e *DamageError) Unwrap() error { return ErrDamaged }

// DefaultSegmentBytes is Options.SegmentBytes when it is not set.
const DefaultSegmentBytes = 64 << 20

// DefaultCommitSyncDelay is Options.CommitSyncDelay when it is not set.
// Why 50 ms: under load every Append's fdatasync syncs the commit record
// of the one before, and the idle sync never runs; when the log goes
// quiet it bounds how long the last acknowledged write depends on the page
// cache to at most 50 ms and one fdatasync (the residual window, in the
// package comment), at a cost of at most 20 syncs a second, none on an
// answer's path.
const DefaultCommitSyncDelay = 50 * time.Millisecond

// Options tune a Log.
type Options struct {
	// SegmentBytes: a segment that has reached it is closed and a new one
	// started (default DefaultSegmentBytes).
	SegmentBytes int64
	// GrowBytes: how far past its records an Append that does not fit in
	// the segment file grows it, with zeros (default DefaultGrowBytes;
	// negative: not at all, every Append grows the file by its records and
	// then its commit record).
	GrowBytes int64
	// CommitSyncDelay: how long after an Append, if no other Append has
	// started, the commit record it wrote is synced (default
	// DefaultCommitSyncDelay; negative: never, until the next Append,
	// the segment's end or Close).
	CommitSyncDelay time.Duration
}

// Record is one entry of the log at its index.
type Record struct {
	Index uint64
	Entry []byte
}

// OpenInfo says what Open found.
type OpenInfo struct {
	Segments     int // segment files in the folder
	SegmentsRead int // of which were read: those that may hold records at or past from
	// TornBytes were cut off the end of TornFile at TornOffset, where
	// TornReason was found. Zero when the newest segment was whole.
	TornBytes  int64
	TornFile   string
	TornOffset int64
	TornReason string
	// TornRecordsAfter counts the records past TornOffset that verify but
	// were written by the interrupted write (versions 2 and 3), so were
	// never acknowledged: a crash kept their pages and lost an earlier one.
	TornRecordsAfter int
	// UncommittedRecords counts the good records, from index
	// UncommittedFirst, of the newest segment's last write that no commit
	// record follows (version 3): a crash between the write's fdatasync and
	// its commit record, a power loss before that record was synced, or
	// the records of a torn write before its fault. They are returned, and
	// Open writes their commit record; Read only reports them.
	UncommittedRecords int
	UncommittedFirst   uint64
	// TempFilesRemoved counts the temporary segment files a crash left.
	TempFilesRemoved int
}

// Log is an open write-ahead log. Append, Next and Close are called by one
// goroutine at a time; Release may be called from any goroutine, also
// during an Append.
type Log struct {
	dir          string
	segmentBytes int64
	growBytes    int64

	// Owned by the goroutine that appends.
	active      *os.File // the newest segment, written at activeSize; nil if none
	activePath  string   // its path (active.Name() may be its temporary name)
	activeFirst uint64   // its name
	activeEnd   uint64   // the index after its last record
	activeSize  int64    // its header and records: where the next write goes
	// activeGrown is the segment's length on disk, at least activeSize:
	// what lies past activeSize are zeros that an earlier write grew the
	// file by (Options.GrowBytes).
	activeGrown int64
	// activeOld: the newest segment is of version 1 or 2, which an Append
	// does not write to: the next Append starts one of version 3.
	activeOld bool
	next      uint64
	buf       []byte // the records of one Append, kept for the next
	commit    [commitRecordSize]byte
	broken    error
	isClosed  bool

	// The file operations of Append and its cut-back: tests replace them
	// to inject failures.
	writeAt  func(f *os.File, b []byte, off int64) (int, error)
	syncData func(f *os.File) error
	truncate func(f *os.File, size int64) error

	// The idle sync of the last commit record (Options.CommitSyncDelay),
	// which runs in a timer's goroutine. idleSyncData is its sync (tests
	// replace it before the first Append).
	commitSyncDelay time.Duration
	idleSyncData    func(f *os.File) error
	syncMu          sync.Mutex // guards the fields below
	idle            *time.Timer
	appending       bool     // an Append runs: it syncs the file itself
	gen             uint64   // counts Appends and Close: an idle sync that overlapped one leaves its state alone
	pendingFile     *os.File // the file whose last commit record is not synced; nil if none
	idleErr         error    // the idle sync failed: the next Append breaks the Log

	releaseMu sync.Mutex // one Release at a time: only Release removes from closed
	mu        sync.Mutex // guards closed
	closed    []closedSegment
}

// closedSegment is a segment that is no longer written: all its records
// are below end.
type closedSegment struct {
	path string
	end  uint64
}

// maxKeptBuffer bounds the buffer an Append keeps for the next: a rare
// huge group does not pin its memory.
const maxKeptBuffer = 4 << 20

// DefaultGrowBytes is how far past its records an Append that does not
// fit in the segment grows the file, with zeros, in the same write. Why: the
// Appends after it then write inside the file, and the fdatasync of a
// write that leaves the file's size alone writes no metadata. On ext4
// here (virtio disk) one write and fdatasync took 92-118 µs of CPU and
// 160-280 µs growing the file, against 42-46 µs and 93-96 µs inside it,
// the zeros included; 4 MiB of zeros took a write to 13 ms, 1 MiB to 1.1.
const DefaultGrowBytes = 1 << 20

type segmentFile struct {
	name  string
	first uint64
}

// Open opens the write-ahead log in dir (creating dir, mode 0700, if
// missing) and returns the records whose index is at least from, in order.
// from is the tile log's durable size: records below it are already in the
// log. The records returned are contiguous and start at from; a log whose
// first record at or past from is beyond from has lost entries: that is an
// error (ErrGap), as is any damaged record that was synced (ErrDamaged, a
// *DamageError). A torn tail of the newest segment, what a crash during an
// unacknowledged write leaves, is cut off (truncated, synced) and reported
// in OpenInfo; the good records of a last write that has no commit record
// get one (written, synced). Next() is then the index after the last
// record, or from when there is none at or past from. An Open that fails
// because of what it read changes nothing on disk (but may have made dir).
func Open(dir string, from uint64, opts Options) (*Log, []Record, OpenInfo, error) {
	if err := makeDir(dir); err != nil {
		return nil, nil, OpenInfo{}, err
	}
	l := newLog(dir, from, opts)
	r, err := read(dir, from)
	info := r.info
	if err != nil {
		return nil, nil, info, err
	}
	if r.end > from {
		l.next = r.end
	}

	// Everything checks: now change the disk.
	if len(r.segments) > 0 {
		if err := l.resumeNewest(r); err != nil {
			return nil, nil, info, err
		}
	}
	for _, name := range r.temps {
		if err := os.Remove(l.path(name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			l.Close()
			return nil, nil, info, fmt.Errorf("wal: removing a stale temporary segment: %w", err)
		}
		info.TempFilesRemoved++
	}
	return l, r.records, info, nil
}

// newLog is a Log of the folder dir whose next index is from, with opts'
// defaults filled in, and no segment yet.
func newLog(dir string, from uint64, opts Options) *Log {
	l := &Log{
		dir:          dir,
		segmentBytes: opts.SegmentBytes,
		next:         from,
		writeAt:      (*os.File).WriteAt,
		syncData:     durable.Fdatasync,
		truncate:     (*os.File).Truncate,
		idleSyncData: durable.Fdatasync,
	}
	if l.segmentBytes <= 0 {
		l.segmentBytes = DefaultSegmentBytes
	}
	switch l.commitSyncDelay = opts.CommitSyncDelay; {
	case l.commitSyncDelay == 0:
		l.commitSyncDelay = DefaultCommitSyncDelay
	case l.commitSyncDelay < 0:
		l.commitSyncDelay = 0
	}
	switch l.growBytes = opts.GrowBytes; {
	case l.growBytes == 0:
		l.growBytes = DefaultGrowBytes
	case l.growBytes < 0:
		l.growBytes = 0
	}
	return l
}

// resumeNewest makes the newest segment read, r's last, the one written:
// it cuts off its torn tail, if any, then writes the commit record its
// last write lacks, if any, and syncs what it changed. The segments before
// it are closed, for Release.
func (l *Log) resumeNewest(r readResult) error {
	info, newest := r.info, r.newest
	last := r.segments[len(r.segments)-1]
	f, err := os.OpenFile(l.path(last.name), os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("wal: %w", err)
	}
	size := int64(newest.good)
	grown := size + int64(newest.zeroTail) // no zeros after a torn tail was cut
	// A torn tail is cut first, and then the commit record written: a
	// crash between the two leaves good records without one, which the
	// next Open reads the same way.
	if info.TornBytes > 0 {
		if err = f.Truncate(size); err != nil {
			err = fmt.Errorf("cutting the torn tail off %s at offset %d: %w", info.TornFile, info.TornOffset, err)
		}
	}
	if err == nil && r.commit != nil {
		if _, err = f.WriteAt(r.commit, size); err != nil {
			err = fmt.Errorf("writing the commit record of indices %d to %d to %s at offset %d: %w",
				info.UncommittedFirst, info.UncommittedFirst+uint64(info.UncommittedRecords)-1, l.path(last.name), size, err)
		}
		size += int64(len(r.commit))
		grown = max(grown, size)
	}
	if err == nil && (info.TornBytes > 0 || r.commit != nil) {
		if err = f.Sync(); err != nil {
			err = fmt.Errorf("syncing %s: %w", l.path(last.name), err)
		}
	}
	if err != nil {
		f.Close()
		return fmt.Errorf("wal: %w", err)
	}
	l.active, l.activePath = f, l.path(last.name)
	l.activeFirst, l.activeEnd, l.activeSize = last.first, newest.end, size
	l.activeGrown = grown
	l.activeOld = newest.version < 3
	for i, seg := range r.segments[:len(r.segments)-1] {
		l.closed = append(l.closed, closedSegment{path: l.path(seg.name), end: r.segments[i+1].first})
	}
	return nil
}

// Read returns the records of the write-ahead log in dir whose index is
// at least from, as Open would, and changes nothing: a torn tail is
// reported in OpenInfo, not cut off, and a missing folder holds no
// records; nor is a missing commit record written (it is reported in
// OpenInfo.UncommittedRecords). It is for readers beside the kernel (an
// audit of a data folder after a crash); while a kernel appends, its last
// write may read as a torn tail, or as one without a commit record.
func Read(dir string, from uint64) ([]Record, OpenInfo, error) {
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return nil, OpenInfo{}, nil
	}
	r, err := read(dir, from)
	return r.records, r.info, err
}

// readResult is what read found in a log's folder.
type readResult struct {
	info     OpenInfo
	segments []segmentFile
	temps    []string
	records  []Record
	newest   segmentScan
	end      uint64 // the index after the last good record (0: no segment)
	// commit is the commit record that the good records of the newest
	// segment's last write lack, to be written after them; nil if none.
	commit []byte
}

// read reads and checks the segments that may hold records at or past
// from, without changing anything.
func read(dir string, from uint64) (readResult, error) {
	var r readResult
	segments, temps, err := listDir(dir)
	if err != nil {
		return r, err
	}
	r.segments, r.temps = segments, temps
	r.info.Segments = len(segments)
	path := func(name string) string { return filepath.Join(dir, name) }
	if len(segments) == 0 {
		return r, nil
	}
	// The last segment whose name is at most from holds from, if any
	// segment does; the ones before it hold only records below from.
	k := sort.Search(len(segments), func(i int) bool { return segments[i].first > from }) - 1
	if k < 0 {
		return r, fmt.Errorf("%w: the oldest segment, %s, starts at index %d, but the tile log holds only the entries below %d",
			ErrGap, path(segments[0].name), segments[0].first, from)
	}
	due := segments[k].first
	for i := k; i < len(segments); i++ {
		seg := segments[i]
		p := path(seg.name)
		if err := checkSegmentStart(p, seg.first, due); err != nil {
			return r, err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return r, fmt.Errorf("wal: %w", err)
		}
		r.info.SegmentsRead++
		scan, err := scanSegment(data, seg.first, func(index uint64, entry []byte) {
			if index >= from {
				r.records = append(r.records, Record{Index: index, Entry: slices.Clone(entry)})
			}
		})
		if err != nil {
			return r, fmt.Errorf("%s %w", p, err)
		}
		isNewest := i == len(segments)-1
		if !isNewest {
			if err := closedSegmentDamage(p, scan, segments[i+1].first); err != nil {
				return r, err
			}
		}
		if scan.fault != "" && scan.proof.at >= 0 {
			first, end, known := scan.atRisk()
			return r, &DamageError{File: p, Offset: int64(scan.good), First: first, End: end, EndKnown: known,
				Problem: scan.fault + ", " + scan.proof.String()}
		}
		if isNewest {
			r.takeNewest(p, data, scan)
		}
		due = scan.end
	}
	r.end = due
	return r, nil
}

// checkSegmentStart refuses the segment p whose name says first where
// the index due follows the segments before it: a later index leaves a
// gap, an earlier one repeats indices.
func checkSegmentStart(p string, first, due uint64) error {
	switch {
	case first > due:
		return fmt.Errorf("%w: %s starts at index %d, but the segment before it ends before %d: entries %d to %d are in no segment",
			ErrGap, p, first, due, due, first-1)
	case first < due:
		return fmt.Errorf("%s: %w: it starts at index %d, but the segment before it already holds the entries up to %d",
			p, ErrDamaged, first, due-1)
	}
	return nil
}

// closedSegmentDamage is the damage scan found in p, a segment that is not
// the newest, or nil: such a segment was closed after its records and its
// last commit record were synced, so every fault in it is damage, up to
// next, the next segment's first index, and so is a last write without a
// commit record.
func closedSegmentDamage(p string, scan segmentScan, next uint64) error {
	switch {
	case scan.fault != "":
		return &DamageError{File: p, Offset: int64(scan.good), First: scan.end, End: max(next, scan.end), EndKnown: true,
			Problem: scan.fault + ", in a segment that is not the newest (it was synced before the next one began)"}
	case scan.open.count > 0:
		return &DamageError{File: p, Offset: int64(scan.good), First: scan.end, End: scan.end, EndKnown: true, // its records read back
			Problem: fmt.Sprintf("the write of indices %d to %d has no commit record, in a segment that is not the newest (its last commit record was synced before the next one began)",
				scan.open.first, scan.end-1)}
	}
	return nil
}

// takeNewest records what scan found in p, the newest segment, whose
// bytes are data: the commit record its last write lacks, and its torn
// tail.
func (r *readResult) takeNewest(p string, data []byte, scan segmentScan) {
	r.newest = scan
	if o := scan.open; o.count > 0 {
		r.info.UncommittedRecords, r.info.UncommittedFirst = o.count, o.first
		r.commit = appendCommit(nil, o.first, uint32(o.count), data[o.start:scan.good])
	}
	if scan.fault != "" {
		r.info.TornFile, r.info.TornOffset, r.info.TornReason = p, int64(scan.good), scan.fault
		r.info.TornBytes = int64(len(data) - scan.good)
		r.info.TornRecordsAfter = scan.sameWrite
		if scan.sameWrite > 0 {
			r.info.TornReason += fmt.Sprintf("; %d later records of the interrupted write verify and are cut with it", scan.sameWrite)
		}
	}
}

// makeDir creates dir if it is missing, each new folder synced into its
// parent so that it stays.
func makeDir(dir string) error {
	if err := (&atomicfile.Dirs{}).Make(dir, 0o700); err != nil {
		return fmt.Errorf("wal: %w", err)
	}
	return nil
}

// listDir returns dir's segments, oldest first, and its temporary
// segment files.
func listDir(dir string) (segments []segmentFile, temps []string, err error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("wal: %w", err)
	}
	for _, e := range entries {
		first, ok, temp, err := parseName(e.Name())
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", dir, err)
		}
		if !ok && !temp {
			continue
		}
		if !e.Type().IsRegular() {
			return nil, nil, fmt.Errorf("%s: %w: it is not a regular file", filepath.Join(dir, e.Name()), ErrDamaged)
		}
		if temp {
			temps = append(temps, e.Name())
			continue
		}
		segments = append(segments, segmentFile{name: e.Name(), first: first})
	}
	// ReadDir sorts by name, and zero-padded names sort as their indices;
	// sort by index anyway rather than rely on it.
	slices.SortFunc(segments, func(a, b segmentFile) int {
		switch {
		case a.first < b.first:
			return -1
		case a.first > b.first:
			return 1
		}
		return 0
	})
	return segments, temps, nil
}

func (l *Log) path(name string) string { return filepath.Join(l.dir, name) }

// Next is the index the next Append must start at.
func (l *Log) Next() uint64 { return l.next }

// Append writes entries at indices first, first+1, … with one write and
// one fdatasync, then writes the write's commit record without syncing it,
// and returns: the entries are durable, and the caller may acknowledge
// them. first must equal Next(). On any error the segment is cut back to
// where it was before the call (truncate + sync), so the entries are not
// in the WAL and never replay; if even that fails the Log is broken
// (ErrBroken) and every later call fails: the caller must restart so that
// Open decides from what is on disk.
func (l *Log) Append(first uint64, entries [][]byte) error {
	if err := l.checkAppend(first, entries); err != nil || len(entries) == 0 {
		return err
	}
	if err := l.beginAppend(); err != nil {
		return err
	}
	committed := false
	defer func() { l.endAppend(committed) }()
	if l.needsSegment(first) {
		if err := l.startSegment(first); err != nil {
			return err
		}
	}

	buf := l.buf[:0]
	for i, e := range entries {
		buf = AppendRecord(buf, first+uint64(i), e, i == 0)
	}
	commit := appendCommit(l.commit[:0], first, uint32(len(entries)), buf)
	off := l.activeSize
	recordsEnd := off + int64(len(buf))
	end := recordsEnd + commitRecordSize // where this Append's bytes end
	buf = l.growPadding(buf, recordsEnd, end)
	if cap(buf) <= maxKeptBuffer {
		l.buf = buf
	} else {
		l.buf = nil
	}
	if what, err := l.writeAndCommit(buf, commit, off, recordsEnd); err != nil {
		return l.cutBack(off, err, fmt.Sprintf("%s indices %d to %d to %s at offset %d", what, first, first+uint64(len(entries))-1, l.activePath, off))
	}
	committed = true
	l.activeSize = end
	l.activeGrown = max(l.activeGrown, off+int64(len(buf)), end)
	l.activeEnd = first + uint64(len(entries))
	l.next = l.activeEnd
	return nil
}

// checkAppend refuses an Append before anything is written: on a broken
// or closed Log, at an index other than Next(), of more entries than the
// indices or a commit record can count, or with an entry too large.
func (l *Log) checkAppend(first uint64, entries [][]byte) error {
	switch {
	case l.broken != nil:
		return l.broken
	case l.isClosed:
		return ErrClosed
	case first != l.next:
		return fmt.Errorf("wal: append at index %d, but the next index is %d", first, l.next)
	case first+uint64(len(entries)) < first:
		return fmt.Errorf("wal: %d entries from index %d run past the largest index", len(entries), first)
	case uint64(len(entries)) > math.MaxUint32:
		return fmt.Errorf("wal: %d entries in one append, more than a commit record counts", len(entries))
	}
	for i, e := range entries {
		if len(e) > MaxEntrySize {
			return fmt.Errorf("%w: the entry at index %d has %d bytes, more than %d", ErrEntryTooLarge, first+uint64(i), len(e), MaxEntrySize)
		}
	}
	return nil
}

// needsSegment reports whether an Append at index first starts a new
// segment: there is none, the newest does not end at first, it is of an
// older version, or it has reached the size limit and holds a record.
func (l *Log) needsSegment(first uint64) bool {
	return l.active == nil || l.activeEnd != first || l.activeOld || (l.activeSize >= l.segmentBytes && l.activeEnd > l.activeFirst)
}

// growPadding returns buf, the records of an Append whose bytes, its
// commit record included, end at end, followed by zeros when they do not
// fit in the file: where the commit record goes and up to growBytes past
// it, but not past the segment's size limit. The records end where they
// start (scanSegment).
func (l *Log) growPadding(buf []byte, recordsEnd, end int64) []byte {
	if l.growBytes <= 0 || end <= l.activeGrown {
		return buf
	}
	pad := int(max(end, min(end+l.growBytes, l.segmentBytes)) - recordsEnd)
	buf = slices.Grow(buf, pad)[:len(buf)+pad]
	clear(buf[len(buf)-pad:])
	return buf
}

// writeAndCommit writes buf at off in the active segment and syncs it,
// then writes the commit record at recordsEnd without syncing it. On an
// error, what says which of the two failed.
func (l *Log) writeAndCommit(buf, commit []byte, off, recordsEnd int64) (what string, err error) {
	n, err := l.writeAt(l.active, buf, off)
	if err == nil && n != len(buf) {
		err = io.ErrShortWrite
	}
	if err == nil {
		err = l.syncData(l.active)
	}
	if err != nil {
		return "writing", err
	}
	// The write is durable. Its commit record goes after it, unsynced: a
	// process crash keeps it in the page cache, and the next write's
	// fdatasync, or the idle sync, makes it durable (package comment).
	if n, err = l.writeAt(l.active, commit, recordsEnd); err == nil && n != len(commit) {
		err = io.ErrShortWrite
	}
	if err != nil {
		return "writing the commit record of", err
	}
	return "", nil
}

// cutBack undoes a failed Append, which started at off: the active segment
// is cut back there and synced, so that nothing of the Append replays, and
// err, of the operation named by failed, is returned. If the cut-back fails
// too, the Log is broken.
func (l *Log) cutBack(off int64, err error, failed string) error {
	cutErr := l.truncate(l.active, off)
	if cutErr == nil {
		cutErr = l.syncData(l.active)
	}
	l.activeGrown = off
	if cutErr != nil {
		l.broken = fmt.Errorf("%w: %s failed (%v), and so did cutting it back: %v", ErrBroken, failed, err, cutErr)
		return l.broken
	}
	return fmt.Errorf("wal: %s (cut back, nothing written): %w", failed, err)
}

// beginAppend tells the idle sync that an Append runs, which syncs the
// file itself; if the last idle sync failed, the Log is broken instead:
// an acknowledged write's commit record may not be durable, and the disk
// failed a sync.
func (l *Log) beginAppend() error {
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	if err := l.idleErr; err != nil {
		l.broken = fmt.Errorf("%w: syncing the commit record of the last write to %s failed: %v", ErrBroken, l.activePath, err)
		return l.broken
	}
	l.appending = true
	l.gen++
	return nil
}

// endAppend ends what beginAppend began: when the Append wrote a commit
// record (committed), it is pending, and the idle sync is set to sync it
// unless another Append comes first.
func (l *Log) endAppend(committed bool) {
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	l.appending = false
	if committed {
		l.pendingFile = l.active
	}
	if l.pendingFile == nil || l.commitSyncDelay <= 0 {
		return
	}
	if l.idle == nil {
		l.idle = time.AfterFunc(l.commitSyncDelay, l.idleSync)
	} else {
		l.idle.Reset(l.commitSyncDelay)
	}
}

// idleSync syncs the last commit record, Options.CommitSyncDelay after the
// last Append, unless an Append runs (it syncs the file itself). It runs
// in the timer's goroutine. A sync that fails breaks the Log at the next
// Append (beginAppend).
func (l *Log) idleSync() {
	l.syncMu.Lock()
	f, gen := l.pendingFile, l.gen
	if f == nil || l.appending {
		l.syncMu.Unlock()
		return
	}
	l.syncMu.Unlock()
	err := l.idleSyncData(f)
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	if l.gen != gen || l.pendingFile != f {
		return // an Append or Close came since, and syncs (or has synced) the file
	}
	if err != nil {
		l.idleErr = err
		return
	}
	l.pendingFile = nil
}

// syncCommit syncs f if its last commit record is pending: called by the
// appending goroutine before it closes f.
func (l *Log) syncCommit(f *os.File) error {
	l.syncMu.Lock()
	pending := l.pendingFile == f
	l.syncMu.Unlock()
	if !pending {
		return nil
	}
	if err := l.syncData(f); err != nil {
		return err
	}
	l.syncMu.Lock()
	if l.pendingFile == f {
		l.pendingFile = nil
	}
	l.syncMu.Unlock()
	return nil
}

// startSegment makes the segment whose first record will be at index
// first, and makes it the one written: a temporary file gets the header,
// is synced, renamed to the segment's name, and the folder is synced, so
// that a segment that has a name has its header, and survives a crash.
// The segment it replaces is closed once its last commit record is
// synced, or removed if it holds no record; an empty segment of an older
// version of the same name is replaced by the rename.
func (l *Log) startSegment(first uint64) error {
	if l.active != nil {
		// A segment that is not the newest must read whole, its last
		// commit record included.
		if err := l.syncCommit(l.active); err != nil {
			return fmt.Errorf("wal: syncing the last commit record of %s before starting the next segment: %w", l.activePath, err)
		}
	}
	name := segmentName(first)
	path := l.path(name)
	replacing := l.active != nil && l.activePath == path && l.activeEnd == l.activeFirst
	if _, err := os.Lstat(path); err == nil && !replacing {
		return fmt.Errorf("wal: starting a segment at index %d: %s exists already", first, path)
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("wal: %w", err)
	}
	f, err := createSegment(l.path(fmt.Sprintf("%020d%s", first, tempSuffix)), path)
	if err != nil {
		return err
	}
	if err := atomicfile.SyncDir(l.dir); err != nil {
		// The segment may or may not survive a crash; writing to it
		// would acknowledge entries that might vanish.
		f.Close()
		l.broken = fmt.Errorf("%w: syncing %s after making the segment %s: %v", ErrBroken, l.dir, path, err)
		return l.broken
	}

	if l.active != nil {
		l.retireActive(replacing)
	}
	l.active, l.activePath = f, path
	l.activeFirst, l.activeEnd, l.activeSize = first, first, int64(len(SegmentHeader))
	l.activeGrown = l.activeSize
	l.activeOld = false
	return nil
}

// createSegment makes the segment path with its header, through the
// temporary file tmp: written, synced, renamed. The caller syncs the
// folder.
func createSegment(tmp, path string) (*os.File, error) {
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("wal: %w", err)
	}
	if _, err = f.Write([]byte(SegmentHeader)); err == nil {
		err = f.Sync()
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		f.Close()
		os.Remove(tmp)
		return nil, fmt.Errorf("wal: making the segment %s: %w", path, err)
	}
	return f, nil
}

// retireActive closes the segment that was written, once the next one is
// made: synced, its last commit record too, it has nothing to lose. It is
// kept for Release if it holds records, and removed if not, unless the
// new segment took its name (replacing).
func (l *Log) retireActive(replacing bool) {
	l.active.Close()
	switch {
	case replacing:
		// The rename put the new segment in its place.
	case l.activeEnd == l.activeFirst:
		// No records: nothing to keep. Should the removal not survive a
		// crash, the empty segment lies below the new one and below the
		// tile log's size, so Open does not read it.
		os.Remove(l.activePath)
	default:
		l.mu.Lock()
		l.closed = append(l.closed, closedSegment{path: l.activePath, end: l.activeEnd})
		l.mu.Unlock()
	}
}

// Release says that every entry below upTo is durable in the tile log:
// segments all of whose records are below upTo are removed, oldest first;
// never the segment being written. It is cheap when there is nothing to
// do, safe to call during an Append, and works on a closed or broken Log.
// The removals are not synced: a segment that comes back after a crash
// lies below the tile log's size and is removed again.
func (l *Log) Release(upTo uint64) error {
	l.releaseMu.Lock()
	defer l.releaseMu.Unlock()
	for {
		l.mu.Lock()
		if len(l.closed) == 0 || l.closed[0].end > upTo {
			l.mu.Unlock()
			return nil
		}
		seg := l.closed[0]
		l.mu.Unlock()
		// Only Release removes from closed, and one runs at a time, so
		// seg is still closed[0] afterwards.
		if err := os.Remove(seg.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("wal: releasing the entries below %d: %w", upTo, err)
		}
		l.mu.Lock()
		l.closed[0] = closedSegment{}
		l.closed = l.closed[1:]
		l.mu.Unlock()
	}
}

// Close syncs the last commit record, if it is not synced yet, and closes
// the segment being written. Later Appends fail with ErrClosed.
func (l *Log) Close() error {
	if l.isClosed {
		return nil
	}
	l.isClosed = true
	l.syncMu.Lock()
	pending := l.pendingFile != nil && l.pendingFile == l.active
	l.pendingFile = nil
	l.gen++
	if l.idle != nil {
		l.idle.Stop()
	}
	l.syncMu.Unlock()
	if l.active == nil {
		return nil
	}
	var err error
	if pending {
		err = l.syncData(l.active)
	}
	err = errors.Join(err, l.active.Close())
	l.active = nil
	if err != nil {
		return fmt.Errorf("wal: closing %s: %w", l.activePath, err)
	}
	return nil
}
