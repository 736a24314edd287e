package testvectors

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"testing"

	formatslog "github.com/transparency-dev/formats/log"
	formatsproof "github.com/transparency-dev/formats/proof"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
	"github.com/transparency-dev/merkle/testonly"

	"github.com/annal-dev/annal/checkpoints"
	"github.com/annal-dev/annal/kernel/event"
	"github.com/annal-dev/annal/verifier"
)

const tlogProofsFile = "tlogproofs.json"

// tlogProofVectors is one small log: Keys and Entries are inputs; the leaf
// hashes (hex), the root (base64) and the signed checkpoint of the whole
// tree are computed.
type tlogProofVectors struct {
	Description string              `json:"description"`
	Keys        []keyVector         `json:"keys"`
	Entries     []string            `json:"entries"`
	LeafHashes  []string            `json:"leaf_hashes"`
	RootHash    string              `json:"root_hash"`
	Checkpoint  string              `json:"checkpoint"`
	Inclusion   []inclusionVector   `json:"inclusion"`
	Consistency []consistencyVector `json:"consistency"`
	Rejects     []tlogProofReject   `json:"rejects"`
}

// inclusionVector: the c2sp.org/tlog-proof of the entry at Index against
// the checkpoint of the whole tree, with Extra as its extra data if set.
type inclusionVector struct {
	Index uint64 `json:"index"`
	Extra string `json:"extra,omitempty"`
	Proof string `json:"proof"`
}

// consistencyVector: the RFC 6962 consistency proof from the tree of Size1
// entries to the tree of Size2, one base64 hash per line, and the signed
// checkpoints of both trees.
type consistencyVector struct {
	Size1       uint64 `json:"size1"`
	Size2       uint64 `json:"size2"`
	Checkpoint1 string `json:"checkpoint1"`
	Checkpoint2 string `json:"checkpoint2"`
	Proof       string `json:"proof"`
}

// tlogProofReject is a proof that a verifier MUST refuse for an entry. It is
// the proof of entry FromIndex, changed as the other inputs say; Old and New
// replace text in the final proof. Proof and GoError are computed.
type tlogProofReject struct {
	Name             string  `json:"name"`
	Reason           string  `json:"reason"`
	FromIndex        uint64  `json:"from_index"`
	EntryIndex       *uint64 `json:"entry_index,omitempty"`
	Index            *uint64 `json:"index,omitempty"`
	DropLastHash     bool    `json:"drop_last_hash,omitempty"`
	FlipFirstHash    bool    `json:"flip_first_hash,omitempty"`
	CheckpointSigner string  `json:"checkpoint_signer,omitempty"`
	CheckpointSize   uint64  `json:"checkpoint_size,omitempty"`
	Old              string  `json:"old,omitempty"`
	New              string  `json:"new,omitempty"`
	Proof            string  `json:"proof"`
	GoError          string  `json:"go_error"`
}

