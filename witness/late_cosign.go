package witness

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"sync"

	"golang.org/x/mod/sumdb/note"

	"github.com/annal-dev/annal/checkpoints"
)

// Late cosignatures: the ML-DSA-44 line of a cosignature is made while the
// checkpoint is being committed, not before, and is not part of the stored
// record.
//
// Why: with one client, a request waits in turn for its ML-DSA-44
// signature (~0.1–0.15 ms, randomized, a varying number of rounds) and
// for the commit (two fdatasyncs, ~0.3 ms, the processor idle). Run side
// by side on two cores, the signature costs no wait. It cannot go into the
// record, which is written before it is made; it need not: what makes a
// cosignature safe is that the checkpoint is durably recorded before any
// cosignature of it is returned, and that still holds (the answer waits
// for the commit and for the signature). The record keeps the checkpoint,
// the log's signatures and the Ed25519 cosignature; the monitoring
// endpoint adds the ML-DSA-44 line: the one answered, kept in memory, or,
// after a restart, one made then (the witness may cosign the checkpoint it
// recorded at any time) and kept likewise, so that a reader cannot make it
// sign more than once per checkpoint.

// splitSigners divides the cosigner's signers: recorded sign the note
// stored (Ed25519, ~15 µs); late, the ML-DSA-44 one if any, are made
// beside the commit.
func (c *Cosigner) splitSigners() (recorded, late []note.Signer) {
	if c.mldsa == nil {
		return []note.Signer{c.signer}, nil
	}
	return []note.Signer{c.signer}, []note.Signer{c.mldsa}
}

// lateStart is where and when a request's late lines are made: on a
// goroutine of their own (done), from before the log's signature is
// checked when the request is alone, else once it is (checked); or, with
// overlap, by the request's goroutine while its journal write is under way
// (Witness.commitAddition).
type lateStart struct {
	late    []note.Signer
	text    string                  // the request's note text
	cp      *checkpoints.Checkpoint // parsed from text
	overlap bool
	done    <-chan lateResult
}

// startLate decides for req, alone or not, and starts the late lines if
// they are made early.
func (w *Witness) startLate(req *AddCheckpointRequest, late []note.Signer, alone bool) *lateStart {
	s := &lateStart{late: late, text: noteText(req.SignedCheckpoint), cp: &req.Checkpoint}
	if len(late) == 0 {
		return s
	}
	s.overlap = alone && w.store.overlapsWrites.Load()
	if alone && !s.overlap {
		s.done = signLate(s.text, s.cp, late)
	}
	return s
}

// checked starts the late lines, once the log's signature is checked, if
// they were not started early on the text that verified.
func (s *lateStart) checked(opened *note.Note) {
	if len(s.late) > 0 && !s.overlap && (s.done == nil || opened.Text != s.text) {
		s.done = signLate(opened.Text, s.checkpoint(opened), s.late)
	}
}

// checkpoint is the parsed checkpoint of the verified note, if known: the
// request's, if the note is the request's text, and nil otherwise.
func (s *lateStart) checkpoint(opened *note.Note) *checkpoints.Checkpoint {
	if opened.Text != s.text {
		return nil
	}
	return s.cp
}

// lateResult is the outcome of signing a note's text with the late signers:
// their signature lines, in order.
type lateResult struct {
	lines []byte
	err   error
}

// signLate signs text with signers on a goroutine of its own. cp, if not
// nil, is the checkpoint text holds (as ParseSignedCheckpoint parsed it).
// The channel is buffered: a request refused or failed in the meantime
// does not read it, and the goroutine ends all the same.
func signLate(text string, cp *checkpoints.Checkpoint, signers []note.Signer) <-chan lateResult {
	out := make(chan lateResult, 1)
	go func() {
		lines, err := checkpointSignatureLines(text, cp, signers)
		out <- lateResult{lines, err}
	}()
	return out
}

