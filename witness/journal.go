package witness

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
)

// The checkpoint journal: the latest cosigned checkpoints a commit group
// records are appended to a journal file beside the bbolt state, with one
// fdatasync for the group, and copied into bbolt (one synced transaction)
// only when the journal fills, at open and before a log's state is
// forgotten.
//
// Why: a bbolt commit is two fdatasyncs (its pages, then its meta page),
// ~0.3 ms on the disk measured here against ~0.15 ms for one, and with one
// client every request waits for all of it; sqlite in WAL mode, which
// omniwitness uses, pays one. The journal is written over space made
// (zeros, synced) when it was created, so that a group's fdatasync writes
// data and no file metadata.
//
// Layout: a header block (magic, epoch, CRC-32C), then records, each
//
//	uint32 length of payload | uint32 CRC-32C(epoch || length || payload) | payload
//
// the payload being the JSON CosignedCheckpoint that bbolt holds. Records
// are read from the start up to the first one whose CRC (which covers the
// epoch) fails: the space past the end holds zeros or records of an epoch
// before. A journal emptied (after its records are in bbolt) gets a new
// epoch in its header, so that its old records no longer read. A group's
// records written only in part by a crash read up to the torn one: the
// requests of that group were not answered, and a checkpoint recorded and
// not answered is what a lost answer leaves too.

const (
	// journalSuffix names the journal: the state file's path with it.
	journalSuffix = ".journal"
	// journalMagic starts the header.
	journalMagic = "annal-witness checkpoint journal 1\n"
	// journalHeaderSize is the header block; records start after it.
	journalHeaderSize = 4096
	// journalRecordHeader is a record's length and CRC.
	journalRecordHeader = 8
	// defaultJournalSize is the journal made on first use: some 2,000
	// records of the largest kind (an ML-DSA-44 signed checkpoint).
	defaultJournalSize = 8 << 20
)

var crc32c = crc32.MakeTable(crc32.Castagnoli)

// journal is the open journal file. Its methods are called with the
// Store's checkpoint lock held.
type journal struct {
	f     *os.File
	size  int64 // bytes made for it, header included
	off   int64 // where the next record goes
	epoch uint64
	buf   []byte
}

// openJournal opens (creating, with size bytes of zeros, synced, and its
// folder synced) the journal at path, and returns it with the payloads of
// the records it holds, in order.
func openJournal(path string, size int64) (*journal, [][]byte, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, nil, err
	}
	j := &journal{f: f}
	records, err := j.load(size)
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("checkpoint journal %s: %w", path, err)
	}
	return j, records, nil
}

// ErrJournalDamaged is a journal whose header is neither valid nor
// unwritten: its records may hold checkpoints the witness cosigned and
// bbolt does not have yet, so it is not made anew over them.
var ErrJournalDamaged = errors.New("the checkpoint journal's header is damaged; its records may hold cosigned checkpoints that the state file does not have: restore the state folder from a backup (or, knowing what is lost, move the journal aside)")

// load reads the journal, or makes it if it has no header yet (a new file,
// or one whose creation a crash interrupted: its header is still zeros,
// and nothing in it was ever acknowledged, since nothing is appended
// before the header is synced). A header that is there but does not
// verify is damage, and refused (ErrJournalDamaged): remaking the journal
// would forget checkpoints the witness answered for, and then it could
// cosign a fork of them.
func (j *journal) load(size int64) ([][]byte, error) {
	data, err := io.ReadAll(j.f)
	if err != nil {
		return nil, err
	}
	epoch, ok := parseJournalHeader(data)
	if !ok {
		if len(data) >= journalHeaderSize && !allZeros(data[:journalHeaderSize]) {
			return nil, ErrJournalDamaged
		}
		return nil, j.create(size)
	}
	j.epoch, j.size = epoch, int64(len(data))
	records, end := readJournalRecords(data, epoch)
	j.off = end
	return records, nil
}

// create makes the journal: zeros, then the header of epoch 1, synced, and
// the folder synced so that the file's name is durable too.
func (j *journal) create(size int64) error {
	if err := j.f.Truncate(0); err != nil {
		return err
	}
	if err := j.extend(max(size, journalHeaderSize+64<<10)); err != nil {
		return err
	}
	if err := j.reset(1); err != nil {
		return err
	}
	return syncDir(filepath.Dir(j.f.Name()))
}

