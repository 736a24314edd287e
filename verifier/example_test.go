package verifier_test

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/annal-dev/annal/checkpoints"
	"github.com/annal-dev/annal/verifier"
	"github.com/transparency-dev/merkle/rfc6962"
)

// A log's entry and its c2sp.org/tlog-proof, checked against the log's
// verifier key. The log here has two entries and is built by hand; a real
// log serves the proof (GET /v1/proof/...) and the key out of band.
func ExampleVerifyProof() {
	skey, vkey, err := checkpoints.GenerateLogKey("log.example/demo")
	if err != nil {
		fmt.Println(err)
		return
	}
	signer, err := checkpoints.NewLogSigner(skey)
	if err != nil {
		fmt.Println(err)
		return
	}
	entries := [][]byte{
		[]byte(`{"actor":"alice","id":"0190f1a8-7c00-7d00-8e00-000000000001","kind":"log.genesis","time":"2024-06-01T12:00:00Z","v":1}`),
		[]byte(`{"action":{"target":"mail/inbox/42","type":"observe"},"actor":"mail-agent","id":"0190f1a8-7c00-7d00-8e00-000000000002","kind":"action","time":"2024-06-01T12:00:03Z","v":1}`),
	}
	// RFC 6962: the root of two leaves hashes them together, and the proof
	// of the second leaf is the first leaf's hash.
	leaf0, leaf1 := rfc6962.DefaultHasher.HashLeaf(entries[0]), rfc6962.DefaultHasher.HashLeaf(entries[1])
	root := [32]byte(rfc6962.DefaultHasher.HashChildren(leaf0, leaf1))
	signed, err := checkpoints.SignCheckpoint(checkpoints.Checkpoint{Origin: "log.example/demo", Size: 2, Hash: root}, signer)
	if err != nil {
		fmt.Println(err)
		return
	}
	proof := checkpoints.TLogProof{Index: 1, Hashes: [][32]byte{[32]byte(leaf0)}, Checkpoint: signed}.Marshal()

	res, err := verifier.VerifyProof(entries[1], proof, vkey)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("entry %d of %d in %s: %s by %s (%s %s)\n", res.Index, res.Size, res.Origin, res.Event.Kind, res.Event.Actor, res.Event.Type, res.Event.Target)

	// The proof does not hold for any other entry; the error names the
	// check that failed.
	_, err = verifier.VerifyProof(entries[0], proof, vkey)
	var verr *verifier.Error
	if errors.As(err, &verr) {
		fmt.Println("refused by the check:", verr.Check)
	}
	// Output:
	// entry 1 of 2 in log.example/demo: action by mail-agent (observe mail/inbox/42)
	// refused by the check: inclusion
}

// A c2sp.org/tlog-policy names the log, its witnesses and the quorum of
// cosignatures a checkpoint needs. A malformed policy is refused with the
// line that is wrong.
func ExampleParsePolicy() {
	policy := `# The log, and the witnesses that must cosign its checkpoints.
log log.annal.example/vectors+0124a124+AQOhB7/zzhC+HXDdGOdLwJln5NYwm6UNXx3chmQSVTG4
witness w1 witness.annal.example+933c7df2+BBdFU7RW3d/GkI7KscEB/mqyHiuqBhd5W31DpjSCmT/V https://witness.annal.example/
group witnesses any w1
quorum witnesses
`
	p, err := verifier.ParsePolicy([]byte(policy))
	if err != nil {
		fmt.Println(err)
		return
	}
	key, _ := p.LogKey("log.annal.example/vectors")
	fmt.Println("log key:", key)

	_, err = verifier.ParsePolicy([]byte(strings.Replace(policy, "quorum witnesses", "quorum w2", 1)))
	fmt.Println(err)
	// Output:
	// log key: log.annal.example/vectors+0124a124+AQOhB7/zzhC+HXDdGOdLwJln5NYwm6UNXx3chmQSVTG4
	// policy: line 5: quorum "w2" is not defined on an earlier line
}

// An audit bundle (annal export, GET /v1/bundle) is read from any
// io.Reader and checked under a policy. This one, from the test vectors,
// discloses one agent's actions, each with its own inclusion proof.
func ExampleVerifyBundle() {
	var vectors struct {
		Policy  string
		Vectors []struct{ Name, Bundle string }
	}
	if err := readTestVectors("bundles.json", &vectors); err != nil {
		fmt.Println(err)
		return
	}
	p, err := verifier.ParsePolicy([]byte(vectors.Policy))
	if err != nil {
		fmt.Println(err)
		return
	}
	v := vectors.Vectors[2]
	res, err := verifier.VerifyBundle(strings.NewReader(v.Bundle), p, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%s: %d events (%d to %d) of %s, %s proofs, cosigned by %v\n",
		v.Name, res.Events, res.FirstIndex, res.LastIndex, res.Origin, res.Proof, res.Cosigners)
	fmt.Println("by actor:", res.ByActor, "by action type:", res.ByActionType)

	// A bundle cut short is refused: its trailer, which counts the
	// events, is missing.
	lines := strings.SplitAfter(v.Bundle, "\n")
	_, err = verifier.VerifyBundle(strings.NewReader(strings.Join(lines[:len(lines)-2], "")), p, nil)
	fmt.Println(err)
	// Output:
	// selective disclosure: mail-agent's actions: 5 events (2 to 6) of log.annal.example/vectors, inclusion proofs, cosigned by [witness]
	// by actor: map[mail-agent:5] by action type: map[create:1 execute:1 mutate:2 observe:1]
	// bundle format: the bundle ends after line 6 without its trailer: it is truncated
}

// Equivocation evidence: two checkpoints signed by one log key that no
// single history explains. Anyone can check it with the file alone.
func ExampleVerifyEvidence() {
	var vectors struct {
		Vectors []struct{ Name, Evidence string }
	}
	if err := readTestVectors("evidence.json", &vectors); err != nil {
		fmt.Println(err)
		return
	}
	proven := vectors.Vectors[1]
	res, err := verifier.VerifyEvidence([]byte(proven.Evidence), "")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%s: %s signed a tree of %d entries with root %s\n", proven.Name, res.Origin, res.Sizes[0], base64.StdEncoding.EncodeToString(res.Roots[0][:]))
	fmt.Printf("and one of %d entries whose first %d have root %s\n", res.Sizes[1], res.Sizes[0], base64.StdEncoding.EncodeToString(res.PrefixRoot[:]))

	// Checkpoints of one history are no evidence.
	honest := vectors.Vectors[4]
	_, err = verifier.VerifyEvidence([]byte(honest.Evidence), "")
	fmt.Printf("%s: %v\n", honest.Name, err)
	// Output:
	// sizes 5 and 9: log.annal.example/vectors signed a tree of 5 entries with root 82lBO/HNJFfKnoHwjH2dK/zS55KG9f76plHrCNCxtGg=
	// and one of 9 entries whose first 5 have root RxhCG53IAIQ+24K1CagCDQbOqBd8MmAB1CFnUh/nbVI=
	// honest extension: evidence: the larger tree's first 5 entries have the smaller checkpoint's root: the checkpoints are consistent
}

// readTestVectors decodes a file of the repository's known-answer tests.
func readTestVectors(name string, v any) error {
	raw, err := os.ReadFile(filepath.Join("..", "testvectors", name))
	if err != nil {
		return err
	}
	return json.Unmarshal(raw, v)
}
