package testvectors

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"testing"
)

const historyIndexFile = "historyindex.json"

// historyIndexVectors are keys and values of the history index in the
// kernel's state file (FORMATS.md, "History index (state file)"). Terms and
// log indices are inputs; keys, values and the order of the keys are
// computed. The test writes them from FORMATS.md alone (the index is
// kernel/internal/history, which this package cannot import; that
// package's own test checks its encoder, reader and union against this
// file).
type historyIndexVectors struct {
	Description string `json:"description"`
	// The names FORMATS.md gives: the meta bucket and its format key and
	// value, the index's bucket and block size, and the format (and
	// bucket) an open moves into it.
	MetaBucket string      `json:"meta_bucket"`
	FormatKey  string      `json:"format_key"`
	Format     string      `json:"format"`
	Bucket     string      `json:"bucket"`
	BlockSize  uint64      `json:"block_size"`
	OldFormat  string      `json:"old_format"`
	OldBucket  string      `json:"old_bucket"`
	Vectors    []hiVector  `json:"vectors"`
	KeyOrder   []hiKeyRef  `json:"key_order"`
	Readings   []hiReading `json:"readings"`
	Unions     []hiUnion   `json:"unions"`
	Migration  hiMigration `json:"migration"`
}

// hiVector is a term's log indices (ascending, decimal) and the computed
// keys and values of the blocks they fall in.
type hiVector struct {
	Name    string    `json:"name"`
	Term    string    `json:"term"`
	Indices []string  `json:"indices"`
	Blocks  []hiBlock `json:"blocks"`
}

// hiBlock is one key of the index and its value; Term only in the
// migration, whose blocks are of several terms.
type hiBlock struct {
	Term     string `json:"term,omitempty"`
	Block    string `json:"block"`
	KeyHex   string `json:"key_hex"`
	ValueHex string `json:"value_hex"`
}

// hiKeyRef names one key of the vectors: KeyOrder lists every key of the
// vectors in ascending order of its bytes (computed), as bbolt keeps them.
type hiKeyRef struct {
	Term  string `json:"term"`
	Block string `json:"block"`
}

// hiReading is what a reader yields from a value of a block (both inputs):
// Indices, computed; Reason says why.
type hiReading struct {
	Name     string   `json:"name"`
	Block    string   `json:"block"`
	ValueHex string   `json:"value_hex"`
	Indices  []string `json:"indices"`
	Reason   string   `json:"reason"`
}

// hiUnion is a writer adding indices (Add, ascending) to a block that held
// the value HeldHex (inputs); ValueHex, the value it writes, is computed.
type hiUnion struct {
	Name     string   `json:"name"`
	Block    string   `json:"block"`
	HeldHex  string   `json:"held_hex"`
	Add      []string `json:"add"`
	ValueHex string   `json:"value_hex"`
}

// hiMigration is an index of the older format: Entries (term and index,
// inputs) are its keys (OldKeysHex, computed, in ascending order), which
// an open moves into Blocks (computed, in ascending order of their keys).
type hiMigration struct {
	Name       string       `json:"name"`
	Entries    []hiOldEntry `json:"entries"`
	OldKeysHex []string     `json:"old_keys_hex"`
	Blocks     []hiBlock    `json:"blocks"`
}

type hiOldEntry struct {
	Term  string `json:"term"`
	Index string `json:"index"`
}

// hiBlockSize is the number of consecutive log indices of a block
// (FORMATS.md: 16 384, 2^14).
const hiBlockSize = 16384

func TestHistoryIndexVectors(t *testing.T) {
	var f historyIndexVectors
	load(t, historyIndexFile, &f)
	for _, c := range []struct{ field, got, want string }{
		{"meta_bucket", f.MetaBucket, "meta"},
		{"format_key", f.FormatKey, "format"},
		{"format", f.Format, "crc32c+history/4"},
		{"bucket", f.Bucket, "history"},
		{"old_format", f.OldFormat, "crc32c+events/3"},
		{"old_bucket", f.OldBucket, "events"},
	} {
		if c.got != c.want {
			t.Errorf("%s: %s is %q, FORMATS.md says %q", historyIndexFile, c.field, c.got, c.want)
		}
	}
	if f.BlockSize != hiBlockSize {
		t.Errorf("%s: block_size is %d, FORMATS.md says %d", historyIndexFile, f.BlockSize, hiBlockSize)
	}
	if len(f.Vectors) == 0 || len(f.Readings) == 0 || len(f.Unions) == 0 {
		t.Fatalf("%s lacks vectors, readings or unions", historyIndexFile)
	}
	checkHistoryIndexBlocks(t, &f)
	checkHistoryIndexReadings(t, &f)
	checkHistoryIndexUnions(t, &f)
	checkHistoryIndexMigration(t, &f.Migration)
	save(t, historyIndexFile, &f)
}

