package checkpoints

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// TLogProofHeader is the first line of every c2sp.org/tlog-proof.
const TLogProofHeader = "c2sp.org/tlog-proof@v1"

// MaxProofHashes is the longest inclusion proof a tree of 2^64 leaves needs.
const MaxProofHashes = 64

// MaxTLogProofSize bounds a whole tlog-proof: header, extra data, 64 hashes
// and a checkpoint of MaxCheckpointSize.
const MaxTLogProofSize = 128 << 10

// TLogProof is a c2sp.org/tlog-proof: an offline-checkable proof that the
// entry at Index is in the tree that Checkpoint (a signed note, kept
// verbatim) commits to.
//
//	c2sp.org/tlog-proof@v1\n
//	[extra <standard base64>\n]
//	index <decimal>\n
//	[<base64 hash>\n]...      (leaf's sibling first, RFC 6962 §2.1.1)
//	\n
//	<signed checkpoint note>
type TLogProof struct {
	// Extra is optional opaque data. It is not authenticated: a verifier
	// MUST NOT trust it.
	Extra      []byte
	Index      uint64
	Hashes     [][sha256.Size]byte
	Checkpoint []byte
}

// Marshal encodes the proof in its text form.
func (p TLogProof) Marshal() []byte {
	// One allocation of the exact size: a server marshals a proof per
	// request.
	size := len(TLogProofHeader) + 1 + len("index \n") + 20 + len(p.Hashes)*(base64.StdEncoding.EncodedLen(32)+1) + 1 + len(p.Checkpoint)
	if p.Extra != nil {
		size += len("extra \n") + base64.StdEncoding.EncodedLen(len(p.Extra))
	}
	b := make([]byte, 0, size)
	b = append(b, TLogProofHeader+"\n"...)
	if p.Extra != nil {
		b = append(b, "extra "...)
		b = base64.StdEncoding.AppendEncode(b, p.Extra)
		b = append(b, '\n')
	}
	b = append(b, "index "...)
	b = strconv.AppendUint(b, p.Index, 10)
	b = append(b, '\n')
	for _, h := range p.Hashes {
		b = base64.StdEncoding.AppendEncode(b, h[:])
		b = append(b, '\n')
	}
	b = append(b, '\n')
	return append(b, p.Checkpoint...)
}

// ParseTLogProof parses a tlog-proof strictly. It checks the layout only: the
// checkpoint's signature and the inclusion are the caller's to verify.
func ParseTLogProof(data []byte) (TLogProof, error) {
	var p TLogProof
	if len(data) > MaxTLogProofSize {
		return p, fmt.Errorf("tlog-proof is %d bytes, more than the limit of %d", len(data), MaxTLogProofSize)
	}
	r := proofLines{rest: data}
	l, ok := r.next()
	if !ok || l != TLogProofHeader {
		return p, fmt.Errorf("tlog-proof does not start with the line %q", TLogProofHeader)
	}
	if l, ok = r.next(); !ok {
		return p, errors.New("tlog-proof ends after its header")
	}
	var err error
	if p.Extra, l, err = r.extra(l); err != nil {
		return p, err
	}
	if p.Index, err = parseIndexLine(l); err != nil {
		return p, err
	}
	if p.Hashes, err = r.hashes(); err != nil {
		return p, err
	}
	if len(r.rest) == 0 {
		return p, errors.New("tlog-proof has no checkpoint")
	}
	p.Checkpoint = bytes.Clone(r.rest)
	return p, nil
}

// proofLines reads a tlog-proof line by line; rest is what follows the
// lines read so far.
type proofLines struct{ rest []byte }

// next returns the next line without its newline; false if no newline
// is left.
func (r *proofLines) next() (string, bool) {
	i := bytes.IndexByte(r.rest, '\n')
	if i < 0 {
		return "", false
	}
	l := string(r.rest[:i])
	r.rest = r.rest[i+1:]
	return l, true
}

// extra decodes l if it is the optional extra line, and returns the line
// that follows the extra data.
func (r *proofLines) extra(l string) ([]byte, string, error) {
	e, isExtra := strings.CutPrefix(l, "extra ")
	if !isExtra {
		return nil, l, nil
	}
	raw, err := decodeBase64(e)
	if err != nil {
		return nil, l, fmt.Errorf("tlog-proof extra data is not standard base64: %w", err)
	}
	next, ok := r.next()
	if !ok {
		return raw, "", errors.New("tlog-proof ends after its extra line")
	}
	return raw, next, nil
}

func parseIndexLine(l string) (uint64, error) {
	idx, isIndex := strings.CutPrefix(l, "index ")
	if !isIndex {
		return 0, fmt.Errorf("tlog-proof line %q is not \"index <n>\"", abbreviate(l))
	}
	n, err := ParseDecimal(idx)
	if err != nil {
		return 0, fmt.Errorf("tlog-proof index: %w", err)
	}
	return n, nil
}

// hashes reads the proof's hashes, up to the empty line before the
// checkpoint.
func (r *proofLines) hashes() ([][sha256.Size]byte, error) {
	var hashes [][sha256.Size]byte
	for {
		l, ok := r.next()
		if !ok {
			return hashes, errors.New("tlog-proof has no empty line before its checkpoint")
		}
		if l == "" {
			return hashes, nil
		}
		if len(hashes) == MaxProofHashes {
			return hashes, fmt.Errorf("tlog-proof has more than %d hashes", MaxProofHashes)
		}
		h, err := ParseHash(l)
		if err != nil {
			return hashes, fmt.Errorf("tlog-proof hash %d: %w", len(hashes)+1, err)
		}
		hashes = append(hashes, h)
	}
}
