// Package wal is the kernel's write-ahead log: it makes a group of entries
// durable at their log indices with one write and one fdatasync, so that
// receipts can go out before the entries reach the tile log, which takes
// them behind. After a crash, Open returns what the tile log lacks, to be
// written at exactly those indices.
//
// # Contract
//
// Append(first, entries) writes entries at indices first, first+1, … and
// returns once they are durable; first must be Next(). On an error nothing
// of the call stays in the log (the segment is cut back and synced), so the
// entries never replay; if the cut-back fails too the Log is broken and
// every later call fails: the caller restarts and Open decides from the
// disk.
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
// its first record. A segment is the 16-byte SegmentHeader (version 2)
// followed by records:
//
//	u32 big-endian word: entry length (at most MaxEntrySize), top bit set
//	    on the first record of each write (Append)
//	u32 big-endian CRC-32C (Castagnoli) of (word || u64 big-endian index || entry)
//	u64 big-endian index
//	entry
//
// In a version 2 segment the records may be followed by zero bytes to the
// end of the file: where only zeros are left the records end, in any
// segment, and that is no fault. An Append that does not fit in the file
// grows it by up to Options.GrowBytes of zeros after its records, in the
// same write, so that the Appends after it write inside the file: the
// fdatasync of a write that leaves the size alone writes no metadata. No
// record is all zeros (its CRC would have to be that of zero bytes).
//
// Segments of version 1 (SegmentHeaderV1) are still read: their word is
// the length alone and their CRC covers index || entry. An Append never
// writes to one; it starts a segment of version 2.
//
// Indices are consecutive within a segment and across segments, and a
// segment's name is its first record's index. Only the newest segment may
// be empty (header only). A segment is made as a temporary file
// (%020d.wal.tmp) holding the header, synced, renamed to its name, and the
// folder synced: a segment with a name always has its header. Once a
// segment has reached Options.SegmentBytes the next Append starts a new
// one. Files with other names are left alone.
//
// # Recovery
//
// Open reads only the segments that may hold a record at or past from (the
// last one whose name is at most from, and those after it): older ones are
// waiting for Release. A record is good when it is whole, at most
// MaxEntrySize long, its CRC holds and its index is the one due. The first
// record that is not good, where more than zeros are left (version 2), is
// a fault, and:
//
//   - in any segment but the newest, the log is damaged (ErrDamaged): such
//     a segment was closed only after all its records were synced;
//   - in the newest, it is a torn tail, which a crash during a write that
//     was never acknowledged leaves (any of the write's pages may have
//     landed and any not, leaving zeros or garbage where the file grew),
//     unless a record that verifies (whole, its CRC holding, its index
//     within the segment's size in bytes of the index due) and that the
//     interrupted write cannot have made starts at or after the fault:
//     then the writer began another write after the faulty bytes, which
//     had been synced and may have been acknowledged (ErrDamaged). In a
//     version 2 segment such a record is one marked as a write's first,
//     one at the fault itself, or one whose index is at most the one due;
//     unmarked records with later indices are the interrupted write's own
//     and are cut with it (OpenInfo.TornRecordsAfter). Version 1 marks no
//     first record, so there any record that verifies past the fault is
//     damage. A torn tail is cut off (truncated, synced) and reported in
//     OpenInfo.
//
// A write starts only after the one before it is synced (Append returns
// after its fdatasync), which is what makes the mark a proof. What it
// cannot tell apart is damage within the last write after it was synced
// from a crash during it: both are cut, as damage to the very last record
// always was.
//
// A torn tail may hold a prefix of the group being written; its whole
// records are good and are returned (an entry that was durable but not yet
// acknowledged, as after any crash between the sync and the receipt). An
// Open that fails changes nothing on disk.
package wal

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"

	"github.com/annal-dev/annal/internal/atomicfile"
)

