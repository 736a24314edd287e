package witness

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/annal-dev/annal/checkpoints"
	"github.com/annal-dev/annal/format/evidence"
	"github.com/annal-dev/annal/internal/strictjson"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
	"golang.org/x/mod/sumdb/note"
)

// ErrNoEvidenceKey is returned when two checkpoints of a log contradict
// each other but no configured key of the log can stand as the evidence's
// log_key: the format needs one Ed25519 key, named after the origin, whose
// signature is on both.
var ErrNoEvidenceKey = errors.New("no configured key of the log signed both checkpoints as the evidence format requires")

// sighting is a checkpoint signed by its log, and who saw it. note holds the
// checkpoint text and only signatures that verified: the log's, and a
// witness's cosignature.
type sighting struct {
	note []byte
	cp   checkpoints.Checkpoint
	by   string
	at   time.Time
}

// split is an equivocation: two sightings of one log, small before large by
// size. When the sizes differ, prefixRoot is the larger tree's root at the
// smaller size and proof the consistency proof between the sizes, both
// read from the log's tiles.
type split struct {
	small, large sighting
	prefixRoot   []byte
	proof        [][]byte
}

// evidenceID names the equivocation between the trees (a.Size, a.Hash) and
// (b.Size, b.Hash) of origin, in either order: the same two trees seen by
// several witnesses, or twice, give one ID and so one stored file.
func evidenceID(origin string, a, b checkpoints.Checkpoint) [sha256.Size]byte {
	if treeLess(b, a) {
		a, b = b, a
	}
	return sha256.Sum256(fmt.Appendf(nil, "%s\n%s\n%d\n%s\n%d\n%s\n", evidence.Format, origin, a.Size, b64(a.Hash[:]), b.Size, b64(b.Hash[:])))
}

// treeLess orders checkpoints by size, then root.
func treeLess(a, b checkpoints.Checkpoint) bool {
	if a.Size != b.Size {
		return a.Size < b.Size
	}
	return bytes.Compare(a.Hash[:], b.Hash[:]) < 0
}

