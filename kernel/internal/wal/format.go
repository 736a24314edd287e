package wal

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"strconv"
)

const (
	// SegmentHeader opens every segment this package writes: "annal/wal/v3",
	// a line feed and three zero bytes, 16 bytes in all. A reader compares
	// all 16.
	SegmentHeader = "annal/wal/v3\n\x00\x00\x00"
	// SegmentHeaderV2 opens the segments of the second version, which
	// readers still read: their records mark each write's first record, but
	// no commit record follows a write.
	SegmentHeaderV2 = "annal/wal/v2\n\x00\x00\x00"
	// SegmentHeaderV1 opens the segments of the first version, which
	// readers still read: their records mark no write's first record, and
	// their CRC covers only the index and the entry.
	SegmentHeaderV1 = "annal/wal/v1\n\x00\x00\x00"

	// MaxEntrySize is the largest entry a record may hold. A record whose
	// length field claims more is damage: no writer made it.
	MaxEntrySize = 16 << 20

	// opensWriteBit, in a record's length word (versions 2 and 3), marks
	// the first record of an Append (one write, one fdatasync). A writer
	// starts a write only after the one before it was synced, so a record
	// so marked that verifies past a fault shows the fault lies in bytes
	// that were synced: damage, where a fault followed only by unmarked
	// records of the same write is what a crash during that write leaves.
	opensWriteBit = 1 << 31

	// commitWord is the word of a commit record (version 3): bit 30 set,
	// which no entry record's word has (an entry is at most MaxEntrySize,
	// 2^24, bytes), and the length of what follows its index, 8. It is
	// the whole word: a reader compares all 32 bits.
	commitWord = 1<<30 | commitBodySize

	// recordHeaderSize is a record's bytes before its entry: u32 length,
	// u32 CRC-32C, u64 index.
	recordHeaderSize = 16

	// commitBodySize and commitRecordSize: a commit record is a record
	// header (commitWord, CRC-32C, the write's first index) and a body of
	// u32 count and u32 CRC-32C of the write's records.
	commitBodySize   = 8
	commitRecordSize = recordHeaderSize + commitBodySize

	segmentSuffix = ".wal"
	tempSuffix    = ".wal.tmp"
	nameDigits    = 20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// recordCRC is the CRC-32C (Castagnoli) of a record's u32 word followed by
// its u64 index and what comes after (the entry, or a commit record's
// body), which lie next to each other in the record, after the CRC
// (versions 2 and 3). The index is covered so that a record read at the
// wrong place, or left over from an earlier write, does not pass; the word
// so that its mark of a write's first record, and what kind of record it
// is, cannot flip unseen.
func recordCRC(lengthWord, indexAndEntry []byte) uint32 {
	return crc32.Update(crc32.Checksum(lengthWord, castagnoli), castagnoli, indexAndEntry)
}

// recordCRCV1 is a version 1 record's CRC: of the index and the entry.
func recordCRCV1(indexAndEntry []byte) uint32 {
	return crc32.Checksum(indexAndEntry, castagnoli)
}

// AppendRecord appends the record of entry at index to dst (versions 2 and
// 3 encode it alike): u32
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

// appendCommit appends to dst the commit record (version 3) of the write
// whose records are records, count of them from index first: u32
// big-endian commitWord; u32 big-endian CRC-32C over (commitWord || u64
// big-endian first || u32 big-endian count || u32 big-endian write CRC);
// u64 big-endian first; u32 big-endian count; u32 big-endian write CRC,
// the CRC-32C of records (every byte of the write's records, in order).
func appendCommit(dst []byte, first uint64, count uint32, records []byte) []byte {
	start := len(dst)
	dst = binary.BigEndian.AppendUint32(dst, commitWord)
	dst = binary.BigEndian.AppendUint32(dst, 0) // the CRC, once the rest is in place
	dst = binary.BigEndian.AppendUint64(dst, first)
	dst = binary.BigEndian.AppendUint32(dst, count)
	dst = binary.BigEndian.AppendUint32(dst, crc32.Checksum(records, castagnoli))
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

// segmentVersion is 3, 2 or 1 for a segment that starts with that
// version's header, 0 otherwise.
func segmentVersion(data []byte) int {
	if len(data) < len(SegmentHeader) {
		return 0
	}
	switch string(data[:len(SegmentHeader)]) {
	case SegmentHeader:
		return 3
	case SegmentHeaderV2:
		return 2
	case SegmentHeaderV1:
		return 1
	}
	return 0
}

// decodedRecord is a record as decodeRecord read it: an entry's, or (in
// version 3) a commit record.
type decodedRecord struct {
	index uint64 // the entry's index; a commit record's write's first
	entry []byte
	size  int // the record's length in bytes, when its header could be read and the rest fits
	// opensWrite: the record is marked as the first of a write (versions
	// 2 and 3).
	opensWrite bool
	// commit: a commit record, of the write of count records from index
	// whose records' bytes have the CRC-32C writeCRC.
	commit   bool
	count    uint32
	writeCRC uint32
}

// decodeRecord reads the record of a segment of the given version at
// data[off:]. problem is empty for a whole record whose CRC holds, and
// says what is wrong otherwise.
func decodeRecord(data []byte, off, version int) (r decodedRecord, problem string) {
	rest := data[off:]
	if len(rest) < recordHeaderSize {
		return r, fmt.Sprintf("a record header cut short (%d of %d bytes)", len(rest), recordHeaderSize)
	}
	word := binary.BigEndian.Uint32(rest[0:4])
	stored := binary.BigEndian.Uint32(rest[4:8])
	r.index = binary.BigEndian.Uint64(rest[8:16])
	length := word
	switch {
	case version == 3 && word == commitWord:
		r.commit = true
		length = commitBodySize
	case version >= 2:
		r.opensWrite = word&opensWriteBit != 0
		length &^= opensWriteBit
	}
	if length > MaxEntrySize {
		return r, fmt.Sprintf("a record claiming %d bytes, more than the %d an entry may have", length, MaxEntrySize)
	}
	if uint64(len(rest)-recordHeaderSize) < uint64(length) {
		if r.commit {
			return r, fmt.Sprintf("a commit record cut short (%d of %d bytes)", len(rest), commitRecordSize)
		}
		return r, fmt.Sprintf("a record cut short (%d of %d entry bytes)", len(rest)-recordHeaderSize, length)
	}
	r.size = recordHeaderSize + int(length)
	computed := recordCRCV1(rest[8:r.size])
	if version >= 2 {
		computed = recordCRC(rest[0:4], rest[8:r.size])
	}
	if computed != stored {
		if r.commit {
			return r, fmt.Sprintf("a commit record claiming index %d whose CRC is %08x, not the stored %08x", r.index, computed, stored)
		}
		return r, fmt.Sprintf("a record claiming index %d whose CRC is %08x, not the stored %08x", r.index, computed, stored)
	}
	if r.commit {
		r.count = binary.BigEndian.Uint32(rest[16:20])
		r.writeCRC = binary.BigEndian.Uint32(rest[20:24])
		return r, ""
	}
	r.entry = rest[recordHeaderSize:r.size]
	return r, ""
}

// openWrite is, while a version 3 segment is read, the write whose
// records were read and whose commit record was not (yet): count 0 when
// there is none, after a commit record or the header.
type openWrite struct {
	start int    // the offset of its first record
	first uint64 // that record's index
	count int
}

// proof is a record past a fault that verifies and shows the fault lies
// in bytes that were synced: what findVerifying found.
type proof struct {
	at    int // its offset; -1: none found
	index uint64
	// commit: a commit record, of the write of count records from index.
	commit bool
	count  uint32
	// opensWrite: a record marked as a write's first.
	opensWrite bool
	// readBack counts the records from index due on that verify, in
	// order, after the fault: those of a next write that a missing commit
	// record's place is no proof against (findVerifying), which read back.
	readBack int
}

// String says what the proof is and why it proves.
func (p proof) String() string {
	switch {
	case p.commit:
		return fmt.Sprintf("yet the commit record at offset %d, of the write of %s, verifies: that write was synced (its commit record is written only after its fdatasync), so this is damage, not a torn tail",
			p.at, indices(p.index, uint64(p.count)))
	case p.opensWrite:
		return fmt.Sprintf("yet the record at offset %d (index %d) verifies and opens a later write, which began only after the faulty bytes were synced, so this is damage, not a torn tail", p.at, p.index)
	}
	return fmt.Sprintf("yet the record at offset %d (index %d) verifies and was not written with the faulty bytes, so this is damage, not a torn tail", p.at, p.index)
}

// indices names count indices from first: "index 7", "indices 7 to 9".
func indices(first, count uint64) string {
	switch count {
	case 0:
		return "no index"
	case 1:
		return fmt.Sprintf("index %d", first)
	}
	return fmt.Sprintf("indices %d to %d", first, first+count-1)
}

// segmentScan is what reading one segment's bytes found.
type segmentScan struct {
	version int
	end     uint64 // the index after the last good record; first if none
	// good counts bytes of header, good records and commit records: where
	// a fault starts.
	good int
	// fault says what is wrong at offset good; "" if the segment is whole.
	fault string
	// proof, when there is a fault, is a record past it that shows the
	// fault is no torn tail (proof.at -1: none): see findVerifying.
	proof proof
	// sameWrite counts, in a version 2 or 3 segment, the records past the
	// fault that verify but belong to the write the fault interrupted.
	sameWrite int
	// zeroTail counts the zero bytes after the records of a version 2 or
	// 3 segment that is whole: the part of the file its writer grew ahead
	// of its records (Append).
	zeroTail int
	// open is, in a version 3 segment, the last write read, if no commit
	// record follows it: its good records end at good. That is the last
	// write of the newest segment when a crash came between its fdatasync
	// and its commit record (or a power loss before that record was
	// synced), or the good records of a write a fault cut short.
	open openWrite
}

// atRisk returns the indices that a fault proven to be damage puts at
// risk: from the first that does not read back (the fault's, s.end, or
// past the records of a next write that read back in order after a
// missing commit record) to the end (exclusive) of the damaged write, as
// its commit record names it, or to the first index of the later write
// that proves the damage; known is false when the end is not known.
func (s segmentScan) atRisk() (first, end uint64, known bool) {
	p := s.proof
	first = s.end + uint64(p.readBack)
	switch {
	case p.at < 0:
		return first, 0, false
	case p.commit && p.index <= s.end && s.end < p.index+uint64(p.count):
		end = p.index + uint64(p.count)
	case p.index >= s.end:
		end = p.index
	default:
		return first, 0, false
	}
	return min(first, end), end, true
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
// is first); in version 3 besides, each write opens with a marked record
// and ends with its commit record, which must name it. It stops at the
// first record that is not good, or, in a version 2 or 3 segment, where
// only zero bytes are left: they end the records, and are no fault. A
// wrong header is an error: a segment gets its header before it gets its
// name.
func scanSegment(data []byte, first uint64, visit func(index uint64, entry []byte)) (segmentScan, error) {
	version := segmentVersion(data)
	if version == 0 {
		n := min(len(data), len(SegmentHeader))
		return segmentScan{}, fmt.Errorf("at offset 0: %w: the segment header is %q, not %q (or %q, %q)", ErrDamaged, data[:n], SegmentHeader, SegmentHeaderV2, SegmentHeaderV1)
	}
	s := segmentScan{version: version, end: first, good: len(SegmentHeader), proof: proof{at: -1}}
	for s.good < len(data) {
		if version >= 2 && allZero(data[s.good:]) {
			s.zeroTail = len(data) - s.good
			return s, nil
		}
		r, problem := decodeRecord(data, s.good, version)
		if problem == "" {
			problem = s.misplaced(data, r)
		}
		if problem != "" {
			s.fault = problem
			s.proof, s.sameWrite = findVerifying(data, s.good, s.end, version, s.open)
			return s, nil
		}
		if r.commit {
			s.open = openWrite{}
			s.good += r.size
			continue
		}
		if version == 3 {
			if r.opensWrite {
				s.open = openWrite{start: s.good, first: r.index}
			}
			s.open.count++
		}
		if visit != nil {
			visit(r.index, r.entry)
		}
		s.end++
		s.good += r.size
	}
	return s, nil
}

// misplaced says what is wrong with r, a record that verifies at offset
// s.good, being there: "" if it is where it belongs.
func (s segmentScan) misplaced(data []byte, r decodedRecord) string {
	switch {
	case r.commit && s.open.count == 0:
		return fmt.Sprintf("a commit record (of indices from %d) where no write ends", r.index)
	case r.commit && (r.index != s.open.first || uint64(r.count) != uint64(s.open.count)):
		return fmt.Sprintf("a commit record of %d records from index %d after the write of indices %d to %d",
			r.count, r.index, s.open.first, s.open.first+uint64(s.open.count)-1)
	case r.commit:
		if sum := crc32.Checksum(data[s.open.start:s.good], castagnoli); sum != r.writeCRC {
			return fmt.Sprintf("a commit record of indices %d to %d whose CRC of the write is %08x; the write's bytes have %08x",
				s.open.first, s.open.first+uint64(s.open.count)-1, r.writeCRC, sum)
		}
		return ""
	case r.index != s.end:
		return fmt.Sprintf("a record with index %d where %d was due", r.index, s.end)
	case s.version == 3 && r.opensWrite && s.open.count > 0:
		return fmt.Sprintf("a record opening a write at index %d, but the write of indices %d to %d before it has no commit record",
			r.index, s.open.first, s.open.first+uint64(s.open.count)-1)
	case s.version == 3 && !r.opensWrite && s.open.count == 0:
		return fmt.Sprintf("a record at index %d that does not open a write, where a write must open", r.index)
	}
	return ""
}

// findVerifying looks, at every offset from off on, for a record that
// verifies (whole, within the size limit, its CRC holding) and shows that
// the fault at off is not what a write cut short leaves: a prefix of the
// write, or zeros or garbage where the file grew but its data did not
// land, in any order, since a crash may keep any of the write's pages.
//
// In a version 1 segment any such record shows it: the writer wrote after
// the faulty bytes. In a version 2 or 3 segment a record does if it opens
// a write (the writer began another write after the faulty bytes, so they
// had been synced), or if no write could have put it there: at the fault
// itself (it verifies, so only its index or its place is wrong: a record
// left out or written twice), or with an index at most due. In a version 3
// segment a commit record does too: a writer writes a write's commit
// record only once the write is synced, so a commit record past the fault
// shows that the write it names, or an earlier one, holds the fault.
// Unmarked records past the fault with later indices may be the faulty
// write's own later pages, which landed where an earlier one did not; they
// are counted in sameWrite. The writer acknowledged none of that write.
//
// One marked record is no proof either, in a version 3 segment whose fault
// lies right after the good records of a write (open): the one that opens
// the next write with index due, where the writer puts it, right after
// the open write's commit record. The writer writes that commit record
// without syncing it and syncs it with the next write, so a power loss
// during the next write may keep any of the next write's pages and lose
// the commit record's: the next write, then, was never acknowledged, and
// its records count in sameWrite too.
//
// To keep arbitrary bytes from being tried as records of any length, only
// an index within len(data) of due either way counts: any record the
// writer made near here has one, and a random index falls in the window
// with negligible probability.
func findVerifying(data []byte, off int, due uint64, version int, open openWrite) (p proof, sameWrite int) {
	window := uint64(len(data))
	nextWrite := -1 // where the next write opens, if the fault may be a commit record that a power loss lost
	if version == 3 && open.count > 0 {
		nextWrite = off + commitRecordSize
	}
	readBack := 0 // the next write's records that verify in order from due
	for q := off; q+recordHeaderSize <= len(data); q++ {
		index := binary.BigEndian.Uint64(data[q+8 : q+16])
		if max(index, due)-min(index, due) > window {
			continue
		}
		r, problem := decodeRecord(data, q, version)
		if problem != "" {
			continue
		}
		// The next write's first record where the writer puts it, after
		// a commit record a power loss may have lost: no proof.
		opensNextWrite := q == nextWrite && r.opensWrite && r.index == due
		if !opensNextWrite && provesSynced(r, q, off, due, version) {
			return proof{at: q, index: r.index, commit: r.commit, count: r.count, opensWrite: r.opensWrite, readBack: readBack}, sameWrite
		}
		if nextWrite >= 0 && r.index == due+uint64(readBack) && readBack == sameWrite {
			readBack++
		}
		sameWrite++
		q += r.size - 1
	}
	return proof{at: -1}, sameWrite
}

// provesSynced reports whether r, a record that verifies at offset q, at
// or past a fault at off with index due, shows that the fault lies in
// bytes that were synced (findVerifying): in version 1 any record does; in
// versions 2 and 3 a record that opens a write, one at the fault itself or
// one with an index at most due, and in version 3 a commit record.
func provesSynced(r decodedRecord, q, off int, due uint64, version int) bool {
	return version == 1 || r.commit || r.opensWrite || q == off || r.index <= due
}