var (
	// ErrGap: the write-ahead log does not hold every entry from the tile
	// log's size on; entries were lost.
	ErrGap = errors.New("wal: entries are missing")
	// ErrDamaged: a record or segment that was acknowledged does not read
	// back. Nothing is cut off or replayed.
	ErrDamaged = errors.New("wal: damaged")
	// ErrBroken: an Append failed and cutting it back failed too, so what
	// the log holds is unknown until it is opened again.
	ErrBroken = errors.New("wal: broken, reopen it")
	// ErrClosed: the Log is closed.
	ErrClosed = errors.New("wal: closed")
	// ErrEntryTooLarge: an entry is longer than MaxEntrySize.
	ErrEntryTooLarge = errors.New("wal: entry too large")
)

// DefaultSegmentBytes is Options.SegmentBytes when it is not set.
const DefaultSegmentBytes = 64 << 20

// Options tune a Log.
type Options struct {
	// SegmentBytes: a segment that has reached it is closed and a new one
	// started (default DefaultSegmentBytes).
	SegmentBytes int64
	// GrowBytes: how far past its records an Append that does not fit in
	// the segment file grows it, with zeros (default DefaultGrowBytes;
	// negative: not at all, every Append grows the file by its records).
	GrowBytes int64
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
	// were written by the same interrupted write (version 2 segments), so
	// were never acknowledged: a crash kept their pages and lost an
	// earlier one.
	TornRecordsAfter int
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
	activeV1    bool // the newest segment is of version 1: the next Append starts one of version 2
	next        uint64
	buf         []byte // the records of one Append, kept for the next
	broken      error
	isClosed    bool

	// The file operations of Append and its cut-back: tests replace them
	// to inject failures.
	writeAt  func(f *os.File, b []byte, off int64) (int, error)
	syncData func(f *os.File) error
	truncate func(f *os.File, size int64) error

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
// error (ErrGap), as is any damaged record that is not at the very end of
// the newest segment (ErrDamaged). A damaged or torn tail of the newest
// segment is what a crash during an unacknowledged write leaves: it is cut
// off (truncated, synced) and reported in OpenInfo. Next() is then the
// index after the last record, or from when there is none at or past from.
// An Open that fails changes nothing on disk (but may have made dir).
func Open(dir string, from uint64, opts Options) (*Log, []Record, OpenInfo, error) {
	if err := makeDir(dir); err != nil {
		return nil, nil, OpenInfo{}, err
	}
	l := &Log{
		dir:          dir,
		segmentBytes: opts.SegmentBytes,
		next:         from,
		writeAt:      (*os.File).WriteAt,
		syncData:     fdatasync,
		truncate:     (*os.File).Truncate,
	}
	if l.segmentBytes <= 0 {
		l.segmentBytes = DefaultSegmentBytes
	}
	switch l.growBytes = opts.GrowBytes; {
	case l.growBytes == 0:
		l.growBytes = DefaultGrowBytes
	case l.growBytes < 0:
		l.growBytes = 0
	}
	r, err := read(dir, from)
	info := r.info
	if err != nil {
		return nil, nil, info, err
	}
	segments, temps, records, newest := r.segments, r.temps, r.records, r.newest
	if r.end > from {
		l.next = r.end
	}

	// Everything checks: now change the disk.
	if len(segments) > 0 {
		last := segments[len(segments)-1]
		f, err := os.OpenFile(l.path(last.name), os.O_RDWR, 0)
		if err != nil {
			return nil, nil, info, fmt.Errorf("wal: %w", err)
		}
		if info.TornBytes > 0 {
			if err := f.Truncate(int64(newest.good)); err == nil {
				err = f.Sync()
			}
			if err != nil {
				f.Close()
				return nil, nil, info, fmt.Errorf("wal: cutting the torn tail off %s at offset %d: %w", info.TornFile, info.TornOffset, err)
			}
		}
		l.active, l.activePath = f, l.path(last.name)
		l.activeFirst, l.activeEnd, l.activeSize = last.first, newest.end, int64(newest.good)
		l.activeGrown = l.activeSize + int64(newest.zeroTail) // no zeros after a torn tail was cut
		l.activeV1 = newest.version == 1
		for i, seg := range segments[:len(segments)-1] {
			l.closed = append(l.closed, closedSegment{path: l.path(seg.name), end: segments[i+1].first})
		}
	}
	for _, name := range temps {
		if err := os.Remove(l.path(name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			l.Close()
			return nil, nil, info, fmt.Errorf("wal: removing a stale temporary segment: %w", err)
		}
		info.TempFilesRemoved++
	}
	return l, records, info, nil
}

// Read returns the records of the write-ahead log in dir whose index is
// at least from, as Open would, and changes nothing: a torn tail is
// reported in OpenInfo, not cut off, and a missing folder holds no
// records. It is for readers beside the kernel (an audit of a data folder
// after a crash); while a kernel appends, its last write may read as a
// torn tail.
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
		if seg.first != due {
			if seg.first > due {
				return r, fmt.Errorf("%w: %s starts at index %d, but the segment before it ends before %d: entries %d to %d are in no segment",
					ErrGap, p, seg.first, due, due, seg.first-1)
			}
			return r, fmt.Errorf("%s: %w: it starts at index %d, but the segment before it already holds the entries up to %d",
				p, ErrDamaged, seg.first, due-1)
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
		if scan.fault != "" {
			switch {
			case !isNewest:
				return r, fmt.Errorf("%s at offset %d: %w: %s, in a segment that is not the newest",
					p, scan.good, ErrDamaged, scan.fault)
			case scan.verifying >= 0 && scan.version == 1:
				return r, fmt.Errorf("%s at offset %d: %w: %s, yet the record at offset %d (index %d) verifies, so this is no torn tail",
					p, scan.good, ErrDamaged, scan.fault, scan.verifying, scan.verifyingIndex)
			case scan.verifying >= 0:
				return r, fmt.Errorf("%s at offset %d: %w: %s, yet the record at offset %d (index %d) verifies and was not written with the faulty bytes, so this is no torn tail",
					p, scan.good, ErrDamaged, scan.fault, scan.verifying, scan.verifyingIndex)
			}
		}
		if isNewest {
			r.newest = scan
			if scan.fault != "" {
				r.info.TornFile, r.info.TornOffset, r.info.TornReason = p, int64(scan.good), scan.fault
				r.info.TornBytes = int64(len(data) - scan.good)
				r.info.TornRecordsAfter = scan.sameWrite
				if scan.sameWrite > 0 {
					r.info.TornReason += fmt.Sprintf("; %d later records of the same write verify and are cut with it", scan.sameWrite)
				}
			}
		}
		due = scan.end
	}
	r.end = due
	return r, nil
}

// makeDir creates dir if it is missing, and syncs its parent so that it
// stays.
func makeDir(dir string) error {
	if _, err := os.Stat(dir); err == nil {
		return nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("wal: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("wal: %w", err)
	}
	if err := atomicfile.SyncDir(filepath.Dir(filepath.Clean(dir))); err != nil {
		return fmt.Errorf("wal: syncing the folder that holds %s: %w", dir, err)
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
// one fdatasync, and returns once they are durable. first must equal
// Next(). On any error the segment is cut back to where it was before the
// call (truncate + sync), so the entries are not in the WAL and never
// replay; if even that fails the Log is broken (ErrBroken) and every later
// call fails: the caller must restart so that Open decides from what is on
// disk.
func (l *Log) Append(first uint64, entries [][]byte) error {
	switch {
	case l.broken != nil:
		return l.broken
	case l.isClosed:
		return ErrClosed
	case first != l.next:
		return fmt.Errorf("wal: append at index %d, but the next index is %d", first, l.next)
	case len(entries) == 0:
		return nil
	case first+uint64(len(entries)) < first:
		return fmt.Errorf("wal: %d entries from index %d run past the largest index", len(entries), first)
	}
	for i, e := range entries {
		if len(e) > MaxEntrySize {
			return fmt.Errorf("%w: the entry at index %d has %d bytes, more than %d", ErrEntryTooLarge, first+uint64(i), len(e), MaxEntrySize)
		}
	}
	if l.active == nil || l.activeEnd != first || l.activeV1 || (l.activeSize >= l.segmentBytes && l.activeEnd > l.activeFirst) {
		if err := l.startSegment(first); err != nil {
			return err
		}
	}

	buf := l.buf[:0]
	for i, e := range entries {
		buf = AppendRecord(buf, first+uint64(i), e, i == 0)
	}
	off := l.activeSize
	written := int64(len(buf))
	if end := off + written; end > l.activeGrown {
		// Zeros after the records, up to growBytes past them but not
		// past the segment's size limit: the records end where they
		// start (scanSegment).
		if grown := max(end, min(end+l.growBytes, l.segmentBytes)); grown > end {
			pad := int(grown - end)
			buf = slices.Grow(buf, pad)[:len(buf)+pad]
			clear(buf[len(buf)-pad:])
		}
	}
	if cap(buf) <= maxKeptBuffer {
		l.buf = buf
	} else {
		l.buf = nil
	}
	n, err := l.writeAt(l.active, buf, off)
	if err == nil && n != len(buf) {
		err = io.ErrShortWrite
	}
	if err == nil {
		err = l.syncData(l.active)
	}
	if err != nil {
		path := l.activePath
		cutErr := l.truncate(l.active, off)
		if cutErr == nil {
			cutErr = l.syncData(l.active)
		}
		l.activeGrown = off
		if cutErr != nil {
			l.broken = fmt.Errorf("%w: writing indices %d to %d to %s at offset %d failed (%v), and so did cutting it back: %v",
				ErrBroken, first, first+uint64(len(entries))-1, path, off, err, cutErr)
			return l.broken
		}
		return fmt.Errorf("wal: writing indices %d to %d to %s at offset %d (cut back, nothing written): %w",
			first, first+uint64(len(entries))-1, path, off, err)
	}
	l.activeSize += written
	l.activeGrown = max(l.activeGrown, off+int64(len(buf)))
	l.activeEnd = first + uint64(len(entries))
	l.next = l.activeEnd
	return nil
}

// startSegment makes the segment whose first record will be at index
// first, and makes it the one written: a temporary file gets the header,
// is synced, renamed to the segment's name, and the folder is synced, so
// that a segment that has a name has its header, and survives a crash.
// The segment it replaces is closed, or removed if it holds no record; an
// empty version 1 segment of the same name is replaced by the rename.
func (l *Log) startSegment(first uint64) error {
	name := segmentName(first)
	path := l.path(name)
	replacing := l.active != nil && l.activePath == path && l.activeEnd == l.activeFirst
	if _, err := os.Lstat(path); err == nil && !replacing {
		return fmt.Errorf("wal: starting a segment at index %d: %s exists already", first, path)
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("wal: %w", err)
	}
	tmp := l.path(fmt.Sprintf("%020d%s", first, tempSuffix))
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("wal: %w", err)
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
		return fmt.Errorf("wal: making the segment %s: %w", path, err)
	}
	if err := atomicfile.SyncDir(l.dir); err != nil {
		// The segment may or may not survive a crash; writing to it
		// would acknowledge entries that might vanish.
		f.Close()
		l.broken = fmt.Errorf("%w: syncing %s after making the segment %s: %v", ErrBroken, l.dir, path, err)
		return l.broken
	}

	if old := l.active; old != nil {
		old.Close() // synced after every write; nothing to lose
		if replacing {
			// The rename put the new segment in its place.
		} else if l.activeEnd == l.activeFirst {
			// No records: nothing to keep. Should the removal not
			// survive a crash, the empty segment lies below the new one
			// and below the tile log's size, so Open does not read it.
			os.Remove(l.activePath)
		} else {
			l.mu.Lock()
			l.closed = append(l.closed, closedSegment{path: l.activePath, end: l.activeEnd})
			l.mu.Unlock()
		}
	}
	l.active, l.activePath = f, path
	l.activeFirst, l.activeEnd, l.activeSize = first, first, int64(len(SegmentHeader))
	l.activeGrown = l.activeSize
	l.activeV1 = false
	return nil
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

// Close closes the segment being written. Later Appends fail with
// ErrClosed.
func (l *Log) Close() error {
	if l.isClosed {
		return nil
	}
	l.isClosed = true
	if l.active == nil {
		return nil
	}
	err := l.active.Close()
	l.active = nil
	if err != nil {
		return fmt.Errorf("wal: %w", err)
	}
	return nil
}
