package verifier

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"unicode/utf8"

	"github.com/annal-dev/annal/checkpoints"
	"github.com/annal-dev/annal/format/evidence"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
)

// CheckEvidence names the check of an evidence file that failed.
const CheckEvidence Check = "evidence"

// EvidenceResult is what verified evidence establishes.
type EvidenceResult struct {
	Origin string
	LogKey string
	// Sizes and Roots of the two checkpoints, smaller first.
	Sizes [2]uint64
	Roots [2][sha256.Size]byte
	// PrefixRoot is the larger tree's root at the smaller size, when the
	// sizes differ.
	PrefixRoot [sha256.Size]byte
}

// VerifyEvidence checks an equivocation evidence file (evidence.File,
// testvectors/FORMATS.md, "Equivocation evidence"). logKey, if not
// empty, is the key the caller trusts for the log and must be the file's;
// if empty, the file's key is used and the result proves that whoever holds
// that key signed two histories. The evidence holds if both checkpoints are
// signed by the log key and either have the same size and different roots,
// or the consistency proof shows the larger tree's prefix root, which
// differs from the smaller checkpoint's root.
func VerifyEvidence(data []byte, logKey string) (*EvidenceResult, error) {
	ev, err := decodeEvidence(data)
	if err != nil {
		return nil, err
	}
	small, large, err := openEvidenceCheckpoints(ev, logKey)
	if err != nil {
		return nil, err
	}
	res := &EvidenceResult{Origin: ev.Origin, LogKey: ev.LogKey,
		Sizes: [2]uint64{small.Size, large.Size}, Roots: [2][sha256.Size]byte{small.Hash, large.Hash}}
	switch {
	case small.Size > large.Size:
		return nil, fail(CheckEvidence, "the checkpoints are not in order: %d entries before %d", small.Size, large.Size)
	case small.Size == 0:
		return nil, fail(CheckEvidence, "a checkpoint of no entries cannot be contradicted by another")
	case small.Size == large.Size:
		if err := twoRootsOfOneSize(ev, small, large); err != nil {
			return nil, err
		}
		return res, nil
	}
	if res.PrefixRoot, err = otherPrefixRoot(ev, small, large); err != nil {
		return nil, err
	}
	return res, nil
}

// decodeEvidence decodes an evidence file strictly: within its size, valid
// UTF-8 JSON without duplicate, unknown or misspelt members, of this format.
func decodeEvidence(data []byte) (*evidence.File, error) {
	if len(data) > evidence.MaxSize {
		return nil, fail(CheckFormat, "evidence is %d bytes, more than %d", len(data), evidence.MaxSize)
	}
	if err := checkJSONSyntax(data); err != nil {
		return nil, wrap(CheckFormat, err)
	}
	var ev evidence.File
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&ev); err != nil {
		return nil, fail(CheckFormat, "evidence is not an evidence object: %v", err)
	}
	if dec.More() {
		return nil, fail(CheckFormat, "evidence has data after its object")
	}
	if err := exactMemberNames(data); err != nil {
		return nil, wrap(CheckFormat, err)
	}
	if ev.Format != evidence.Format {
		return nil, fail(CheckFormat, "format %q is not %q", ev.Format, evidence.Format)
	}
	return &ev, nil
}

// openEvidenceCheckpoints opens the two checkpoints under the file's log
// key, which must be logKey if that is given and must name the origin.
func openEvidenceCheckpoints(ev *evidence.File, logKey string) (first, second *checkpoints.SignedCheckpoint, _ error) {
	if logKey != "" && logKey != ev.LogKey {
		return nil, nil, fail(CheckKey, "the evidence is about key %q, not the trusted key %q", abbreviate(ev.LogKey), abbreviate(logKey))
	}
	v, err := LogVerifier(ev.LogKey)
	if err != nil {
		return nil, nil, err
	}
	if v.Name() != ev.Origin {
		return nil, nil, fail(CheckKey, "log key %q does not name origin %q", v.Name(), ev.Origin)
	}
	var cps [2]*checkpoints.SignedCheckpoint
	for i, note := range ev.Checkpoints {
		cp, err := checkpoints.OpenCheckpoint([]byte(note), v)
		if err != nil {
			return nil, nil, wrap(CheckCheckpoint, fmt.Errorf("checkpoint %d: %w", i+1, err))
		}
		cps[i] = cp
	}
	return cps[0], cps[1], nil
}

