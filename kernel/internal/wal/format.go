package wal

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"strconv"
)

const (
	// SegmentHeader opens every segment this package writes: "annal/wal/v2",
	// a line feed and three zero bytes, 16 bytes in all. A reader compares
	// all 16.
	SegmentHeader = "annal/wal/v2\n\x00\x00\x00"
	// SegmentHeaderV1 opens the segments of the first version, which
	// readers still read: their records mark no write's first record, and
	// their CRC covers only the index and the entry.
	SegmentHeaderV1 = "annal/wal/v1\n\x00\x00\x00"

	// MaxEntrySize is the largest entry a record may hold. A record whose
	// length field claims more is damage: no writer made it.
	MaxEntrySize = 16 << 20

	// opensWriteBit, in a version 2 record's length word, marks the first
	// record of an Append (one write, one fdatasync). A writer starts a
	// write only after the one before it was synced, so a record so marked
	// that verifies past a fault shows the fault lies in bytes that were
	// synced: damage, where a fault followed only by unmarked records of
	// the same write is what a crash during that write leaves.
	opensWriteBit = 1 << 31

	// recordHeaderSize is a record's bytes before its entry: u32 length,
	// u32 CRC-32C, u64 index.
	recordHeaderSize = 16

	segmentSuffix = ".wal"
	tempSuffix    = ".wal.tmp"
	nameDigits    = 20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// recordCRC is the CRC-32C (Castagnoli) of a version 2 record's u32
// length word followed by its u64 index and its entry (which lie next to
// each other in the record, after the CRC). The index is covered so that
// a record read at the wrong place, or left over from an earlier write,
// does not pass; the length word so that its mark of a write's first
// record cannot flip unseen.
func recordCRC(lengthWord, indexAndEntry []byte) uint32 {
	return crc32.Update(crc32.Checksum(lengthWord, castagnoli), castagnoli, indexAndEntry)
}

// recordCRCV1 is a version 1 record's CRC: of the index and the entry.
func recordCRCV1(indexAndEntry []byte) uint32 {
	return crc32.Checksum(indexAndEntry, castagnoli)
}

// AppendRecord appends the version 2 record of entry at index to dst: u32
// big-endian entry length, its top bit set when the record opens a write
// (the first record of an Append); u32 big-endian CRC-32C over (that u32
// || u64 big-endian index || entry); u64 big-endian index; the entry. It
// does not check the size limit; Append does.
func AppendRecord(dst []byte, index uint64, entry []byte, opensWrite bool) []byte {
	start := len(dst)
	word := uint32(len(entry))
	if opensWrite {
		word |= opensWriteBit
	}
	dst = binary.BigEndian.AppendUint32(dst, word)
	dst = binary.BigEndian.AppendUint32(dst, 0) // the CRC, once the rest is in place
	dst = binary.BigEndian.AppendUint64(dst, index)
	dst = append(dst, entry...)
	binary.BigEndian.PutUint32(dst[start+4:], recordCRC(dst[start:start+4], dst[start+8:]))
	return dst
}

// segmentName is the file name of the segment whose first record has
// index first: 20 decimal digits, zero-padded, so that names sort as
// indices do.
func segmentName(first uint64) string {
	return fmt.Sprintf("%020d%s", first, segmentSuffix)
}

// parseName reports whether name is a segment's (ok) or a temporary file
// of one (temp), and the first index it names.
func parseName(name string) (first uint64, ok, temp bool, err error) {
	var digits string
	switch {
	case len(name) == nameDigits+len(segmentSuffix) && name[nameDigits:] == segmentSuffix:
		digits, ok = name[:nameDigits], true
	case len(name) == nameDigits+len(tempSuffix) && name[nameDigits:] == tempSuffix:
		digits, temp = name[:nameDigits], true
	default:
		return 0, false, false, nil
	}
	for i := 0; i < len(digits); i++ {
		if digits[i] < '0' || digits[i] > '9' {
			return 0, false, false, nil
		}
	}
	first, err = strconv.ParseUint(digits, 10, 64)
	if err != nil {
		// Twenty digits past 2^64-1: shaped like a segment, but no
		// writer names one so.
		return 0, ok, temp, fmt.Errorf("%s: %w: the name is not an index", name, ErrDamaged)
	}
	return first, ok, temp, nil
}

// segmentVersion is 2 or 1 for a segment that starts with that version's
// header, 0 otherwise.
func segmentVersion(data []byte) int {
	switch {
	case len(data) < len(SegmentHeader):
		return 0
	case string(data[:len(SegmentHeader)]) == SegmentHeader:
		return 2
	case string(data[:len(SegmentHeaderV1)]) == SegmentHeaderV1:
		return 1
	}
	return 0
}

// decodedRecord is a record as decodeRecord read it.
type decodedRecord struct {
	index uint64
	entry []byte
	size  int // the record's length in bytes, when its header could be read and the entry fits
	// opensWrite: the record is marked as the first of a write (version 2).
	opensWrite bool
}

// decodeRecord reads the record of a segment of the given version at
// data[off:]. problem is empty for a whole record whose CRC holds, and
// says what is wrong otherwise.
func decodeRecord(data []byte, off, version int) (r decodedRecord, problem string) {
	rest := data[off:]
	if len(rest) < recordHeaderSize {
		return r, fmt.Sprintf("a record header cut short (%d of %d bytes)", len(rest), recordHeaderSize)
	}
	length := binary.BigEndian.Uint32(rest[0:4])
	if version == 2 {
		r.opensWrite = length&opensWriteBit != 0
		length &^= opensWriteBit
	}
	stored := binary.BigEndian.Uint32(rest[4:8])
	r.index = binary.BigEndian.Uint64(rest[8:16])
	if length > MaxEntrySize {
		return r, fmt.Sprintf("a record claiming %d bytes, more than the %d an entry may have", length, MaxEntrySize)
	}
	if uint64(len(rest)-recordHeaderSize) < uint64(length) {
		return r, fmt.Sprintf("a record cut short (%d of %d entry bytes)", len(rest)-recordHeaderSize, length)
	}
	r.size = recordHeaderSize + int(length)
	r.entry = rest[recordHeaderSize:r.size]
	computed := recordCRCV1(rest[8:r.size])
	if version == 2 {
		computed = recordCRC(rest[0:4], rest[8:r.size])
	}
	if computed != stored {
		return r, fmt.Sprintf("a record claiming index %d whose CRC is %08x, not the stored %08x", r.index, computed, stored)
	}
	return r, ""
}

// segmentScan is what reading one segment's bytes found.
type segmentScan struct {
	version int
	end     uint64 // the index after the last good record; first if none
	good    int    // bytes of header and good records: where a fault starts
	// fault says what is wrong at offset good; "" if the segment is whole.
	fault string
	// verifying, when there is a fault, is the offset of a record past it
	// that shows the fault is no torn tail (-1: none): see findVerifying.
	verifying      int
	verifyingIndex uint64
	// sameWrite counts, in a version 2 segment, the records past the fault
	// that verify but belong to the write the fault interrupted.
	sameWrite int
	// zeroTail counts the zero bytes after the records of a version 2
	// segment that is whole: the part of the file its writer grew ahead
	// of its records (Append).
	zeroTail int
}

// allZero reports whether b holds only zero bytes. No record is all
// zeros: its CRC would have to be that of zero bytes, which is not zero
// (TestRecordCRCCoversTheIndex).
func allZero(b []byte) bool {
	for len(b) >= 8 {
		if binary.LittleEndian.Uint64(b) != 0 {
			return false
		}
		b = b[8:]
	}
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// scanSegment reads data, the bytes of the segment whose name says first,
// and calls visit with each good record in order: a record is good when it
// is whole, its CRC holds and its index follows the one before (the first
// is first). It stops at the first record that is not, or, in a version 2
// segment, where only zero bytes are left: they end the records, and are
// no fault. A wrong header is an error: a segment gets its header before
// it gets its name.
func scanSegment(data []byte, first uint64, visit func(index uint64, entry []byte)) (segmentScan, error) {
	version := segmentVersion(data)
	if version == 0 {
		n := min(len(data), len(SegmentHeader))
		return segmentScan{}, fmt.Errorf("at offset 0: %w: the segment header is %q, not %q (or %q)", ErrDamaged, data[:n], SegmentHeader, SegmentHeaderV1)
	}
	s := segmentScan{version: version, end: first, good: len(SegmentHeader), verifying: -1}
	for s.good < len(data) {
		if version == 2 && allZero(data[s.good:]) {
			s.zeroTail = len(data) - s.good
			return s, nil
		}
		r, problem := decodeRecord(data, s.good, version)
		if problem == "" && r.index != s.end {
			problem = fmt.Sprintf("a record with index %d where %d was due", r.index, s.end)
		}
		if problem != "" {
			s.fault = problem
			s.verifying, s.verifyingIndex, s.sameWrite = findVerifying(data, s.good, s.end, version)
			return s, nil
		}
		if visit != nil {
			visit(r.index, r.entry)
		}
		s.end++
		s.good += r.size
	}
	return s, nil
}

// findVerifying looks, at every offset from off on, for a record that
// verifies (whole, within the size limit, its CRC holding) and shows that
// the fault at off is not what a write cut short leaves: a prefix of the
// write, or zeros or garbage where the file grew but its data did not
// land, in any order, since a crash may keep any of the write's pages.
//
// In a version 1 segment any such record shows it: the writer wrote after
// the faulty bytes. In a version 2 segment a record does if it opens a
// write (the writer began another write after the faulty bytes, so they
// had been synced), or if no write could have put it there: at the fault
// itself (it verifies, so only its index is wrong: a record left out or
// written twice), or with an index at most due. Unmarked records past the
// fault with later indices may be the faulty write's own later pages,
// which landed where an earlier one did not; they are counted in
// sameWrite. The writer acknowledged none of that write.
//
// To keep arbitrary bytes from being tried as records of any length, only
// an index within len(data) of due either way counts: any record the
// writer made near here has one, and a random index falls in the window
// with negligible probability.
func findVerifying(data []byte, off int, due uint64, version int) (at int, index uint64, sameWrite int) {
	window := uint64(len(data))
	for q := off; q+recordHeaderSize <= len(data); q++ {
		index := binary.BigEndian.Uint64(data[q+8 : q+16])
		if max(index, due)-min(index, due) > window {
			continue
		}
		r, problem := decodeRecord(data, q, version)
		if problem != "" {
			continue
		}
		if version == 1 || r.opensWrite || q == off || r.index <= due {
			return q, r.index, sameWrite
		}
		sameWrite++
		q += r.size - 1
	}
	return -1, 0, sameWrite
}
