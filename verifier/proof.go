package verifier

import (
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"github.com/annal-dev/annal/checkpoints"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
	"golang.org/x/mod/sumdb/note"
)

// ProofResult is what a verified tlog-proof establishes: the entry with this
// leaf hash is at Index in the log Origin of Size entries whose signed
// checkpoint is Checkpoint.
type ProofResult struct {
	Origin     string
	Size       uint64
	RootHash   [sha256.Size]byte
	Index      uint64
	LeafHash   [sha256.Size]byte
	Event      *Event
	Checkpoint *checkpoints.SignedCheckpoint
}

// LogVerifier parses a log verifier key ("<origin>+<hash>+<base64>") and
// insists on Ed25519, the only algorithm Annal logs sign with.
func LogVerifier(vkey string) (note.Verifier, error) {
	vkey = strings.TrimSpace(vkey)
	// The key's base64 may itself hold '+', so count only the two separators.
	if strings.Count(vkey, "+") < 2 {
		return nil, fail(CheckKey, "%q is not a note verifier key <name>+<hash>+<key>", abbreviate(vkey))
	}
	v, err := checkpoints.NewLogVerifier(vkey)
	if err != nil {
		return nil, wrap(CheckKey, err)
	}
	return v, nil
}

// VerifyProof checks a c2sp.org/tlog-proof for entry against the log key
// vkey: the proof's layout, the checkpoint's signature by the log key, that
// the checkpoint's origin is the key's name, that the index lies inside the
// checkpoint, that the entry is a well-formed event, and that the entry's
// RFC 6962 leaf hash is included at the index under the checkpoint's root.
func VerifyProof(entry, tlogProof []byte, vkey string) (*ProofResult, error) {
	v, err := LogVerifier(vkey)
	if err != nil {
		return nil, err
	}
	p, err := checkpoints.ParseTLogProof(tlogProof)
	if err != nil {
		return nil, wrap(CheckFormat, err)
	}
	cp, err := checkpoints.OpenCheckpoint(p.Checkpoint, v)
	if err != nil {
		return nil, wrap(CheckCheckpoint, err)
	}
	if p.Index >= cp.Size {
		return nil, fail(CheckIndex, "index %d is not inside the checkpoint's %d entries", p.Index, cp.Size)
	}
	ev, err := ParseEvent(entry)
	if err != nil {
		return nil, wrap(CheckEntry, err)
	}
	leaf := [sha256.Size]byte(rfc6962.DefaultHasher.HashLeaf(entry))
	hashes := make([][]byte, len(p.Hashes))
	for i := range p.Hashes {
		hashes[i] = p.Hashes[i][:]
	}
	if err := proof.VerifyInclusion(rfc6962.DefaultHasher, p.Index, cp.Size, leaf[:], hashes, cp.Hash[:]); err != nil {
		return nil, fail(CheckInclusion, "entry with leaf hash %x is not at index %d of %s size %d: %v", leaf, p.Index, cp.Origin, cp.Size, describe(err))
	}
	return &ProofResult{
		Origin: cp.Origin, Size: cp.Size, RootHash: cp.Hash,
		Index: p.Index, LeafHash: leaf, Event: ev, Checkpoint: cp,
	}, nil
}

// ConsistencyResult is what a verified consistency proof establishes: the
// log Origin at size Old.Size is a prefix of itself at size New.Size.
type ConsistencyResult struct {
	Origin   string
	Old, New *checkpoints.SignedCheckpoint
}

// VerifyConsistency checks that two signed checkpoints of one log describe
// one history: both signed by vkey, old no larger than new, and proofText
// (one base64 hash per line, as GET /v1/proof/consistency serves it) an RFC
// 6962 consistency proof from the old root to the new one.
func VerifyConsistency(oldCheckpoint, newCheckpoint, proofText []byte, vkey string) (*ConsistencyResult, error) {
	v, err := LogVerifier(vkey)
	if err != nil {
		return nil, err
	}
	oldCP, err := checkpoints.OpenCheckpoint(oldCheckpoint, v)
	if err != nil {
		return nil, wrap(CheckCheckpoint, fmt.Errorf("old checkpoint: %w", err))
	}
	newCP, err := checkpoints.OpenCheckpoint(newCheckpoint, v)
	if err != nil {
		return nil, wrap(CheckCheckpoint, fmt.Errorf("new checkpoint: %w", err))
	}
	if oldCP.Size > newCP.Size {
		return nil, fail(CheckConsistency, "old checkpoint has %d entries, more than the new one's %d", oldCP.Size, newCP.Size)
	}
	hashes, err := checkpoints.ParseHashes(proofText)
	if err != nil {
		return nil, wrap(CheckFormat, err)
	}
	raw := make([][]byte, len(hashes))
	for i := range hashes {
		raw[i] = hashes[i][:]
	}
	if err := proof.VerifyConsistency(rfc6962.DefaultHasher, oldCP.Size, newCP.Size, raw, oldCP.Hash[:], newCP.Hash[:]); err != nil {
		return nil, fail(CheckConsistency, "size %d is not a prefix of size %d: %v", oldCP.Size, newCP.Size, describe(err))
	}
	return &ConsistencyResult{Origin: oldCP.Origin, Old: oldCP, New: newCP}, nil
}

// describe rewords the merkle module's root mismatch, which prints roots as
// byte lists over several lines, in the base64 that checkpoints use.
func describe(err error) string {
	var mismatch proof.RootMismatchError
	if errors.As(err, &mismatch) {
		return fmt.Sprintf("the proof leads to root %s, the checkpoint's root is %s",
			base64.StdEncoding.EncodeToString(mismatch.CalculatedRoot), base64.StdEncoding.EncodeToString(mismatch.ExpectedRoot))
	}
	return err.Error()
}

func abbreviate(s string) string {
	if len(s) > 80 {
		return s[:77] + "..."
	}
	return s
}