func TestTLogProofVectors(t *testing.T) {
	var f tlogProofVectors
	load(t, tlogProofsFile, &f)
	if len(f.Entries) == 0 || len(f.Inclusion) == 0 || len(f.Consistency) == 0 || len(f.Rejects) == 0 {
		t.Fatalf("%s lacks entries, inclusion, consistency or reject vectors", tlogProofsFile)
	}
	keys := deriveKeys(t, tlogProofsFile, f.Keys)
	log, ok := keys["log"]
	if !ok {
		t.Fatalf("%s has no key labelled log", tlogProofsFile)
	}

	tree := testonly.New(rfc6962.DefaultHasher)
	var leaves [][]byte
	var leafHex []string
	for i, e := range f.Entries {
		if _, err := event.Parse([]byte(e)); err != nil {
			t.Errorf("entry %d is not an Annal event: %v", i, err)
		}
		leaves = append(leaves, leafHash(t, "entry", []byte(e)))
		leafHex = append(leafHex, hex.EncodeToString(leaves[i]))
		tree.AppendData([]byte(e))
	}
	size := uint64(len(leaves))
	expectList(t, tlogProofsFile, "tree", "leaf_hashes", &f.LeafHashes, leafHex)

	root := mth(leaves)
	if lib := tree.Hash(); !bytes.Equal(lib, root) {
		t.Errorf("RFC 6962 root by hand %x, merkle testonly tree %x", root, lib)
	}
	expect(t, tlogProofsFile, "tree", "root_hash", &f.RootHash, base64.StdEncoding.EncodeToString(root))
	checkpoint := signTree(t, log, leaves, size)
	expect(t, tlogProofsFile, "tree", "checkpoint", &f.Checkpoint, checkpoint)

	for i := range f.Inclusion {
		v := &f.Inclusion[i]
		name := fmt.Sprintf("inclusion of entry %d", v.Index)
		if v.Index >= size {
			t.Errorf("%s: no such entry", name)
			continue
		}
		path := rfcPath(v.Index, leaves)
		if lib, err := tree.InclusionProof(v.Index, size); err != nil || !slices.EqualFunc(lib, path, bytes.Equal) {
			t.Errorf("%s: RFC 6962 path by hand %x, merkle testonly %x, %v", name, path, lib, err)
		}
		text := tlogProof(t, v.Index, v.Extra, path, checkpoint)
		expect(t, tlogProofsFile, name, "proof", &v.Proof, text)
		if res, err := verifier.VerifyProof([]byte(f.Entries[v.Index]), []byte(text), log.vkey); err != nil {
			t.Errorf("%s: Annal's verifier refuses it: %v", name, err)
		} else if res.Index != v.Index || res.Size != size || !bytes.Equal(res.RootHash[:], root) {
			t.Errorf("%s: verifier reads index %d of %d under %x", name, res.Index, res.Size, res.RootHash)
		}
		verifyIndependently(t, name, text, log, []byte(f.Entries[v.Index]))
	}

	for i := range f.Consistency {
		v := &f.Consistency[i]
		name := fmt.Sprintf("consistency %d to %d", v.Size1, v.Size2)
		if v.Size1 > v.Size2 || v.Size2 > size {
			t.Errorf("%s: sizes out of range", name)
			continue
		}
		hashes := rfcConsistency(v.Size1, leaves[:v.Size2])
		if lib, err := tree.ConsistencyProof(v.Size1, v.Size2); err != nil || !slices.EqualFunc(lib, hashes, bytes.Equal) {
			t.Errorf("%s: RFC 6962 proof by hand %x, merkle testonly %x, %v", name, hashes, lib, err)
		}
		text := hashLines(hashes)
		if ours := string(checkpoints.MarshalHashes(fixed(hashes))); ours != text {
			t.Errorf("%s: checkpoints.MarshalHashes = %q, by hand %q", name, ours, text)
		}
		expect(t, tlogProofsFile, name, "proof", &v.Proof, text)
		expect(t, tlogProofsFile, name, "checkpoint1", &v.Checkpoint1, signTree(t, log, leaves, v.Size1))
		expect(t, tlogProofsFile, name, "checkpoint2", &v.Checkpoint2, signTree(t, log, leaves, v.Size2))
		if _, err := verifier.VerifyConsistency([]byte(v.Checkpoint1), []byte(v.Checkpoint2), []byte(v.Proof), log.vkey); err != nil {
			t.Errorf("%s: Annal's verifier refuses it: %v", name, err)
		}
		if err := proof.VerifyConsistency(rfc6962.DefaultHasher, v.Size1, v.Size2, hashes, mth(leaves[:v.Size1]), mth(leaves[:v.Size2])); err != nil {
			t.Errorf("%s: merkle proof.VerifyConsistency: %v", name, err)
		}
	}

	for i := range f.Rejects {
		r := &f.Rejects[i]
		text, entry, ok := rejectProof(t, r, keys, leaves, f.Entries)
		if !ok {
			continue
		}
		expect(t, tlogProofsFile, r.Name, "proof", &r.Proof, text)
		if _, err := verifier.VerifyProof(entry, []byte(text), log.vkey); err == nil {
			t.Errorf("reject %q (%s): Annal's verifier accepts it", r.Name, r.Reason)
		} else {
			expect(t, tlogProofsFile, r.Name, "go_error", &r.GoError, err.Error())
		}
	}
	save(t, tlogProofsFile, &f)
}

// verifyIndependently checks a tlog-proof with no Annal code: the
// transparency-dev/formats parsers, x/mod note through them, and the merkle
// module's inclusion check.
func verifyIndependently(t *testing.T, name, text string, log *noteKey, entry []byte) {
	t.Helper()
	var p formatsproof.TLogProof
	if err := p.Unmarshal([]byte(text)); err != nil {
		t.Errorf("%s: formats proof.Unmarshal: %v", name, err)
		return
	}
	if string(p.Marshal()) != text {
		t.Errorf("%s: formats proof round trip gives %q", name, p.Marshal())
	}
	cp, _, _, err := formatslog.ParseCheckpoint(p.Checkpoint, log.name, log.verifier)
	if err != nil {
		t.Errorf("%s: formats log.ParseCheckpoint: %v", name, err)
		return
	}
	hashes := make([][]byte, len(p.Hashes))
	for i := range p.Hashes {
		hashes[i] = p.Hashes[i][:]
	}
	if err := proof.VerifyInclusion(rfc6962.DefaultHasher, p.Index, cp.Size, rfc6962.DefaultHasher.HashLeaf(entry), hashes, cp.Hash); err != nil {
		t.Errorf("%s: merkle proof.VerifyInclusion: %v", name, err)
	}
}

