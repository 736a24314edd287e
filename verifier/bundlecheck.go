package verifier

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/annal-dev/annal/checkpoints"
	"github.com/annal-dev/annal/format/bundle"
	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
)

// BundleOptions tune VerifyBundle; the zero value is ready to use.
type BundleOptions struct {
	// OldCheckpoint, if set, is a signed checkpoint of the same log that the
	// auditor already holds: the bundle MUST carry a consistency proof from
	// its size, and the proof's old root MUST be its root.
	OldCheckpoint []byte
	// Workers is how many goroutines parse and hash events (default
	// GOMAXPROCS).
	Workers int
	// Progress, if set, is called with the number of events verified so
	// far, from the calling goroutine, about every 64K events.
	Progress func(events uint64)
}

// BundleResult is what a verified bundle establishes: every event in it is
// the entry at its index in the log Origin of Size entries, whose
// checkpoint the log key signed and the policy's quorum cosigned.
type BundleResult struct {
	Origin     string
	Size       uint64
	RootHash   [sha256.Size]byte
	LogKey     string
	Cosigners  []string
	Checkpoint *checkpoints.SignedCheckpoint
	Proof      string // bundle.ProofRange or bundle.ProofInclusion
	Selection  bundle.Selection
	Events     uint64
	// FirstIndex and LastIndex of the events; FirstTime and LastTime, the
	// earliest and latest event times.
	FirstIndex, LastIndex uint64
	FirstTime, LastTime   time.Time
	ByActor               map[string]uint64
	ByKind                map[string]uint64
	ByActionType          map[string]uint64
	// Sessions are the delta chains in the bundle, in order of first delta.
	Sessions []SessionChain
	// Signatures counts, per actor, its action events signed, unsigned and
	// unverifiable (Signatures); every signature present was checked.
	Signatures map[string]*Signatures
	// KeyEvents counts the key_event lines of an inclusion bundle: key
	// registrations carried, proven, to check signatures by; they are not
	// among the Events the selection chose.
	KeyEvents uint64
	// Sealed counts the sealed payloads: opened by the bundle and checked
	// against their commitments, or closed (only the commitment).
	Sealed Sealed
	// OldSize and OldRoot, when the bundle proves consistency with an older
	// tree.
	OldSize uint64
	OldRoot [sha256.Size]byte
}

var hasher = rfc6962.DefaultHasher

// VerifyBundle reads an audit bundle (testvectors/FORMATS.md, "Audit
// bundles") from r and checks it under the policy: the header, the
// checkpoint's log signature and cosignature quorum, the consistency proof
// if any, every event line (layout, index order, the event's encoding, its
// match with the selection), every event's inclusion (one compact-range
// proof for a range bundle, one inclusion proof per event otherwise), the
// delta chains of every session, and the trailer. It reads r once, holding
// a bounded number of lines at a time, hashes on opts.Workers goroutines,
// and returns the first failure as a *Error naming the line and the check.
func VerifyBundle(r io.Reader, p *Policy, opts *BundleOptions) (*BundleResult, error) {
	if opts == nil {
		opts = &BundleOptions{}
	}
	v := &bundleVerifier{p: p, opts: opts, in: bufio.NewReaderSize(r, bundle.MaxLineSize+1)}
	return v.run()
}

type bundleVerifier struct {
	p    *Policy
	opts *BundleOptions
	in   *bufio.Reader
	line int // lines read so far

	h       bundle.Header
	sel     selection // h.Selection, its times parsed
	res     *BundleResult
	factory *compact.RangeFactory
	rng     *compact.Range
	right   *compact.Range
	next    uint64 // the smallest index the next event may have
	// lineAfter is the smallest index the next line may have, key event
	// lines included (they may come before the selection's from).
	lineAfter uint64
	chains    chains
	withProof bool
	sigs      *signatureState
}

// readLine returns the next line without its LF, or io.EOF at the end.
func (v *bundleVerifier) readLine() ([]byte, error) {
	line, err := v.in.ReadSlice('\n')
	switch {
	case err == nil:
		v.line++
		return line[:len(line)-1], nil
	case errors.Is(err, bufio.ErrBufferFull):
		return nil, fail(CheckBundle, "line %d is longer than %d bytes", v.line+1, bundle.MaxLineSize)
	case errors.Is(err, io.EOF) && len(line) == 0:
		return nil, io.EOF
	case errors.Is(err, io.EOF):
		return nil, fail(CheckBundle, "line %d does not end with a newline: the bundle is truncated", v.line+1)
	}
	return nil, fail(CheckBundle, "reading line %d: %v", v.line+1, err)
}

