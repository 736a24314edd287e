package history

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"time"

	"github.com/annal-dev/annal/checkpoints"
	"github.com/annal-dev/annal/format/bundle"
	"github.com/annal-dev/annal/kernel/delta"
	"github.com/annal-dev/annal/kernel/event"
	"github.com/annal-dev/annal/kernel/internal/errclass"
	"github.com/annal-dev/annal/kernel/internal/logstore"
	"github.com/annal-dev/annal/kernel/internal/sealstore"
	"github.com/gowebpki/jcs"
	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
	"github.com/transparency-dev/tessera/api"
	"github.com/transparency-dev/tessera/api/layout"
)

// kindPattern is the shape of an event kind (testvectors/FORMATS.md).
var kindPattern = regexp.MustCompile(`^[a-z][a-z_]*(\.[a-z][a-z_]*)*$`)

// maxCachedTiles bounds the tiles an export keeps hashed (about 16 KiB
// each).
const maxCachedTiles = 1024

// ExportSelection chooses the events of an audit bundle. With none of
// Actor, Session, Kind, Since and Until the bundle is the contiguous range
// [From, To), proven by one compact range; otherwise it holds the events of
// [From, To) that match all of them, each with its own inclusion proof, and
// none of the others (selective disclosure).
type ExportSelection struct {
	From, To *uint64 // default: 0 and the checkpoint's size
	Actor    string
	Session  string
	Kind     string
	Since    time.Time // inclusive; zero: no bound
	Until    time.Time // exclusive; zero: no bound
	// OldSize, if not 0, adds the consistency proof from the tree of that
	// size (an older checkpoint the auditor holds) to the checkpoint's.
	OldSize uint64
	// WithholdSealed leaves sealed payloads closed (their commitments
	// only), for an auditor who needs the proofs and not the personal data.
	WithholdSealed bool
}

// Filtered reports whether the selection filters events by content, which
// makes the bundle sparse.
func (s ExportSelection) Filtered() bool {
	return s.Actor != "" || s.Session != "" || s.Kind != "" || !s.Since.IsZero() || !s.Until.IsZero()
}

// ExportResult says what Export wrote.
type ExportResult struct {
	Size   uint64 // the checkpoint's tree size
	Events uint64
	Bytes  int64
	// Opened counts the sealed payloads the bundle carries opened; Erased
	// those it carries as their commitment only (their subject erased, the
	// payload missing from the data folder, or withheld).
	Opened, Erased uint64
	// KeyEvents counts the key events a filtered bundle carries besides
	// the events it selects (key_event lines).
	KeyEvents uint64
}

// Export is Kernel.Export on the log tl; opening opens an entry's sealed
// payload for the bundle, or says it cannot.
func Export(ctx context.Context, tl *logstore.Log, opening func(entry []byte, res *ExportResult) *bundle.Opening, sel ExportSelection, w io.Writer, progress func(done, total uint64)) (*ExportResult, error) {
	cp, err := tl.LatestCheckpoint(ctx)
	if err != nil {
		return nil, fmt.Errorf("read checkpoint: %w", err)
	}
	from, to, err := sel.bounds(cp.Size)
	if err != nil {
		return nil, err
	}
	if err := sel.validate(); err != nil {
		return nil, err
	}
	x := &exporter{log: tl, ctx: ctx, cp: cp, tiles: map[[2]uint64][][][]byte{}}
	header, err := x.header(sel, from, to)
	if err != nil {
		return nil, err
	}
	cw := &countingWriter{w: w}
	bw := &bundleWriter{x: x, sel: sel, from: from, opening: opening, header: header,
		out: bufio.NewWriterSize(cw, 256<<10), res: &ExportResult{Size: cp.Size}}
	// A filtered bundle carries every key event below its end (from index
	// 0) as a key_event line, so that the signatures of the events it
	// selects can be checked against the keys the log registered.
	scanFrom := from
	if sel.Filtered() {
		scanFrom = 0
	}
	for index, entry := range x.entries(scanFrom, to, &err) {
		if progress != nil && index%4096 == 0 {
			progress(index-scanFrom, to-scanFrom)
		}
		if err := bw.add(index, entry); err != nil {
			return nil, err
		}
	}
	if err != nil {
		return nil, err
	}
	if bw.res.Events == 0 {
		return nil, fmt.Errorf("%w: no event in [%d, %d) matches the selection", errclass.NotFound, from, to)
	}
	if progress != nil {
		progress(to-scanFrom, to-scanFrom)
	}
	if err := bw.finish(); err != nil {
		return nil, err
	}
	bw.res.Bytes = cw.n
	return bw.res, nil
}