func rejectProof(t *testing.T, r *tlogProofReject, keys map[string]*noteKey, leaves [][]byte, entries []string) (string, []byte, bool) {
	t.Helper()
	size := uint64(len(leaves))
	entryIndex := r.FromIndex
	if r.EntryIndex != nil {
		entryIndex = *r.EntryIndex
	}
	if r.FromIndex >= size || entryIndex >= size || r.CheckpointSize > size || r.Reason == "" {
		t.Errorf("reject %q: index or size out of range, or no reason", r.Name)
		return "", nil, false
	}
	signer := keys["log"]
	if r.CheckpointSigner != "" {
		if signer = keys[r.CheckpointSigner]; signer == nil {
			t.Errorf("reject %q: no key %q", r.Name, r.CheckpointSigner)
			return "", nil, false
		}
	}
	cpSize := size
	if r.CheckpointSize != 0 {
		cpSize = r.CheckpointSize
	}
	path := rfcPath(r.FromIndex, leaves)
	if r.DropLastHash {
		path = path[:len(path)-1]
	}
	if r.FlipFirstHash {
		path[0] = bytes.Clone(path[0])
		path[0][0] ^= 1
	}
	index := r.FromIndex
	if r.Index != nil {
		index = *r.Index
	}
	text := tlogProof(t, index, "", path, signTree(t, signer, leaves, cpSize))
	if r.Old != "" || r.New != "" {
		if !strings.Contains(text, r.Old) || r.Old == r.New {
			t.Errorf("reject %q: the proof does not contain %q, or the change is empty", r.Name, r.Old)
			return "", nil, false
		}
		text = strings.Replace(text, r.Old, r.New, 1)
	}
	return text, []byte(entries[entryIndex]), true
}

// signTree returns the checkpoint of the first size leaves signed by k,
// checking Annal's signer against the signature made by hand.
func signTree(t *testing.T, k *noteKey, leaves [][]byte, size uint64) string {
	t.Helper()
	c := checkpoints.Checkpoint{Origin: k.name, Size: size, Hash: [sha256.Size]byte(mth(leaves[:size]))}
	signed, err := checkpoints.SignCheckpoint(c, k.signer)
	if err != nil {
		t.Fatal(err)
	}
	if byHand := signByHand(string(c.Marshal()), k); string(signed) != byHand {
		t.Errorf("checkpoint of size %d: SignCheckpoint gives %q, by hand %q", size, signed, byHand)
	}
	return string(signed)
}

// tlogProof writes a c2sp.org/tlog-proof with Annal's code and checks it
// against the transparency-dev/formats writer.
func tlogProof(t *testing.T, index uint64, extra string, path [][]byte, checkpoint string) string {
	t.Helper()
	p := checkpoints.TLogProof{Index: index, Hashes: fixed(path), Checkpoint: []byte(checkpoint)}
	theirs := formatsproof.TLogProof{Index: index, Hashes: fixed(path), Checkpoint: []byte(checkpoint)}
	if extra != "" {
		p.Extra, theirs.ExtraData = []byte(extra), []byte(extra)
	}
	ours := string(p.Marshal())
	if ours != string(theirs.Marshal()) {
		t.Errorf("tlog-proof of index %d: Annal writes %q, formats/proof writes %q", index, ours, theirs.Marshal())
	}
	return ours
}

// mth is the RFC 6962 §2.1 Merkle Tree Hash of a list of leaf hashes.
func mth(leaves [][]byte) []byte {
	switch len(leaves) {
	case 0:
		h := sha256.Sum256(nil)
		return h[:]
	case 1:
		return leaves[0]
	}
	k := split(len(leaves))
	return node(mth(leaves[:k]), mth(leaves[k:]))
}

// rfcPath is the RFC 6962 §2.1.1 audit path PATH(m, D[n]).
func rfcPath(m uint64, leaves [][]byte) [][]byte {
	n := uint64(len(leaves))
	if n <= 1 {
		return nil
	}
	k := uint64(split(len(leaves)))
	if m < k {
		return append(rfcPath(m, leaves[:k]), mth(leaves[k:]))
	}
	return append(rfcPath(m-k, leaves[k:]), mth(leaves[:k]))
}

// rfcConsistency is the RFC 6962 §2.1.2 consistency proof PROOF(m, D[n]).
func rfcConsistency(m uint64, leaves [][]byte) [][]byte {
	if m == 0 || m == uint64(len(leaves)) {
		return nil
	}
	return subproof(m, leaves, true)
}

func subproof(m uint64, leaves [][]byte, whole bool) [][]byte {
	n := uint64(len(leaves))
	if m == n {
		if whole {
			return nil
		}
		return [][]byte{mth(leaves)}
	}
	k := uint64(split(len(leaves)))
	if m <= k {
		return append(subproof(m, leaves[:k], whole), mth(leaves[k:]))
	}
	return append(subproof(m-k, leaves[k:], false), mth(leaves[:k]))
}

// split is the largest power of two smaller than n, for n > 1.
func split(n int) int {
	k := 1
	for k<<1 < n {
		k <<= 1
	}
	return k
}

func node(left, right []byte) []byte {
	h := sha256.New()
	h.Write([]byte{0x01})
	h.Write(left)
	h.Write(right)
	return h.Sum(nil)
}

func fixed(hashes [][]byte) [][sha256.Size]byte {
	out := make([][sha256.Size]byte, len(hashes))
	for i, h := range hashes {
		out[i] = [sha256.Size]byte(h)
	}
	return out
}

func hashLines(hashes [][]byte) string {
	var b strings.Builder
	for _, h := range hashes {
		b.WriteString(base64.StdEncoding.EncodeToString(h) + "\n")
	}
	return b.String()
}
