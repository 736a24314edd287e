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

	"github.com/annal-dev/annal/internal/durable"
)

// The checkpoint journal: the latest cosigned checkpoints a commit group
// records are appended to a journal file beside the bbolt state, made
// durable once for the group (one fdatasync, or one O_DIRECT|O_DSYNC write
// where the file takes it: journal_direct.go), and copied into bbolt (one synced transaction)
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
// Layout: a header block (magic, epoch, CRC-32C), then one frame per
// commit group, each starting at a multiple of journalAlign:
//
//	uint32 length of body | uint32 CRC-32C(epoch || length || body) | body | zeros to the next multiple
//
// the body being the group's records, each a uint32 length and the JSON
// CosignedCheckpoint that bbolt holds. A group is one frame, so it reads
// whole or not at all. Frames are read from the start up to the first one
// whose CRC (which covers the epoch) fails: the space past the end holds
// zeros, frames of an epoch before, or a group a crash tore — whose
// requests were not answered, and a checkpoint recorded and not answered
// is what a lost answer leaves too. A journal emptied (after its records
// are in bbolt) gets a new epoch in its header, so that its old frames no
// longer read.
//
// A frame that fails with a frame of the same epoch after it is not a
// tear but damage: a group is written only once the one before it is
// synced (and a failed write stops the store), so a later frame means the
// failing one was complete and acknowledged. The journal is then refused
// (ErrJournalDamaged), never read short: forgetting a checkpoint the
// witness answered for would let it cosign a fork of it.

const (
	// journalSuffix names the journal: the state file's path with it.
	journalSuffix = ".journal"
	// journalMagic starts the header.
	journalMagic = "annal-witness checkpoint journal 1\n"
	// journalHeaderSize is the header block; records start after it.
	journalHeaderSize = 4096
	// journalFrameHeader is a frame's length and CRC.
	journalFrameHeader = 8
	// journalAlign is where frames start: a multiple of it.
	journalAlign = 64
	// defaultJournalSize is the journal made on first use: some 2,000
	// records of the largest kind (an ML-DSA-44 signed checkpoint).
	defaultJournalSize = 8 << 20
)

var crc32c = crc32.MakeTable(crc32.Castagnoli)

// journal is the open journal file. Its methods are called with the
// Store's checkpoint lock held.
type journal struct {
	f *os.File
	// direct, if not nil, writes the frames (journal_direct.go); f does
	// the rest, and the frames where direct writes are not to be had.
	direct *directWriter
	size   int64 // bytes made for it, header included
	off    int64 // where the next record goes
	epoch  uint64
	buf    []byte
}

// openJournal opens (creating, with size bytes of zeros, synced, and its
// folder synced) the journal at path, and returns it with the payloads of
// the records it holds, in order.
func openJournal(path string, size int64) (*journal, [][]byte, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, nil, err
	}
	j := &journal{f: f, direct: openDirect(path)}
	records, err := j.load(size)
	if err != nil {
		j.close()
		return nil, nil, fmt.Errorf("checkpoint journal %s: %w", path, err)
	}
	return j, records, nil
}

// ErrJournalDamaged is a journal whose header is neither valid nor
// unwritten, or whose frames are damaged short of the last: its records
// may hold checkpoints the witness cosigned and bbolt does not have yet,
// so it is neither made anew nor read short.
var ErrJournalDamaged = errors.New("the checkpoint journal is damaged; its records may hold cosigned checkpoints that the state file does not have: restore the state folder from a backup (or, knowing what is lost, move the journal aside)")

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
	records, end, err := readJournalRecords(data, epoch)
	if err != nil {
		return nil, err
	}
	j.off = end
	if j.direct != nil {
		j.direct.setEnd(data, end)
	}
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

// extend writes zeros up to size bytes (rounded up to whole blocks of
// direct writes) and syncs them.
func (j *journal) extend(size int64) error {
	size = (size + directBlock - 1) &^ (directBlock - 1)
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
	if err := durable.Fdatasync(j.f); err != nil {
		return err
	}
	j.epoch, j.off = epoch, journalHeaderSize
	if j.direct != nil {
		j.direct.setEnd(h, journalHeaderSize)
	}
	return nil
}

// used is the bytes of records the journal holds.
func (j *journal) used() int64 { return j.off - journalHeaderSize }

// free is the room left for records.
func (j *journal) free() int64 { return j.size - j.off }

// append writes the payloads as one frame after the last, and syncs it:
// once it returns nil they survive a crash. The caller makes room first
// (free); if there is not enough, the journal is extended.
func (j *journal) append(payloads [][]byte) error {
	if err := j.frame(payloads); err != nil {
		return err
	}
	if err := j.writeFrame(); err != nil {
		return err
	}
	j.advance()
	return nil
}

// startAppend is append's first half: the frame is written, or its write
// left under way where direct writes go through AIO (journal_aio_linux.go),
// and finishAppend is the second: it returns once the frame is durable.
// Nothing else may be done with the journal in between.
func (j *journal) startAppend(payloads [][]byte) error {
	if err := j.frame(payloads); err != nil {
		return err
	}
	if j.direct == nil {
		return j.writeFrame()
	}
	err := j.direct.start(j.buf, j.off)
	if !errors.Is(err, errDirectUnsupported) {
		return err
	}
	j.dropDirect()
	return j.writeFrame()
}