func (v *bundleVerifier) run() (*BundleResult, error) {
	line, err := v.readLine()
	if errors.Is(err, io.EOF) {
		return nil, fail(CheckBundle, "the bundle is empty")
	} else if err != nil {
		return nil, err
	}
	if err := v.header(line); err != nil {
		return nil, err
	}
	if err := v.events(); err != nil {
		return nil, err
	}
	return v.finish()
}

// header parses and checks line 1 and opens the checkpoint.
func (v *bundleVerifier) header(line []byte) error {
	if err := parseJSONLine(line, &v.h); err != nil {
		return fail(CheckBundle, "line 1 (header): %v", err)
	}
	h := &v.h
	if h.Bundle != bundle.Format {
		return fail(CheckBundle, "line 1: bundle format %q is not %q", abbreviate(h.Bundle), bundle.Format)
	}
	v.sel = selection{Selection: h.Selection}
	if err := v.sel.check(); err != nil {
		return fail(CheckBundle, "line 1: %v", err)
	}
	pr, err := v.p.OpenCheckpoint([]byte(h.Checkpoint))
	if err != nil {
		return err
	}
	cp := pr.Checkpoint
	v.res = &BundleResult{
		Origin: cp.Origin, Size: cp.Size, RootHash: cp.Hash, LogKey: pr.LogKey, Cosigners: pr.Cosigners,
		Checkpoint: cp, Proof: h.Proof, Selection: h.Selection,
		ByActor: map[string]uint64{}, ByKind: map[string]uint64{}, ByActionType: map[string]uint64{},
	}
	if cp.Size == 0 {
		return fail(CheckIndex, "the checkpoint has no entries")
	}
	switch h.Proof {
	case bundle.ProofRange:
		err = v.rangeProof(cp)
	case bundle.ProofInclusion:
		err = v.inclusionProof()
	default:
		err = fail(CheckBundle, "line 1: proof %q is neither %q nor %q", abbreviate(h.Proof), bundle.ProofRange, bundle.ProofInclusion)
	}
	if err != nil {
		return err
	}
	// A range bundle from entry 0 holds every key registration before any
	// signature it checks; any other may leave some out.
	v.sigs = newSignatureState(cp.Origin, h.Proof == bundle.ProofRange && v.next == 0)
	return v.consistency(cp)
}

// rangeProof prepares a range bundle: its selection is exactly from and
// to, inside the tree, and its left and right hashes are the compact
// ranges of [0, from) and [to, size).
func (v *bundleVerifier) rangeProof(cp *checkpoints.SignedCheckpoint) error {
	sel := &v.sel
	if sel.From == nil || sel.To == nil || sel.filtered() {
		return fail(CheckBundle, "line 1: a range bundle's selection is exactly from and to")
	}
	if *sel.To > cp.Size {
		return fail(CheckIndex, "range [%d, %d) is not inside the checkpoint's %d entries", *sel.From, *sel.To, cp.Size)
	}
	f := &compact.RangeFactory{Hash: hasher.HashChildren}
	v.factory = f
	left, err := parseHashList("left", v.h.Left)
	if err != nil {
		return fail(CheckBundle, "line 1: %v", err)
	}
	right, err := parseHashList("right", v.h.Right)
	if err != nil {
		return fail(CheckBundle, "line 1: %v", err)
	}
	if v.rng, err = f.NewRange(0, *sel.From, left); err != nil {
		return fail(CheckBundle, "line 1: left has %d hashes, the compact range of [0, %d) has %d", len(left), *sel.From, compact.RangeSize(0, *sel.From))
	}
	if v.right, err = f.NewRange(*sel.To, cp.Size, right); err != nil {
		return fail(CheckBundle, "line 1: right has %d hashes, the compact range of [%d, %d) has %d", len(right), *sel.To, cp.Size, compact.RangeSize(*sel.To, cp.Size))
	}
	v.next = *sel.From
	return nil
}