// makeEvidence writes the evidence file (format/evidence) of s and checks it
// as a verifier would: a file this returns verifies with `annal-verify
// evidence`.
func makeEvidence(cfg LogConfig, s split) ([]byte, error) {
	if s.small.cp.Size == s.large.cp.Size && treeLess(s.large.cp, s.small.cp) {
		s.small, s.large = s.large, s.small
	}
	key, err := evidenceKey(cfg, s.small.note, s.large.note)
	if err != nil {
		return nil, err
	}
	ev := evidence.File{
		Format:      evidence.Format,
		Origin:      cfg.Origin,
		LogKey:      key,
		Checkpoints: [2]string{string(s.small.note), string(s.large.note)},
		Observations: []evidence.Observation{
			{Checkpoint: 0, By: s.small.by, At: s.small.at.UTC().Format(time.RFC3339)},
			{Checkpoint: 1, By: s.large.by, At: s.large.at.UTC().Format(time.RFC3339)},
		},
	}
	if s.small.cp.Size != s.large.cp.Size {
		ev.PrefixRoot = b64(s.prefixRoot)
		for _, h := range s.proof {
			ev.ConsistencyProof = append(ev.ConsistencyProof, b64(h))
		}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	// Notes hold '<', '>' and '&' as themselves; escaping them would only
	// make the file longer.
	enc.SetEscapeHTML(false)
	if err := enc.Encode(ev); err != nil {
		return nil, err
	}
	if err := checkEvidence(buf.Bytes()); err != nil {
		return nil, fmt.Errorf("evidence of %q does not check, not recorded: %w", abbreviate(cfg.Origin), err)
	}
	return buf.Bytes(), nil
}

// evidenceKey is the first key of the log that can stand as log_key for
// both notes.
func evidenceKey(cfg LogConfig, notes ...[]byte) (string, error) {
next:
	for _, k := range cfg.Keys {
		v, err := checkpoints.NewLogVerifier(k)
		if err != nil {
			continue
		}
		for _, n := range notes {
			if _, err := checkpoints.OpenCheckpoint(n, v); err != nil {
				continue next
			}
		}
		return k, nil
	}
	return "", fmt.Errorf("%w (log %q)", ErrNoEvidenceKey, abbreviate(cfg.Origin))
}

// checkEvidence applies the format's rules to an evidence file: at most
// evidence.MaxSize bytes, no unknown member, both checkpoints signed by
// log_key (whose name is the origin), sizes at least 1 in order, and
// either equal sizes with different roots, or a consistency proof from
// the prefix root to the larger root with a prefix root other than the
// smaller root. It is the witness's own reading of the format, so that it
// never keeps a file the verifier would refuse; it does not import the
// verifier, which knows nothing of the witness.
func checkEvidence(file []byte) error {
	if len(file) > evidence.MaxSize {
		return fmt.Errorf("evidence is %d bytes, more than %d", len(file), evidence.MaxSize)
	}
	var ev evidence.File
	if err := strictjson.Decode(file, &ev); err != nil {
		return fmt.Errorf("evidence is not one evidence object: %v", err)
	}
	if ev.Format != evidence.Format {
		return fmt.Errorf("format %q is not %q", ev.Format, evidence.Format)
	}
	small, large, err := openEvidenceCheckpoints(ev)
	if err != nil {
		return err
	}
	switch {
	case small.Size == 0 || small.Size > large.Size:
		return fmt.Errorf("checkpoint sizes %d and %d are not at least 1 and in order", small.Size, large.Size)
	case small.Size == large.Size:
		if small.Hash == large.Hash || ev.PrefixRoot != "" || len(ev.ConsistencyProof) > 0 {
			return fmt.Errorf("checkpoints of size %d: want two roots and no proof", small.Size)
		}
		return nil
	}
	return checkPrefixProof(ev, small, large)
}

// openEvidenceCheckpoints opens the evidence's two checkpoints with its
// log_key, which must name its origin.
func openEvidenceCheckpoints(ev evidence.File) (small, large *checkpoints.SignedCheckpoint, err error) {
	v, err := checkpoints.NewLogVerifier(ev.LogKey)
	if err != nil {
		return nil, nil, err
	}
	if v.Name() != ev.Origin {
		return nil, nil, fmt.Errorf("log key %q does not name origin %q", v.Name(), ev.Origin)
	}
	var cps [2]*checkpoints.SignedCheckpoint
	for i, n := range ev.Checkpoints {
		if cps[i], err = checkpoints.OpenCheckpoint([]byte(n), v); err != nil {
			return nil, nil, fmt.Errorf("checkpoint %d: %w", i+1, err)
		}
	}
	return cps[0], cps[1], nil
}

// checkPrefixProof checks the evidence of two checkpoints of different
// sizes: its consistency proof leads from its prefix root to the larger
// checkpoint's root, and the prefix root is not the smaller checkpoint's.
func checkPrefixProof(ev evidence.File, small, large *checkpoints.SignedCheckpoint) error {
	prefix, err := checkpoints.ParseHash(ev.PrefixRoot)
	if err != nil {
		return fmt.Errorf("prefix_root: %w", err)
	}
	if len(ev.ConsistencyProof) > checkpoints.MaxProofHashes {
		return fmt.Errorf("consistency proof has %d hashes, more than %d", len(ev.ConsistencyProof), checkpoints.MaxProofHashes)
	}
	hashes := make([][]byte, len(ev.ConsistencyProof))
	for i, h := range ev.ConsistencyProof {
		raw, err := checkpoints.ParseHash(h)
		if err != nil {
			return fmt.Errorf("consistency proof hash %d: %w", i+1, err)
		}
		hashes[i] = raw[:]
	}
	if err := proof.VerifyConsistency(rfc6962.DefaultHasher, small.Size, large.Size, hashes, prefix[:], large.Hash[:]); err != nil {
		return fmt.Errorf("consistency proof from %d to %d: %w", small.Size, large.Size, err)
	}
	if prefix == small.Hash {
		return fmt.Errorf("the larger tree's first %d entries have the smaller checkpoint's root: no equivocation", small.Size)
	}
	return nil
}

// verifiedNote re-encodes an opened note with its text and the signatures
// that verified, and nothing else: what evidence keeps of a checkpoint.
func verifiedNote(n *note.Note) ([]byte, error) {
	return note.Sign(&note.Note{Text: n.Text, Sigs: n.Sigs})
}
