package main

import (
	"crypto/rand"
	"strings"
	"testing"

	"github.com/annal-dev/annal/checkpoints"
	fnote "github.com/transparency-dev/formats/note"
	"golang.org/x/mod/sumdb/note"
)

// A real kernel's proof, its checkpoint cosigned afterwards by two
// witnesses of a 2-of-3 policy, checked with --policy instead of --key.
func TestProofWithPolicy(t *testing.T) {
	f := newFixture(t)
	var witnesses []note.Signer
	var vkeys []string
	for _, name := range []string{"w1.example", "w2.example", "w3.example"} {
		skey, vkey, err := note.GenerateKey(rand.Reader, name)
		if err != nil {
			t.Fatal(err)
		}
		s, _ := fnote.NewSignerForCosignatureV1(skey)
		cv, _ := fnote.VKeyToCosignatureV1(vkey)
		witnesses, vkeys = append(witnesses, s), append(vkeys, cv)
	}
	policy := "log " + f.key + "\nwitness A " + vkeys[0] + "\nwitness B " + vkeys[1] + "\nwitness C " + vkeys[2] + "\ngroup W 2 A B C\nquorum W\n"
	policyFile := f.write("policy", []byte(policy))
	proof := mustRead(t, f.proofs[3])
	tp, err := checkpoints.ParseTLogProof(proof)
	if err != nil {
		t.Fatal(err)
	}
	cosign := func(ws ...note.Signer) string {
		n, err := note.Open(tp.Checkpoint, note.VerifierList(mustV(t, f.key)))
		if err != nil {
			t.Fatal(err)
		}
		extra, err := note.Sign(&note.Note{Text: n.Text}, ws...)
		if err != nil {
			t.Fatal(err)
		}
		sigs := extra[len(n.Text)+1:]
		p := tp
		p.Checkpoint = append(append([]byte(nil), tp.Checkpoint...), sigs...)
		return f.write("cosigned.tlog-proof", p.Marshal())
	}
	code, out, errOut := runCLI("proof", "--policy", policyFile, "--entry", f.entries[3], cosign(witnesses[0], witnesses[2]))
	if code != 0 || !strings.Contains(out, "cosigned by A, C") {
		t.Fatalf("exit %d: %s%s", code, out, errOut)
	}
	code, _, errOut = runCLI("proof", "--policy", policyFile, "--entry", f.entries[3], cosign(witnesses[1]))
	if code != 1 || !strings.Contains(errOut, "FAILED policy") {
		t.Fatalf("one cosignature of 2 needed: exit %d, %s", code, errOut)
	}
	code, _, errOut = runCLI("proof", "--policy", f.write("bad.policy", []byte("quorum nobody\n")), "--entry", f.entries[3], f.proofs[3])
	if code != 1 || !strings.Contains(errOut, "FAILED policy") {
		t.Fatalf("bad policy: exit %d, %s", code, errOut)
	}
}

func mustV(t *testing.T, vkey string) note.Verifier {
	v, err := checkpoints.NewLogVerifier(vkey)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