// inclusionProof prepares an inclusion bundle, whose lines carry their
// own proofs.
func (v *bundleVerifier) inclusionProof() error {
	if len(v.h.Left) > 0 || len(v.h.Right) > 0 {
		return fail(CheckBundle, "line 1: an inclusion bundle has no left or right hashes")
	}
	v.withProof = true
	if v.sel.From != nil {
		v.next = *v.sel.From
	}
	return nil
}

func (v *bundleVerifier) consistency(cp *checkpoints.SignedCheckpoint) error {
	c := v.h.Consistency
	if c == nil {
		if v.opts.OldCheckpoint != nil {
			return fail(CheckConsistency, "an old checkpoint was given but the bundle carries no consistency proof")
		}
		return nil
	}
	oldRoot, err := checkpoints.ParseHash(c.OldRoot)
	if err != nil {
		return fail(CheckBundle, "line 1: consistency old_root: %v", err)
	}
	hashes, err := parseHashList("consistency proof", c.Proof)
	if err != nil {
		return fail(CheckBundle, "line 1: %v", err)
	}
	switch {
	case c.OldSize == 0:
		return fail(CheckBundle, "line 1: consistency old_size is 0: there is nothing to prove")
	case c.OldSize > cp.Size:
		return fail(CheckConsistency, "old size %d is larger than the checkpoint's %d", c.OldSize, cp.Size)
	}
	if err := proof.VerifyConsistency(hasher, c.OldSize, cp.Size, hashes, oldRoot[:], cp.Hash[:]); err != nil {
		return fail(CheckConsistency, "the tree of %d entries with root %s is not a prefix of the checkpoint's: %v", c.OldSize, c.OldRoot, describe(err))
	}
	v.res.OldSize, v.res.OldRoot = c.OldSize, oldRoot
	if v.opts.OldCheckpoint != nil {
		logKey, _ := v.p.LogKey(cp.Origin)
		lv, err := LogVerifier(logKey)
		if err != nil {
			return err
		}
		old, err := checkpoints.OpenCheckpoint(v.opts.OldCheckpoint, lv)
		if err != nil {
			return wrap(CheckCheckpoint, fmt.Errorf("old checkpoint: %w", err))
		}
		if old.Size != c.OldSize || old.Hash != oldRoot {
			return fail(CheckConsistency, "the old checkpoint has size %d and root %s; the bundle proves consistency from size %d, root %s",
				old.Size, b64(old.Hash[:]), c.OldSize, c.OldRoot)
		}
	}
	return nil
}

func (v *bundleVerifier) trailer(line []byte) error {
	var t bundle.Trailer
	if err := parseJSONLine(line, &t); err != nil {
		return fail(CheckBundle, "line %d (trailer): %v", v.line, err)
	}
	if t.End != bundle.Format {
		return fail(CheckBundle, "line %d: trailer end %q is not %q", v.line, abbreviate(t.End), bundle.Format)
	}
	if t.Events != v.res.Events+v.res.KeyEvents {
		return fail(CheckBundle, "the trailer counts %d events, the bundle holds %d", t.Events, v.res.Events+v.res.KeyEvents)
	}
	return nil
}

// finish checks what needs every event: at least one, the range's root.
func (v *bundleVerifier) finish() (*BundleResult, error) {
	res := v.res
	if res.Events == 0 {
		return nil, fail(CheckBundle, "the bundle holds no event")
	}
	if v.rng != nil {
		if res.LastIndex+1 != *v.h.Selection.To {
			return nil, fail(CheckBundle, "the range bundle ends at index %d, its selection at %d", res.LastIndex, *v.h.Selection.To-1)
		}
		if err := v.rng.AppendRange(v.right, nil); err != nil {
			return nil, fail(CheckInclusion, "%v", err)
		}
		root, err := v.rng.GetRootHash(nil)
		if err != nil {
			return nil, fail(CheckInclusion, "%v", err)
		}
		if !bytes.Equal(root, res.RootHash[:]) {
			return nil, fail(CheckInclusion, "entries [%d, %d) with the left and right hashes lead to root %s, the checkpoint's root is %s",
				*v.h.Selection.From, *v.h.Selection.To, b64(root), b64(res.RootHash[:]))
		}
	}
	res.Sessions = v.chains.list()
	res.Signatures = v.sigs.byActor
	return res, nil
}
