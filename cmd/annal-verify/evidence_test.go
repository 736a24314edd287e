package main

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/annal-dev/annal/checkpoints"
	"github.com/annal-dev/annal/format/evidence"
	"github.com/transparency-dev/merkle/rfc6962"
	"github.com/transparency-dev/merkle/testonly"
)

func TestEvidence(t *testing.T) {
	const origin = "example.com/annal/split"
	skey, vkey, err := checkpoints.GenerateLogKey(origin)
	if err != nil {
		t.Fatal(err)
	}
	signer, _ := checkpoints.NewLogSigner(skey)
	honest, forked := testonly.New(rfc6962.DefaultHasher), testonly.New(rfc6962.DefaultHasher)
	for i := range 9 {
		honest.AppendData([]byte(fmt.Sprintf("entry %d", i)))
		if i < 3 {
			forked.AppendData([]byte(fmt.Sprintf("entry %d", i)))
		} else {
			forked.AppendData([]byte(fmt.Sprintf("other %d", i)))
		}
	}
	sign := func(tree *testonly.Tree, size uint64) string {
		note, err := checkpoints.SignCheckpoint(checkpoints.Checkpoint{Origin: origin, Size: size, Hash: [32]byte(tree.HashAt(size))}, signer)
		if err != nil {
			t.Fatal(err)
		}
		return string(note)
	}
	ev := evidence.File{Format: evidence.Format, Origin: origin, LogKey: vkey,
		Checkpoints: [2]string{sign(honest, 5), sign(forked, 9)},
		PrefixRoot:  base64.StdEncoding.EncodeToString(forked.HashAt(5))}
	hashes, _ := forked.ConsistencyProof(5, 9)
	for _, h := range hashes {
		ev.ConsistencyProof = append(ev.ConsistencyProof, base64.StdEncoding.EncodeToString(h))
	}
	raw, _ := json.Marshal(ev)
	f := &fixture{dir: t.TempDir()}
	file := f.write("split.evidence", raw)
	code, out, errOut := runCLI("evidence", "--key", vkey, file)
	if code != 0 || !strings.Contains(out, "signed two histories") || !strings.Contains(out, "first 5 entries") {
		t.Fatalf("exit %d: %s%s", code, out, errOut)
	}
	if code, _, _ := runCLI("evidence", file); code != 0 {
		t.Fatal("evidence without --key refused")
	}
	// The honest extension is no evidence.
	ev.Checkpoints[1] = sign(honest, 9)
	ev.PrefixRoot = base64.StdEncoding.EncodeToString(honest.HashAt(5))
	hashes, _ = honest.ConsistencyProof(5, 9)
	ev.ConsistencyProof = nil
	for _, h := range hashes {
		ev.ConsistencyProof = append(ev.ConsistencyProof, base64.StdEncoding.EncodeToString(h))
	}
	raw, _ = json.Marshal(ev)
	code, _, errOut = runCLI("evidence", f.write("honest.evidence", raw))
	if code != 1 || !strings.Contains(errOut, "FAILED evidence") {
		t.Fatalf("honest pair: exit %d, %s", code, errOut)
	}
	_, other, _ := checkpoints.GenerateLogKey(origin)
	if code, _, errOut := runCLI("evidence", "--key", other, file); code != 1 || !strings.Contains(errOut, "FAILED verifier key") {
		t.Fatalf("another trusted key: exit %d, %s", code, errOut)
	}
}