// extend writes zeros up to size bytes and syncs them.
func (j *journal) extend(size int64) error {
	zeros := make([]byte, 1<<20)
	for at := j.size; at < size; at += int64(len(zeros)) {
		n := min(int64(len(zeros)), size-at)
		if _, err := j.f.WriteAt(zeros[:n], at); err != nil {
			return err
		}
	}
	if err := j.f.Sync(); err != nil {
		return err
	}
	j.size = max(j.size, size)
	return nil
}

// reset empties the journal: a header of the given epoch, synced.
func (j *journal) reset(epoch uint64) error {
	h := make([]byte, journalHeaderSize)
	copy(h, journalMagic)
	binary.LittleEndian.PutUint64(h[len(journalMagic):], epoch)
	sum := crc32.Checksum(h[:len(journalMagic)+8], crc32c)
	binary.LittleEndian.PutUint32(h[len(journalMagic)+8:], sum)
	if _, err := j.f.WriteAt(h, 0); err != nil {
		return err
	}
	if err := fdatasync(j.f); err != nil {
		return err
	}
	j.epoch, j.off = epoch, journalHeaderSize
	return nil
}

// used is the bytes of records the journal holds.
func (j *journal) used() int64 { return j.off - journalHeaderSize }

// free is the room left for records.
func (j *journal) free() int64 { return j.size - j.off }

// append writes the payloads as records after the last, in one write, and
// syncs them: once it returns nil they survive a crash. The caller makes
// room first (free); if there is not enough, the journal is extended.
func (j *journal) append(payloads [][]byte) error {
	j.buf = j.buf[:0]
	var epoch [8]byte
	binary.LittleEndian.PutUint64(epoch[:], j.epoch)
	for _, p := range payloads {
		var head [journalRecordHeader]byte
		binary.LittleEndian.PutUint32(head[:4], uint32(len(p)))
		sum := crc32.Update(crc32.Checksum(epoch[:], crc32c), crc32c, head[:4])
		binary.LittleEndian.PutUint32(head[4:], crc32.Update(sum, crc32c, p))
		j.buf = append(append(j.buf, head[:]...), p...)
	}
	if need := j.off + int64(len(j.buf)); need > j.size {
		if err := j.extend(need + defaultJournalSize/4); err != nil {
			return err
		}
	}
	if _, err := j.f.WriteAt(j.buf, j.off); err != nil {
		return err
	}
	if err := fdatasync(j.f); err != nil {
		return err
	}
	j.off += int64(len(j.buf))
	if cap(j.buf) > 1<<20 {
		j.buf = nil
	}
	return nil
}

func (j *journal) close() error { return j.f.Close() }

// parseJournalHeader returns the epoch of a valid header.
func parseJournalHeader(data []byte) (uint64, bool) {
	n := len(journalMagic)
	if len(data) < journalHeaderSize || !bytes.Equal(data[:n], []byte(journalMagic)) {
		return 0, false
	}
	if crc32.Checksum(data[:n+8], crc32c) != binary.LittleEndian.Uint32(data[n+8:]) {
		return 0, false
	}
	return binary.LittleEndian.Uint64(data[n:]), true
}

// readJournalRecords returns the payloads of the records of epoch, up to
// the first that does not read, and the offset after the last read.
func readJournalRecords(data []byte, epoch uint64) ([][]byte, int64) {
	var records [][]byte
	var e [8]byte
	binary.LittleEndian.PutUint64(e[:], epoch)
	off := journalHeaderSize
	for off+journalRecordHeader <= len(data) {
		n := int(binary.LittleEndian.Uint32(data[off:]))
		if n == 0 || n > len(data)-off-journalRecordHeader {
			break
		}
		p := data[off+journalRecordHeader : off+journalRecordHeader+n]
		sum := crc32.Update(crc32.Checksum(e[:], crc32c), crc32c, data[off:off+4])
		if crc32.Update(sum, crc32c, p) != binary.LittleEndian.Uint32(data[off+4:]) {
			break
		}
		records = append(records, p)
		off += journalRecordHeader + n
	}
	return records, int64(off)
}

// syncDir makes the names in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, os.ErrInvalid) {
		return err
	}
	return nil
}

func allZeros(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