// twoRootsOfOneSize is the evidence of checkpoints of one size: their roots
// differ, and the file carries nothing else.
func twoRootsOfOneSize(ev *evidence.File, small, large *checkpoints.SignedCheckpoint) error {
	if small.Hash == large.Hash {
		return fail(CheckEvidence, "both checkpoints have size %d and the same root: no equivocation", small.Size)
	}
	if ev.PrefixRoot != "" || len(ev.ConsistencyProof) > 0 {
		return fail(CheckFormat, "checkpoints of one size need no prefix root or proof")
	}
	return nil
}

// otherPrefixRoot is the evidence of checkpoints of two sizes: the
// consistency proof shows that the larger tree's prefix of the smaller
// size has a root, and it is not the smaller checkpoint's.
func otherPrefixRoot(ev *evidence.File, small, large *checkpoints.SignedCheckpoint) ([sha256.Size]byte, error) {
	prefix, err := checkpoints.ParseHash(ev.PrefixRoot)
	if err != nil {
		return prefix, fail(CheckFormat, "prefix_root: %v", err)
	}
	if len(ev.ConsistencyProof) > checkpoints.MaxProofHashes {
		return prefix, fail(CheckFormat, "consistency proof has %d hashes, more than %d", len(ev.ConsistencyProof), checkpoints.MaxProofHashes)
	}
	hashes := make([][]byte, len(ev.ConsistencyProof))
	for i, h := range ev.ConsistencyProof {
		raw, err := checkpoints.ParseHash(h)
		if err != nil {
			return prefix, fail(CheckFormat, "consistency proof hash %d is not a base64 SHA-256 hash: %v", i+1, err)
		}
		hashes[i] = raw[:]
	}
	if err := proof.VerifyConsistency(rfc6962.DefaultHasher, small.Size, large.Size, hashes, prefix[:], large.Hash[:]); err != nil {
		return prefix, fail(CheckConsistency, "the proof does not show that the tree of %d entries has root %s at %d: %v",
			large.Size, ev.PrefixRoot, small.Size, describe(err))
	}
	if prefix == small.Hash {
		return prefix, fail(CheckEvidence, "the larger tree's first %d entries have the smaller checkpoint's root: the checkpoints are consistent", small.Size)
	}
	return prefix, nil
}

// checkJSONSyntax refuses invalid UTF-8 and duplicate members, which
// encoding/json would accept silently.
func checkJSONSyntax(data []byte) error {
	if !utf8.Valid(data) || !json.Valid(data) {
		return fmt.Errorf("evidence is not valid UTF-8 JSON")
	}
	return noDuplicates(json.NewDecoder(bytes.NewReader(data)), 0)
}

// exactMemberNames refuses a member whose name is another spelling of one
// the format declares ("FORMAT", "Log_Key"): encoding/json matches names
// without regard to case, so the decoder alone would take it for the
// declared member.
func exactMemberNames(data []byte) error {
	var file map[string]json.RawMessage
	if err := json.Unmarshal(data, &file); err != nil {
		return err
	}
	if err := knownMembers("evidence", file, reflect.TypeFor[evidence.File]()); err != nil {
		return err
	}
	if raw, ok := file["observations"]; ok {
		var list []map[string]json.RawMessage
		if err := json.Unmarshal(raw, &list); err != nil {
			return err
		}
		for i, o := range list {
			if err := knownMembers(fmt.Sprintf("observation %d", i+1), o, reflect.TypeFor[evidence.Observation]()); err != nil {
				return err
			}
		}
	}
	return nil
}

// knownMembers refuses a member of obj that is not exactly the JSON name of
// a field of the struct type t.
func knownMembers(what string, obj map[string]json.RawMessage, t reflect.Type) error {
	names := map[string]bool{}
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		names[name] = true
	}
	for name := range obj {
		if !names[name] {
			return fmt.Errorf("%s has the member %q, which its format does not declare (member names are case-sensitive)", what, abbreviate(name))
		}
	}
	return nil
}

func noDuplicates(dec *json.Decoder, depth int) error {
	if depth > 8 {
		return fmt.Errorf("the JSON nests deeper than its format does")
	}
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch tok {
	case json.Delim('{'):
		seen := map[string]bool{}
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return err
			}
			name, _ := k.(string)
			if seen[name] {
				return fmt.Errorf("the member %q appears twice", name)
			}
			seen[name] = true
			if err := noDuplicates(dec, depth+1); err != nil {
				return err
			}
		}
		_, err = dec.Token()
		return err
	case json.Delim('['):
		for dec.More() {
			if err := noDuplicates(dec, depth+1); err != nil {
				return err
			}
		}
		_, err = dec.Token()
		return err
	}
	return nil
}