// bounds resolves the selection's range [from, to) in a log of size
// entries, and checks it and the old size against it.
func (s ExportSelection) bounds(size uint64) (from, to uint64, err error) {
	from, to = 0, size
	if s.From != nil {
		from = *s.From
	}
	if s.To != nil {
		to = *s.To
	}
	switch {
	case size == 0:
		return 0, 0, fmt.Errorf("%w: the latest checkpoint has no entries", errclass.NotFound)
	case from >= to:
		return 0, 0, fmt.Errorf("%w: from %d is not below to %d", errclass.Invalid, from, to)
	case to > size:
		return 0, 0, fmt.Errorf("%w: to %d is beyond the latest checkpoint's %d entries", errclass.Invalid, to, size)
	case s.OldSize > size:
		return 0, 0, fmt.Errorf("%w: old size %d is larger than the latest checkpoint's %d", errclass.Invalid, s.OldSize, size)
	}
	return from, to, nil
}

// validate checks the selection's filters: each names a well-formed value.
func (s ExportSelection) validate() error {
	switch {
	case !s.Since.IsZero() && !s.Until.IsZero() && !s.Since.Before(s.Until):
		return fmt.Errorf("%w: since is not before until", errclass.Invalid)
	case s.Actor != "" && !event.ValidActorID(s.Actor):
		return fmt.Errorf("%w: actor %q is not an actor id", errclass.Invalid, s.Actor)
	case s.Session != "" && !delta.ValidIdentifier(s.Session):
		return fmt.Errorf("%w: session %q is not a session id", errclass.Invalid, s.Session)
	case s.Kind != "" && (len(s.Kind) > 64 || !kindPattern.MatchString(s.Kind)):
		return fmt.Errorf("%w: kind %q is not an event kind", errclass.Invalid, s.Kind)
	}
	return nil
}

// disclosed is the selection as a filtered bundle's header states it.
func (s ExportSelection) disclosed() bundle.Selection {
	d := bundle.Selection{Actor: s.Actor, Kind: s.Kind, Session: s.Session, From: s.From, To: s.To}
	if !s.Since.IsZero() {
		d.Since = event.FormatTime(s.Since)
	}
	if !s.Until.IsZero() {
		d.Until = event.FormatTime(s.Until)
	}
	return d
}

// isKeyEvent reports whether entry registers, rotates or revokes a
// signing key: an actor.key, or an actor.created with a signing_key.
func isKeyEvent(entry []byte) bool {
	if !bytes.Contains(entry, []byte(`"actor.key"`)) && !bytes.Contains(entry, []byte(`"signing_key":`)) {
		return false
	}
	var e struct {
		Kind    string `json:"kind"`
		Subject *struct {
			SigningKey string `json:"signing_key"`
		} `json:"subject"`
	}
	if json.Unmarshal(entry, &e) != nil {
		return false
	}
	return e.Kind == string(event.KindActorKey) || (e.Kind == string(event.KindActorCreated) && e.Subject != nil && e.Subject.SigningKey != "")
}

