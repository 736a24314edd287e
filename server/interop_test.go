package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/url"
	"testing"

	"github.com/annal-dev/annal/api"
	"github.com/annal-dev/annal/checkpoints"
	"github.com/transparency-dev/formats/log"
	formatsproof "github.com/transparency-dev/formats/proof"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
	tclient "github.com/transparency-dev/tessera/client"
	"golang.org/x/mod/sumdb/note"
)

// submitN commits n actions and waits until a checkpoint covers them all.
func submitN(t *testing.T, ts *testServer, n int) []*api.Receipt {
	t.Helper()
	ctx := context.Background()
	var out []*api.Receipt
	for i := 0; i < n; i++ {
		req := api.ActionRequest{Type: "create", Target: "workspace/f" + itoa(uint64(i)), Payload: []byte(`{"i":` + itoa(uint64(i)) + `}`)}
		var r *api.Receipt
		var err error
		if i == n-1 {
			r, err = ts.root.SubmitAndWait(ctx, req)
		} else {
			r, err = ts.root.Submit(ctx, req)
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

// TestInterop_TesseraClientReadsOurTiles: Tessera's own HTTP fetcher and
// ProofBuilder read our tiles, and the proofs they build verify against our
// checkpoint with transparency-dev/merkle.
func TestInterop_TesseraClientReadsOurTiles(t *testing.T) {
	ts := newTestServer(t)
	receipts := submitN(t, ts, 300) // more than one full tile
	ctx := context.Background()
	u, _ := url.Parse(ts.srv.URL + "/")
	f, err := tclient.NewHTTPFetcher(u, nil)
	if err != nil {
		t.Fatal(err)
	}
	v, err := note.NewVerifier(ts.k.VerifierKey())
	if err != nil {
		t.Fatal(err)
	}
	cp, _, _, err := tclient.FetchCheckpoint(ctx, f.ReadCheckpoint, v, ts.k.Origin())
	if err != nil {
		t.Fatalf("Tessera client rejects our checkpoint: %v", err)
	}
	if cp.Size < 301 {
		t.Fatalf("checkpoint size %d, want at least 301", cp.Size)
	}
	pb, err := tclient.NewProofBuilder(ctx, cp.Size, f.ReadTile)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []*api.Receipt{receipts[0], receipts[255], receipts[299]} {
		leaf, _ := hex.DecodeString(r.LeafHash)
		p, err := pb.InclusionProof(ctx, r.Index)
		if err != nil {
			t.Fatal(err)
		}
		if err := proof.VerifyInclusion(rfc6962.DefaultHasher, r.Index, cp.Size, leaf, p, cp.Hash); err != nil {
			t.Fatalf("index %d: %v", r.Index, err)
		}
	}
	// Entries read through Tessera's client hash to the receipts' leaves.
	bundle, err := tclient.GetEntryBundle(ctx, f.ReadEntryBundle, 1, cp.Size)
	if err != nil {
		t.Fatal(err)
	}
	e := bundle.Entries[0] // index 256
	if got := hex.EncodeToString(rfc6962.DefaultHasher.HashLeaf(e)); got != receipts[255].LeafHash {
		t.Fatalf("entry 256 hashes to %s, receipt says %s", got, receipts[255].LeafHash)
	}
	// A consistency proof between two of our sizes verifies too.
	cons, err := pb.ConsistencyProof(ctx, 10, cp.Size)
	if err != nil {
		t.Fatal(err)
	}
	oldRoot := rootAt(t, ts, 10)
	if err := proof.VerifyConsistency(rfc6962.DefaultHasher, 10, cp.Size, cons, oldRoot, cp.Hash); err != nil {
		t.Fatalf("consistency 10 -> %d: %v", cp.Size, err)
	}
	// And ours equals Tessera's.
	ours, err := ts.root.Consistency(ctx, 10, cp.Size)
	if err != nil {
		t.Fatal(err)
	}
	if len(ours) != len(cons) {
		t.Fatalf("our consistency proof has %d hashes, Tessera's %d", len(ours), len(cons))
	}
	for i := range ours {
		if [sha256.Size]byte(cons[i]) != ours[i] {
			t.Fatalf("consistency hash %d differs", i)
		}
	}
}

// rootAt computes the root of the first n entries from the entries themselves.
func rootAt(t *testing.T, ts *testServer, n uint64) []byte {
	t.Helper()
	leaves := make([][]byte, n)
	for i := uint64(0); i < n; i++ {
		e, err := ts.root.Event(context.Background(), i)
		if err != nil {
			t.Fatal(err)
		}
		leaves[i] = rfc6962.DefaultHasher.HashLeaf(e)
	}
	return mth(leaves)
}

// mth is RFC 6962's Merkle Tree Hash, written out independently.
func mth(leaves [][]byte) []byte {
	if len(leaves) == 1 {
		return leaves[0]
	}
	k := 1
	for k*2 < len(leaves) {
		k *= 2
	}
	return rfc6962.DefaultHasher.HashChildren(mth(leaves[:k]), mth(leaves[k:]))
}

// TestInterop_NoteVerifiesCheckpoint: x/mod's note package verifies our
// checkpoint with the verifier key annald prints.
func TestInterop_NoteVerifiesCheckpoint(t *testing.T) {
	ts := newTestServer(t)
	submitN(t, ts, 1)
	cp, err := ts.root.Checkpoint(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	info, err := ts.root.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	v, err := note.NewVerifier(info.VerifierKey)
	if err != nil {
		t.Fatal(err)
	}
	n, err := note.Open(cp, note.VerifierList(v))
	if err != nil {
		t.Fatalf("note.Open: %v", err)
	}
	var c log.Checkpoint
	if _, err := c.Unmarshal([]byte(n.Text)); err != nil || c.Origin != info.Origin {
		t.Fatalf("checkpoint body %q: %v", n.Text, err)
	}
}

// TestInterop_FormatsProofParsesOurs: formats' proof package reads our
// tlog-proof, and ours reads what it writes.
func TestInterop_FormatsProofParsesOurs(t *testing.T) {
	ts := newTestServer(t)
	receipts := submitN(t, ts, 5)
	text, err := ts.root.Proof(context.Background(), receipts[2].Index)
	if err != nil {
		t.Fatal(err)
	}
	var theirs formatsproof.TLogProof
	if err := theirs.Unmarshal(text); err != nil {
		t.Fatalf("formats cannot parse our proof: %v", err)
	}
	ours, err := checkpoints.ParseTLogProof(text)
	if err != nil {
		t.Fatal(err)
	}
	if theirs.Index != ours.Index || len(theirs.Hashes) != len(ours.Hashes) || string(theirs.Checkpoint) != string(ours.Checkpoint) {
		t.Fatalf("formats read %+v, we read %+v", theirs, ours)
	}
	back, err := checkpoints.ParseTLogProof(theirs.Marshal())
	if err != nil {
		t.Fatalf("we cannot parse formats' proof: %v", err)
	}
	if string(back.Marshal()) != string(text) {
		t.Fatalf("round trip through formats changed the proof:\n%s\nvs\n%s", back.Marshal(), text)
	}
}