// checkHistoryIndexBlocks computes each vector's blocks and the order of
// every key of the vectors.
func checkHistoryIndexBlocks(t *testing.T, f *historyIndexVectors) {
	type ordered struct {
		key []byte
		ref hiKeyRef
	}
	var keys []ordered
	terms := map[string]bool{}
	for i := range f.Vectors {
		v := &f.Vectors[i]
		if terms[v.Term] {
			t.Fatalf("vector %q: term %q is another vector's: key_order needs each term once", v.Name, v.Term)
		}
		terms[v.Term] = true
		indices := hiDecimals(t, v.Name, v.Indices)
		if len(indices) == 0 || !hiStrictlyIncreasing(indices) {
			t.Fatalf("vector %q: indices must be some, strictly increasing", v.Name)
		}
		var computed []hiBlock
		for _, g := range hiGroupByBlock(indices) {
			key := hiKey([]byte(v.Term), g.block)
			value := hiEncode(g.block, g.indices)
			if got := hiRead(g.block, value); !slices.Equal(got, g.indices) {
				t.Fatalf("vector %q: block %d reads back as %v", v.Name, g.block, got)
			}
			computed = append(computed, hiBlock{Block: strconv.FormatUint(g.block, 10), KeyHex: hex.EncodeToString(key), ValueHex: hex.EncodeToString(value)})
			keys = append(keys, ordered{key, hiKeyRef{Term: v.Term, Block: strconv.FormatUint(g.block, 10)}})
		}
		expectBlocks(t, v.Name, &v.Blocks, computed)
	}
	slices.SortFunc(keys, func(a, b ordered) int { return bytes.Compare(a.key, b.key) })
	var got, stored []string
	for _, k := range keys {
		got = append(got, k.ref.Term+" "+k.ref.Block)
	}
	for _, k := range f.KeyOrder {
		stored = append(stored, k.Term+" "+k.Block)
	}
	if slices.Equal(got, stored) {
		return
	}
	if !*update {
		t.Errorf("%s: key_order is %q; the keys sort as %q", historyIndexFile, stored, got)
		return
	}
	f.KeyOrder = f.KeyOrder[:0]
	for _, k := range keys {
		f.KeyOrder = append(f.KeyOrder, k.ref)
	}
}

func checkHistoryIndexReadings(t *testing.T, f *historyIndexVectors) {
	for i := range f.Readings {
		r := &f.Readings[i]
		block := hiDecimal(t, r.Name, r.Block)
		value, err := hex.DecodeString(r.ValueHex)
		if err != nil {
			t.Fatalf("reading %q: %v", r.Name, err)
		}
		if r.Reason == "" {
			t.Errorf("reading %q gives no reason", r.Name)
		}
		expectList(t, historyIndexFile, r.Name, "indices", &r.Indices, hiFormat(hiRead(block, value)))
	}
}

func checkHistoryIndexUnions(t *testing.T, f *historyIndexVectors) {
	for i := range f.Unions {
		u := &f.Unions[i]
		block := hiDecimal(t, u.Name, u.Block)
		held, err := hex.DecodeString(u.HeldHex)
		if err != nil {
			t.Fatalf("union %q: %v", u.Name, err)
		}
		add := hiDecimals(t, u.Name, u.Add)
		if len(add) == 0 || !hiStrictlyIncreasing(add) || len(hiGroupByBlock(add)) != 1 || add[0]/hiBlockSize != block {
			t.Fatalf("union %q: add must be some indices of the block, strictly increasing", u.Name)
		}
		union := slices.Concat(hiRead(block, held), add)
		slices.Sort(union)
		union = slices.Compact(union)
		expect(t, historyIndexFile, u.Name, "value_hex", &u.ValueHex, hex.EncodeToString(hiEncode(block, union)))
	}
}

func checkHistoryIndexMigration(t *testing.T, m *hiMigration) {
	if len(m.Entries) == 0 {
		t.Fatalf("%s: the migration has no entries", historyIndexFile)
	}
	var old [][]byte
	byTerm := map[string][]uint64{}
	for _, e := range m.Entries {
		index := hiDecimal(t, m.Name, e.Index)
		old = append(old, binary.BigEndian.AppendUint64(append([]byte(e.Term), 0), index))
		byTerm[e.Term] = append(byTerm[e.Term], index)
	}
	slices.SortFunc(old, bytes.Compare)
	var oldHex []string
	for _, k := range old {
		oldHex = append(oldHex, hex.EncodeToString(k))
	}
	expectList(t, historyIndexFile, m.Name, "old_keys_hex", &m.OldKeysHex, oldHex)

	var moved []hiBlock
	for term, indices := range byTerm {
		slices.Sort(indices)
		for _, g := range hiGroupByBlock(slices.Compact(indices)) {
			moved = append(moved, hiBlock{Term: term, Block: strconv.FormatUint(g.block, 10),
				KeyHex: hex.EncodeToString(hiKey([]byte(term), g.block)), ValueHex: hex.EncodeToString(hiEncode(g.block, g.indices))})
		}
	}
	slices.SortFunc(moved, func(a, b hiBlock) int { return cmpHex(a.KeyHex, b.KeyHex) })
	expectBlocks(t, m.Name, &m.Blocks, moved)
}