// finishAppend: see startAppend.
func (j *journal) finishAppend() error {
	if j.direct != nil {
		err := j.direct.finish()
		if errors.Is(err, errDirectUnsupported) {
			j.dropDirect()
			err = j.writeFrame()
		}
		if err != nil {
			return err
		}
	}
	j.advance()
	return nil
}

// frame makes the frame of payloads in j.buf, and room for it.
func (j *journal) frame(payloads [][]byte) error {
	j.buf = append(j.buf[:0], make([]byte, journalFrameHeader)...)
	for _, p := range payloads {
		j.buf = binary.LittleEndian.AppendUint32(j.buf, uint32(len(p)))
		j.buf = append(j.buf, p...)
	}
	body := len(j.buf) - journalFrameHeader
	binary.LittleEndian.PutUint32(j.buf[:4], uint32(body))
	binary.LittleEndian.PutUint32(j.buf[4:], frameSum(j.epoch, j.buf[:4], j.buf[journalFrameHeader:]))
	for len(j.buf)%journalAlign != 0 {
		j.buf = append(j.buf, 0)
	}
	if need := j.off + int64(len(j.buf)); need > j.size {
		return j.extend(need + defaultJournalSize/4)
	}
	return nil
}

// advance moves the end past the frame in j.buf, written.
func (j *journal) advance() {
	j.off += int64(len(j.buf))
	if cap(j.buf) > 1<<20 {
		j.buf = nil
	}
}

// frameSum is a frame's CRC-32C over the epoch, its length and its body.
func frameSum(epoch uint64, length, body []byte) uint32 {
	var e [8]byte
	binary.LittleEndian.PutUint64(e[:], epoch)
	sum := crc32.Update(crc32.Checksum(e[:], crc32c), crc32c, length)
	return crc32.Update(sum, crc32c, body)
}

// writeFrame writes the frame in j.buf at the end and makes it durable:
// with a direct write where the file takes them, else written and
// fdatasynced.
func (j *journal) writeFrame() error {
	if j.direct != nil {
		err := j.direct.write(j.buf, j.off)
		if !errors.Is(err, errDirectUnsupported) {
			return err
		}
		j.dropDirect()
	}
	if _, err := j.f.WriteAt(j.buf, j.off); err != nil {
		return err
	}
	return durable.Fdatasync(j.f)
}

// canOverlap says whether startAppend leaves the write under way.
func (j *journal) canOverlap() bool { return j.direct != nil && j.direct.aio != 0 }

// dropDirect goes on without direct writes.
func (j *journal) dropDirect() {
	j.direct.close()
	j.direct = nil
}

func (j *journal) close() error {
	if j.direct != nil {
		j.direct.close()
	}
	return j.f.Close()
}

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

// frameAt returns the body of the frame of epoch at off, if one verifies
// there.
func frameAt(data []byte, off int, epoch uint64) ([]byte, bool) {
	if off+journalFrameHeader > len(data) {
		return nil, false
	}
	n := int(binary.LittleEndian.Uint32(data[off:]))
	if n == 0 || n > len(data)-off-journalFrameHeader {
		return nil, false
	}
	body := data[off+journalFrameHeader : off+journalFrameHeader+n]
	if frameSum(epoch, data[off:off+4], body) != binary.LittleEndian.Uint32(data[off+4:]) {
		return nil, false
	}
	return body, true
}

// readJournalRecords returns the payloads of the frames of epoch, up to
// the first that does not read, and the offset after the last read; or
// ErrJournalDamaged when a frame of epoch follows the one that does not.
func readJournalRecords(data []byte, epoch uint64) ([][]byte, int64, error) {
	var records [][]byte
	off := journalHeaderSize
	for {
		body, ok := frameAt(data, off, epoch)
		if !ok {
			break
		}
		group, ok := splitRecords(body)
		if !ok { // a frame that verifies and does not parse was written so
			return nil, 0, ErrJournalDamaged
		}
		records = append(records, group...)
		off += alignUp(journalFrameHeader + len(body))
	}
	for at := off + journalAlign; at+journalFrameHeader <= len(data); at += journalAlign {
		if _, ok := frameAt(data, at, epoch); ok {
			return nil, 0, fmt.Errorf("%w (the frame at %d does not read, and the one at %d does)", ErrJournalDamaged, off, at)
		}
	}
	return records, int64(off), nil
}

// splitRecords returns a frame body's records.
func splitRecords(body []byte) ([][]byte, bool) {
	var records [][]byte
	for len(body) > 0 {
		if len(body) < 4 {
			return nil, false
		}
		n := int(binary.LittleEndian.Uint32(body))
		if n == 0 || n > len(body)-4 {
			return nil, false
		}
		records = append(records, body[4:4+n])
		body = body[4+n:]
	}
	return records, true
}

func alignUp(n int) int { return (n + journalAlign - 1) / journalAlign * journalAlign }

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
