package wal

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"strconv"
)

const (
	// SegmentHeader opens every segment file: "annal/wal/v1", a line feed
	// and three zero bytes, 16 bytes in all. A reader compares all 16.
	SegmentHeader = "annal/wal/v1\n\x00\x00\x00"

	// MaxEntrySize is the largest entry a record may hold. A record whose
	// length field claims more is damage: no writer made it.
	MaxEntrySize = 16 << 20

	// recordHeaderSize is a record's bytes before its entry: u32 length,
	// u32 CRC-32C, u64 index.
	recordHeaderSize = 16

	segmentSuffix = ".wal"
	tempSuffix    = ".wal.tmp"
	nameDigits    = 20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// recordCRC is the CRC-32C (Castagnoli) of a record's u64 big-endian
// index followed by its entry, which lie next to each other in the record.
// The index is covered so that a record read at the wrong place, or left
// over from an earlier write, does not pass.
func recordCRC(indexAndEntry []byte) uint32 {
	return crc32.Checksum(indexAndEntry, castagnoli)
}

// AppendRecord appends the record of entry at index to dst: u32 big-endian
// entry length, u32 big-endian CRC-32C over (u64 big-endian index ||
// entry), u64 big-endian index, the entry. It does not check the size
// limit; Append does.
func AppendRecord(dst []byte, index uint64, entry []byte) []byte {
	start := len(dst)
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(entry)))
	dst = binary.BigEndian.AppendUint32(dst, 0) // the CRC, once the rest is in place
	dst = binary.BigEndian.AppendUint64(dst, index)
	dst = append(dst, entry...)
	binary.BigEndian.PutUint32(dst[start+4:], recordCRC(dst[start+8:]))
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

// decodeRecord reads the record at data[off:]. problem is empty for a
// whole record whose CRC holds, and says what is wrong otherwise; size is
// the record's length when its header could be read and the entry fits.
func decodeRecord(data []byte, off int) (index uint64, entry []byte, size int, problem string) {
	rest := data[off:]
	if len(rest) < recordHeaderSize {
		return 0, nil, 0, fmt.Sprintf("a record header cut short (%d of %d bytes)", len(rest), recordHeaderSize)
	}
	length := binary.BigEndian.Uint32(rest[0:4])
	stored := binary.BigEndian.Uint32(rest[4:8])
	index = binary.BigEndian.Uint64(rest[8:16])
	if length > MaxEntrySize {
		return index, nil, 0, fmt.Sprintf("a record claiming %d bytes, more than the %d an entry may have", length, MaxEntrySize)
	}
	if uint64(len(rest)-recordHeaderSize) < uint64(length) {
		return index, nil, 0, fmt.Sprintf("a record cut short (%d of %d entry bytes)", len(rest)-recordHeaderSize, length)
	}
	size = recordHeaderSize + int(length)
	entry = rest[recordHeaderSize:size]
	if computed := recordCRC(rest[8:size]); computed != stored {
		return index, entry, size, fmt.Sprintf("a record claiming index %d whose CRC is %08x, not the stored %08x", index, computed, stored)
	}
	return index, entry, size, ""
}

// segmentScan is what reading one segment's bytes found.
type segmentScan struct {
	end  uint64 // the index after the last good record; first if none
	good int    // bytes of header and good records: where a fault starts
	// fault says what is wrong at offset good; "" if the segment is whole.
	fault string
	// verifying, when there is a fault, is the offset of a record at or
	// after it that verifies (-1: none): then the fault is not a torn
	// tail.
	verifying      int
	verifyingIndex uint64
}

// scanSegment reads data, the bytes of the segment whose name says first,
// and calls visit with each good record in order: a record is good when it
// is whole, its CRC holds and its index follows the one before (the first
// is first). It stops at the first record that is not. A wrong header is an
// error: a segment gets its header before it gets its name.
func scanSegment(data []byte, first uint64, visit func(index uint64, entry []byte)) (segmentScan, error) {
	if len(data) < len(SegmentHeader) || string(data[:len(SegmentHeader)]) != SegmentHeader {
		n := min(len(data), len(SegmentHeader))
		return segmentScan{}, fmt.Errorf("at offset 0: %w: the segment header is %q, not %q", ErrDamaged, data[:n], SegmentHeader)
	}
	s := segmentScan{end: first, good: len(SegmentHeader), verifying: -1}
	for s.good < len(data) {
		index, entry, size, problem := decodeRecord(data, s.good)
		if problem == "" && index != s.end {
			problem = fmt.Sprintf("a record with index %d where %d was due", index, s.end)
		}
		if problem != "" {
			s.fault = problem
			s.verifying, s.verifyingIndex = findVerifying(data, s.good, s.end)
			return s, nil
		}
		if visit != nil {
			visit(index, entry)
		}
		s.end++
		s.good += size
	}
	return s, nil
}

// findVerifying looks, at every offset from off on, for a record that
// verifies: whole, within the size limit, its CRC holding. Found at or
// after a fault, such a record is something the writer wrote after the
// faulty bytes (or a record at the wrong place), not what a write cut
// short leaves, which is a prefix of the write, or zeros or garbage where
// the file grew but its data did not land. To keep arbitrary bytes from
// being tried as records of any length, only an index within len(data) of
// due either way counts: any record the writer made near here has one, and
// a random index falls in the window with negligible probability.
func findVerifying(data []byte, off int, due uint64) (int, uint64) {
	window := uint64(len(data))
	for q := off; q+recordHeaderSize <= len(data); q++ {
		index := binary.BigEndian.Uint64(data[q+8 : q+16])
		if max(index, due)-min(index, due) > window {
			continue
		}
		length := binary.BigEndian.Uint32(data[q : q+4])
		if length > MaxEntrySize || uint64(length) > uint64(len(data)-q-recordHeaderSize) {
			continue
		}
		if recordCRC(data[q+8:q+recordHeaderSize+int(length)]) == binary.BigEndian.Uint32(data[q+4:q+8]) {
			return q, index
		}
	}
	return -1, 0
}