// matches reads the members of an entry that a selection looks at.
func matches(entry []byte, sel ExportSelection) bool {
	var e struct {
		Time    string `json:"time"`
		Kind    string `json:"kind"`
		Actor   string `json:"actor"`
		Session string `json:"session"`
	}
	if json.Unmarshal(entry, &e) != nil {
		return false
	}
	if sel.Actor != "" && e.Actor != sel.Actor || sel.Session != "" && e.Session != sel.Session || sel.Kind != "" && e.Kind != sel.Kind {
		return false
	}
	if !sel.Since.IsZero() || !sel.Until.IsZero() {
		t, err := time.Parse(time.RFC3339Nano, e.Time)
		if err != nil || !sel.Since.IsZero() && t.Before(sel.Since) || !sel.Until.IsZero() && !t.Before(sel.Until) {
			return false
		}
	}
	return true
}

func canonicalLine(v any) ([]byte, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	c, err := jcs.Transform(raw)
	if err != nil {
		return nil, err
	}
	return append(c, '\n'), nil
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// bundleWriter writes the lines of one bundle: the header, the events the
// selection holds, the key events a filtered bundle carries besides them,
// and the trailer.
type bundleWriter struct {
	x       *exporter
	sel     ExportSelection
	from    uint64 // the selection's first index
	opening func(entry []byte, res *ExportResult) *bundle.Opening
	header  []byte
	out     *bufio.Writer
	res     *ExportResult
	// pending are the key event lines found before the first selected
	// event: nothing is written until one is found, so that a selection of
	// no event writes nothing.
	pending [][]byte
	line    []byte // the last event line, its buffer reused
}

// add writes entry index as an event line if the selection holds it, or
// as a key event line if a filtered bundle needs it to check signatures.
func (bw *bundleWriter) add(index uint64, entry []byte) error {
	switch {
	case !bw.sel.Filtered() || index >= bw.from && matches(entry, bw.sel):
		return bw.writeEvent(index, entry)
	case isKeyEvent(entry):
		return bw.writeKeyEvent(index, entry)
	}
	return nil
}

func (bw *bundleWriter) writeKeyEvent(index uint64, entry []byte) error {
	hashes, err := bw.x.inclusionProof(index)
	if err != nil {
		return err
	}
	keyLine := bundle.AppendKeyEventLine(nil, index, entry, hashes)
	bw.res.KeyEvents++
	if bw.res.Events == 0 {
		bw.pending = append(bw.pending, keyLine)
		return nil
	}
	_, err = bw.out.Write(keyLine)
	return err
}

func (bw *bundleWriter) writeEvent(index uint64, entry []byte) error {
	if bw.res.Events == 0 {
		if err := bw.writeHead(); err != nil {
			return err
		}
	}
	var opened *bundle.Opening
	if !bw.sel.WithholdSealed {
		opened = bw.opening(entry, bw.res)
	} else if sealstore.SealedOf(entry) != nil {
		bw.res.Erased++
	}
	if bw.sel.Filtered() {
		hashes, err := bw.x.inclusionProof(index)
		if err != nil {
			return err
		}
		bw.line = bundle.AppendInclusionLine(bw.line[:0], index, entry, opened, hashes)
	} else {
		bw.line = bundle.AppendRangeLine(bw.line[:0], index, entry, opened)
	}
	if _, err := bw.out.Write(bw.line); err != nil {
		return err
	}
	bw.res.Events++
	return nil
}

// writeHead writes the header and the key event lines that waited for the
// first selected event.
func (bw *bundleWriter) writeHead() error {
	if _, err := bw.out.Write(bw.header); err != nil {
		return err
	}
	for _, l := range bw.pending {
		if _, err := bw.out.Write(l); err != nil {
			return err
		}
	}
	bw.pending = nil
	return nil
}

// finish writes the trailer, which counts every line between it and the
// header, and flushes the bundle.
func (bw *bundleWriter) finish() error {
	trailer, err := canonicalLine(bundle.Trailer{End: bundle.Format, Events: bw.res.Events + bw.res.KeyEvents})
	if err != nil {
		return err
	}
	if _, err := bw.out.Write(trailer); err != nil {
		return err
	}
	return bw.out.Flush()
}

// exporter reads one checkpoint's tree for Export.
type exporter struct {
	log   *logstore.Log
	ctx   context.Context
	cp    *checkpoints.SignedCheckpoint
	tiles map[[2]uint64][][][]byte // a tile's levels, bottom row first
}

// header is the bundle's first line: the checkpoint, the selection, and
// the proofs that do not depend on the events (a range bundle's compact
// ranges on either side, the consistency from an old size).
func (x *exporter) header(sel ExportSelection, from, to uint64) ([]byte, error) {
	h := bundle.Header{Bundle: bundle.Format, Checkpoint: string(x.cp.Raw)}
	var err error
	if sel.Filtered() {
		h.Proof = bundle.ProofInclusion
		h.Selection = sel.disclosed()
	} else {
		h.Proof = bundle.ProofRange
		h.Selection = bundle.Selection{From: &from, To: &to}
		if h.Left, err = x.rangeHashes(0, from); err != nil {
			return nil, err
		}
		if h.Right, err = x.rangeHashes(to, x.cp.Size); err != nil {
			return nil, err
		}
	}
	if sel.OldSize > 0 {
		if h.Consistency, err = x.consistency(sel.OldSize); err != nil {
			return nil, err
		}
	}
	return canonicalLine(h)
}

// entries yields the entries of [from, to) in order, one entry bundle in
// memory at a time. A read error ends the loop and is left in *errp.
func (x *exporter) entries(from, to uint64, errp *error) func(func(uint64, []byte) bool) {
	return func(yield func(uint64, []byte) bool) {
		for b := from / layout.EntryBundleWidth; b*layout.EntryBundleWidth < to; b++ {
			if err := x.ctx.Err(); err != nil {
				*errp = err
				return
			}
			eb, err := x.readBundle(b)
			if err != nil {
				*errp = err
				return
			}
			first := b * layout.EntryBundleWidth
			for i := max(from, first); i < min(to, first+layout.EntryBundleWidth); i++ {
				if !yield(i, eb.Entries[i-first]) {
					return
				}
			}
		}
	}
}

// readBundle reads entry bundle b as of the checkpoint's size. Tessera may
// have replaced a partial bundle by a wider one since: entries never change,
// so the wider one serves.
func (x *exporter) readBundle(b uint64) (*api.EntryBundle, error) {
	l := x.log
	p := layout.PartialTileSize(0, b, x.cp.Size)
	raw, err := l.Reader.ReadEntryBundle(x.ctx, b, p)
	if errors.Is(err, os.ErrNotExist) && p != 0 {
		size, serr := l.Reader.IntegratedSize(x.ctx)
		if serr != nil {
			return nil, serr
		}
		raw, err = l.Reader.ReadEntryBundle(x.ctx, b, layout.PartialTileSize(0, b, size))
	}
	if err != nil {
		return nil, fmt.Errorf("entry bundle %d: %w", b, err)
	}
	var eb api.EntryBundle
	if err := eb.UnmarshalText(raw); err != nil {
		return nil, fmt.Errorf("entry bundle %d: %w", b, err)
	}
	want := uint64(layout.EntryBundleWidth)
	if p != 0 {
		want = uint64(p)
	}
	if uint64(len(eb.Entries)) < want {
		return nil, fmt.Errorf("entry bundle %d has %d entries, want %d", b, len(eb.Entries), want)
	}
	return &eb, nil
}

// rangeHashes returns the compact range of [begin, end) in the checkpoint's
// tree, base64, left to right.
func (x *exporter) rangeHashes(begin, end uint64) ([]string, error) {
	var out []string
	for _, id := range compact.RangeNodes(begin, end, nil) {
		h, err := x.nodeHash(id)
		if err != nil {
			return nil, fmt.Errorf("node %d/%d of the compact range [%d, %d): %w", id.Level, id.Index, begin, end, err)
		}
		out = append(out, base64.StdEncoding.EncodeToString(h))
	}
	return out, nil
}

// nodeHash is the hash of a perfect subtree of the checkpoint's tree, from
// the tile that holds its bottom row. Each tile read is hashed up once, all
// its levels kept, so that the proofs of nearby entries cost no hashing.
func (x *exporter) nodeHash(id compact.NodeID) ([]byte, error) {
	tileLevel, tileIndex, nodeLevel, nodeIndex := layout.NodeCoordsToTileAddress(uint64(id.Level), id.Index)
	key := [2]uint64{tileLevel, tileIndex}
	levels, ok := x.tiles[key]
	if !ok {
		raw, err := x.log.ReadTile(x.ctx, tileLevel, tileIndex, layout.PartialTileSize(tileLevel, tileIndex, x.cp.Size))
		if err != nil {
			return nil, err
		}
		var tile api.HashTile
		if err := tile.UnmarshalText(raw); err != nil {
			return nil, err
		}
		levels = [][][]byte{tile.Nodes}
		for below := tile.Nodes; len(below) > 1; {
			up := make([][]byte, len(below)/2)
			for i := range up {
				up[i] = rfc6962.DefaultHasher.HashChildren(below[2*i], below[2*i+1])
			}
			levels, below = append(levels, up), up
		}
		if len(x.tiles) >= maxCachedTiles {
			clear(x.tiles)
		}
		x.tiles[key] = levels
	}
	if nodeLevel >= uint(len(levels)) || nodeIndex >= uint64(len(levels[nodeLevel])) {
		return nil, fmt.Errorf("tile %d/%d holds no node %d at level %d", tileLevel, tileIndex, nodeIndex, nodeLevel)
	}
	return levels[nodeLevel][nodeIndex], nil
}

// consistency proves the tree of old entries a prefix of the checkpoint's.
func (x *exporter) consistency(old uint64) (*bundle.Consistency, error) {
	f := &compact.RangeFactory{Hash: rfc6962.DefaultHasher.HashChildren}
	var hashes [][]byte
	for _, id := range compact.RangeNodes(0, old, nil) {
		h, err := x.nodeHash(id)
		if err != nil {
			return nil, fmt.Errorf("old root: %w", err)
		}
		hashes = append(hashes, h)
	}
	r, err := f.NewRange(0, old, hashes)
	if err != nil {
		return nil, err
	}
	root, err := r.GetRootHash(nil)
	if err != nil {
		return nil, err
	}
	c := &bundle.Consistency{OldSize: old, OldRoot: base64.StdEncoding.EncodeToString(root)}
	if old < x.cp.Size {
		proof, err := x.log.ConsistencyProof(x.ctx, old, x.cp.Size)
		if err != nil {
			return nil, fmt.Errorf("consistency proof from %d to %d: %w", old, x.cp.Size, err)
		}
		for _, h := range proof {
			c.Proof = append(c.Proof, base64.StdEncoding.EncodeToString(h[:]))
		}
	}
	return c, nil
}

// inclusionProof of index in the checkpoint's tree (RFC 6962), from tiles.
func (x *exporter) inclusionProof(index uint64) ([][sha256.Size]byte, error) {
	nodes, err := proof.Inclusion(index, x.cp.Size)
	if err != nil {
		return nil, err
	}
	hashes := make([][]byte, len(nodes.IDs))
	for i, id := range nodes.IDs {
		if hashes[i], err = x.nodeHash(id); err != nil {
			return nil, fmt.Errorf("inclusion proof of %d in %d: node %d/%d: %w", index, x.cp.Size, id.Level, id.Index, err)
		}
	}
	if hashes, err = nodes.Rehash(hashes, rfc6962.DefaultHasher.HashChildren); err != nil {
		return nil, err
	}
	return logstore.ToHashes(hashes)
}
