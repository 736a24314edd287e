// Package bundle declares the audit bundle format, annal.dev/audit-bundle/v1:
// its name, its lines' members, the proof kinds and the line limit. The
// exact byte layout, and what a reader MUST refuse, are in
// testvectors/FORMATS.md ("Audit bundles"); bundles.json beside it holds the
// known answers.
//
// Its contract:
//
//   - It is the one declaration of the format, shared by the writer
//     (kernel.Kernel.Export, served as GET /v1/bundle and written by
//     `annal export`) and the reader (verifier.VerifyBundle, `annal-verify
//     bundle`), as Tessera's api package is shared by its storage and its
//     client. A change here is a change of the format: it MUST come with a
//     new Format name or with vectors that still pass unchanged.
//   - It declares; it does not check. A reader MUST parse a bundle strictly
//     with its own code (the verifier decodes each line into these types and
//     refuses any line that is not their canonical encoding); nothing here
//     validates a value.
//   - It imports only the standard library, so the offline verifier may
//     import it without depending on any of the code it verifies (a test in
//     verifier/ enforces it).
//
// A bundle is a sequence of LF-terminated lines, each the RFC 8785 canonical
// JSON of one object and at most MaxLineSize bytes before its LF: the
// Header, one event line per event in increasing index order (written by
// AppendRangeLine or AppendInclusionLine), and the Trailer.
package bundle

import (
	"crypto/sha256"
	"encoding/base64"
	"strconv"
)

// Format names version 1 of the audit bundle. It is the value of the
// header's "bundle" member and of the trailer's "end" member.
const Format = "annal.dev/audit-bundle/v1"

// The proof kinds of a bundle: the value of the header's "proof" member.
const (
	// ProofRange: the events are every entry of the index range
	// [selection.from, selection.to), proven together by the compact ranges
	// of [0, from) (Header.Left) and [to, size) (Header.Right). The
	// selection holds exactly from and to.
	ProofRange = "range"
	// ProofInclusion: the events are entries in increasing index order that
	// match the selection, each with its own RFC 6962 inclusion proof on its
	// line (selective disclosure: the other entries are not in the bundle).
	ProofInclusion = "inclusion"
)

// MaxLineSize bounds every line of a bundle, its LF excluded: an event line
// holds at most the base64 of a 65,535-byte entry and 64 proof hashes; the
// header a checkpoint of at most 16 KiB and three lists of at most 64
// hashes.
const MaxLineSize = 128 << 10

// Header is the first line of a bundle. Its fields are declared in RFC 8785
// member order; the line is the canonical encoding of this struct.
type Header struct {
	// Bundle is Format.
	Bundle string `json:"bundle"`
	// Checkpoint is the signed checkpoint note, verbatim, with the
	// witnesses' cosignature lines.
	Checkpoint string `json:"checkpoint"`
	// Consistency, if present, proves that an older tree is a prefix of
	// the checkpoint's.
	Consistency *Consistency `json:"consistency,omitempty"`
	// Left and Right, for a ProofRange bundle: the compact ranges of
	// [0, from) and [to, size), base64 hashes, left to right; absent when
	// empty.
	Left []string `json:"left,omitempty"`
	// Proof is ProofRange or ProofInclusion.
	Proof     string    `json:"proof"`
	Right     []string  `json:"right,omitempty"`
	Selection Selection `json:"selection"`
}

// Consistency proves that the tree of OldSize (at least 1) entries with root
// OldRoot (base64) is a prefix of the checkpoint's tree: Proof is the RFC
// 6962 consistency proof, base64 hashes, absent when empty.
type Consistency struct {
	OldRoot string   `json:"old_root"`
	OldSize uint64   `json:"old_size"`
	Proof   []string `json:"proof,omitempty"`
}

// Selection says which events a bundle holds. Every event MUST match every
// member present: From <= index < To, equal Actor, Session and Kind, and
// Since <= time < Until (times written as in events: RFC 3339 in UTC).
type Selection struct {
	Actor   string  `json:"actor,omitempty"`
	From    *uint64 `json:"from,omitempty"`
	Kind    string  `json:"kind,omitempty"`
	Session string  `json:"session,omitempty"`
	Since   string  `json:"since,omitempty"`
	To      *uint64 `json:"to,omitempty"`
	Until   string  `json:"until,omitempty"`
}