// expectBlocks is expect for the blocks of a vector or of the migration.
func expectBlocks(t *testing.T, name string, stored *[]hiBlock, computed []hiBlock) {
	t.Helper()
	if *update && len(*stored) != len(computed) {
		*stored = make([]hiBlock, len(computed))
	}
	if len(*stored) != len(computed) {
		t.Errorf("%s: %q has %d blocks in the file, %d computed now", historyIndexFile, name, len(*stored), len(computed))
		return
	}
	for j, c := range computed {
		b := &(*stored)[j]
		expect(t, historyIndexFile, name, fmt.Sprintf("blocks[%d].term", j), &b.Term, c.Term)
		expect(t, historyIndexFile, name, fmt.Sprintf("blocks[%d].block", j), &b.Block, c.Block)
		expect(t, historyIndexFile, name, fmt.Sprintf("blocks[%d].key_hex", j), &b.KeyHex, c.KeyHex)
		expect(t, historyIndexFile, name, fmt.Sprintf("blocks[%d].value_hex", j), &b.ValueHex, c.ValueHex)
	}
}

// cmpHex compares two lower-case hex strings as the bytes they spell.
func cmpHex(a, b string) int {
	x, _ := hex.DecodeString(a)
	y, _ := hex.DecodeString(b)
	return bytes.Compare(x, y)
}

// hiKey is term || 0x00 || u64 block, big-endian (FORMATS.md).
func hiKey(term []byte, block uint64) []byte {
	k := append(slices.Clone(term), 0)
	return binary.BigEndian.AppendUint64(k, block)
}

// hiEncode writes the value of a block holding indices (strictly
// increasing, each in the block) by hand, from FORMATS.md: LEB128 varints
// of the first index less the block's first, then of each index less the
// one before less one.
func hiEncode(block uint64, indices []uint64) []byte {
	var out []byte
	for j, index := range indices {
		d := index - block*hiBlockSize
		if j > 0 {
			d = index - indices[j-1] - 1
		}
		for d >= 0x80 {
			out = append(out, byte(d)|0x80)
			d >>= 7
		}
		out = append(out, byte(d))
	}
	return out
}

// hiRead reads a block's value up to its first damage (FORMATS.md,
// "Reading"), by offsets within the block so that the last block of all
// needs no index past 2^64 − 1.
func hiRead(block uint64, value []byte) []uint64 {
	var out []uint64
	next := uint64(0) // the least offset the next index may have
	for len(value) > 0 {
		d, n, ok := hiVarint(value)
		if !ok || d >= hiBlockSize-next {
			return out
		}
		value = value[n:]
		offset := next + d
		out = append(out, block*hiBlockSize+offset)
		next = offset + 1 // after the block's last index, every varint is damage
	}
	return out
}

// hiVarint reads one LEB128 varint: not ok when it is cut short, longer
// than 10 bytes or worth 2^64 or more.
func hiVarint(b []byte) (v uint64, n int, ok bool) {
	for i := 0; i < len(b) && i < 10; i++ {
		c := b[i]
		if i == 9 && c > 1 { // bits past the 64th, or an 11th byte to come
			return 0, 0, false
		}
		v |= uint64(c&0x7f) << (7 * i)
		if c < 0x80 {
			return v, i + 1, true
		}
	}
	return 0, 0, false
}

type hiGroup struct {
	block   uint64
	indices []uint64
}

// hiGroupByBlock splits ascending indices by block.
func hiGroupByBlock(indices []uint64) []hiGroup {
	var out []hiGroup
	for _, index := range indices {
		b := index / hiBlockSize
		if len(out) == 0 || out[len(out)-1].block != b {
			out = append(out, hiGroup{block: b})
		}
		out[len(out)-1].indices = append(out[len(out)-1].indices, index)
	}
	return out
}

func hiStrictlyIncreasing(s []uint64) bool {
	for i := 1; i < len(s); i++ {
		if s[i] <= s[i-1] {
			return false
		}
	}
	return true
}

// hiDecimal parses a decimal of FORMATS.md's conventions (no sign, no
// leading zero).
func hiDecimal(t *testing.T, name, s string) uint64 {
	t.Helper()
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil || strconv.FormatUint(v, 10) != s {
		t.Fatalf("%s: %q is not a decimal", name, s)
	}
	return v
}

func hiDecimals(t *testing.T, name string, s []string) []uint64 {
	t.Helper()
	out := make([]uint64, len(s))
	for i := range s {
		out[i] = hiDecimal(t, name, s[i])
	}
	return out
}

func hiFormat(indices []uint64) []string {
	out := make([]string, len(indices))
	for i, v := range indices {
		out[i] = strconv.FormatUint(v, 10)
	}
	return out
}