// checkpointSignatureLines is signatureLines on the text of the checkpoint
// cp (nil if not known): a lone ML-DSA-44 signer's line is made from cp
// directly (mldsaSigner.line), the same line note.Sign would make.
func checkpointSignatureLines(text string, cp *checkpoints.Checkpoint, signers []note.Signer) ([]byte, error) {
	if s, ok := signers[0].(*mldsaSigner); ok && len(signers) == 1 && cp != nil {
		return s.line(cp.Origin, cp.Size, cp.Hash[:])
	}
	return signatureLines(text, signers)
}

// noteText is the text of a well-formed signed note (ParseSignedCheckpoint
// accepted it): up to and including the newline before the blank line
// that precedes its signatures, as note.Open splits it.
func noteText(signed []byte) string {
	return string(signed[:bytes.LastIndex(signed, []byte("\n\n"))+1])
}

// lateLinesSize is the size of the lines signers will make, as far as it
// is known ahead (an ML-DSA-44 line's is), so that the answer they are
// appended to has room for them.
func lateLinesSize(signers []note.Signer) int {
	n := 0
	for _, s := range signers {
		if m, ok := s.(*mldsaSigner); ok {
			n += m.lineSize()
		}
	}
	return n
}

// signatureLines are the signature lines signers make on a note's text.
func signatureLines(text string, signers []note.Signer) ([]byte, error) {
	signed, err := note.Sign(&note.Note{Text: text}, signers...)
	if err != nil {
		return nil, fmt.Errorf("cosign: %w", err)
	}
	return lastLines(signed, len(signers)), nil
}

// lateLines keeps, per log, the late signature lines of its latest
// cosigned checkpoint, for the monitoring endpoint.
type lateLines struct {
	mu   sync.Mutex
	byID map[[sha256.Size]byte]lateEntry
}

// lateEntry is the late lines of one checkpoint, known by its size and
// root.
type lateEntry struct {
	size  uint64
	root  []byte
	lines []byte
}

// put keeps lines for the checkpoint (origin, size, root), unless lines of
// a larger checkpoint of the log are kept already.
func (l *lateLines) put(id [sha256.Size]byte, size uint64, root, lines []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e, ok := l.byID[id]; ok && e.size > size {
		return
	}
	if l.byID == nil || len(l.byID) >= maxCachedLogs {
		l.byID = map[[sha256.Size]byte]lateEntry{}
	}
	l.byID[id] = lateEntry{size: size, root: bytes.Clone(root), lines: lines}
}

// get returns the lines kept for the checkpoint (size, root) of the log,
// or nil.
func (l *lateLines) get(id [sha256.Size]byte, size uint64, root []byte) []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e, ok := l.byID[id]; ok && e.size == size && bytes.Equal(e.root, root) {
		return e.lines
	}
	return nil
}

// servedNote is the note the monitoring endpoint serves for a stored
// checkpoint: the stored note, with the late signers' lines added where it
// lacks them (records written before late cosignatures have them all).
func (w *Witness) servedNote(id [sha256.Size]byte, cp *CosignedCheckpoint) ([]byte, error) {
	_, late := w.cosigner.splitSigners()
	if len(late) == 0 {
		return cp.Note, nil
	}
	counts := signatureCounts(cp.Note)
	missing := late[:0:0]
	for _, s := range late {
		if counts[signatureKey{s.Name(), s.KeyHash()}] == 0 {
			missing = append(missing, s)
		}
	}
	if len(missing) == 0 {
		return cp.Note, nil
	}
	lines := w.late.get(id, cp.Size, cp.Root)
	if lines == nil {
		split := bytes.LastIndex(cp.Note, []byte("\n\n"))
		if split < 0 {
			return nil, fmt.Errorf("stored note of log ID %x has no signatures", id)
		}
		var err error
		if lines, err = signatureLines(string(cp.Note[:split+1]), missing); err != nil {
			return nil, err
		}
		w.late.put(id, cp.Size, cp.Root, lines)
	}
	return append(bytes.Clone(cp.Note), lines...), nil
}