// Trailer is the last line of a bundle: End is Format and Events the number
// of event lines, at least 1. Nothing follows it.
type Trailer struct {
	End    string `json:"end"`
	Events uint64 `json:"events"`
}

// Event lines have exactly one layout, the RFC 8785 encoding of
// {"entry": <base64>, "index": <decimal>[, "key_event": true][, "opened":
// {"payload": <base64>, "salt": <base64>}][, "proof": [<base64>, ...]]}:
// EventLinePrefix, the entry's base64, EventLineIndex, the index in
// decimal, for a key event of a ProofInclusion bundle EventLineKeyEvent,
// for an event whose
// sealed payload the bundle opens EventLineOpened, the payload's base64,
// EventLineSalt, the salt's base64 and EventLineOpenedEnd, for a
// ProofInclusion bundle EventLineProof, the quoted base64 hashes separated
// by commas and "]", and then "}".
const (
	EventLinePrefix    = `{"entry":"`
	EventLineIndex     = `","index":`
	EventLineKeyEvent  = `,"key_event":true`
	EventLineOpened    = `,"opened":{"payload":"`
	EventLineSalt      = `","salt":"`
	EventLineOpenedEnd = `"}`
	EventLineProof     = `,"proof":[`
)

// Opening is a sealed payload a bundle opens: the payload's RFC 8785 bytes
// and the salt of its commitment (testvectors/FORMATS.md, "Sealed
// payloads"). A reader MUST check that they open the commitment of the
// event on the same line.
type Opening struct {
	Payload []byte
	Salt    []byte
}

// TrailerPrefix starts the trailer line and no other line of a bundle.
const TrailerPrefix = `{"end":`

// AppendRangeLine appends the event line of a ProofRange bundle for the
// entry at index, LF included.
func AppendRangeLine(dst []byte, index uint64, entry []byte, opened *Opening) []byte {
	dst = appendEntry(dst, index, entry, opened)
	return append(dst, '}', '\n')
}

// AppendInclusionLine appends the event line of a ProofInclusion bundle for
// the entry at index with its RFC 6962 audit path, leaf's sibling first, LF
// included.
func AppendInclusionLine(dst []byte, index uint64, entry []byte, opened *Opening, proof [][sha256.Size]byte) []byte {
	dst = appendEntry(dst, index, entry, opened)
	return appendProof(dst, proof)
}

func appendProof(dst []byte, proof [][sha256.Size]byte) []byte {
	dst = append(dst, EventLineProof...)
	for i, h := range proof {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, '"')
		dst = base64.StdEncoding.AppendEncode(dst, h[:])
		dst = append(dst, '"')
	}
	return append(dst, ']', '}', '\n')
}

// AppendKeyEventLine appends the line of a key event in a ProofInclusion
// bundle: an entry that registers, rotates or revokes a signing key
// (actor.created with a signing_key, actor.key), carried whether or not it
// matches the selection so that the signatures of the selected events can
// be checked against the keys the log registered (testvectors/FORMATS.md,
// "Audit bundles"). It is not one of the selected events.
func AppendKeyEventLine(dst []byte, index uint64, entry []byte, proof [][sha256.Size]byte) []byte {
	dst = appendEntry(dst, index, entry, nil)
	dst = append(dst, EventLineKeyEvent...)
	return appendProof(dst, proof)
}

func appendEntry(dst []byte, index uint64, entry []byte, opened *Opening) []byte {
	dst = append(dst, EventLinePrefix...)
	dst = base64.StdEncoding.AppendEncode(dst, entry)
	dst = append(dst, EventLineIndex...)
	dst = strconv.AppendUint(dst, index, 10)
	if opened != nil {
		dst = append(dst, EventLineOpened...)
		dst = base64.StdEncoding.AppendEncode(dst, opened.Payload)
		dst = append(dst, EventLineSalt...)
		dst = base64.StdEncoding.AppendEncode(dst, opened.Salt)
		dst = append(dst, EventLineOpenedEnd...)
	}
	return dst
}
