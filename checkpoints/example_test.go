package checkpoints_test

import (
	"encoding/base64"
	"fmt"
	"strings"

	"github.com/annal-dev/annal/checkpoints"
)

// The log key of the repository's test vectors (testvectors/*.json): its
// seed is the bytes 0x00 to 0x1f, so it is public and its signatures are
// known answers. A real log keeps its private key secret.
const (
	vectorsSKey = "PRIVATE+KEY+log.annal.example/vectors+0124a124+AQABAgMEBQYHCAkKCwwNDg8QERITFBUWFxgZGhscHR4f"
	vectorsVKey = "log.annal.example/vectors+0124a124+AQOhB7/zzhC+HXDdGOdLwJln5NYwm6UNXx3chmQSVTG4"
)

// A log's key is named after its origin; the verifier key, which auditors
// and witnesses use, derives from the private key.
func ExampleGenerateLogKey() {
	skey, vkey, err := checkpoints.GenerateLogKey("log.example/demo")
	if err != nil {
		fmt.Println(err)
		return
	}
	derived, err := checkpoints.VerifierKeyOf(skey)
	if err != nil {
		fmt.Println(err)
		return
	}
	v, err := checkpoints.NewLogVerifier(vkey)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(v.Name(), derived == vkey)

	// A key name may not hold a space: it is a checkpoint's first line.
	_, _, err = checkpoints.GenerateLogKey("log.example/my demo")
	fmt.Println(err)
	// Output:
	// log.example/demo true
	// origin "log.example/my demo" contains a space or control character
}

// A checkpoint is the log's origin, size and root hash, signed as a
// c2sp.org/signed-note. Ed25519 signatures are deterministic, so this is
// the test vectors' checkpoint of their seven entries byte for byte.
func ExampleSignCheckpoint() {
	signer, err := checkpoints.NewLogSigner(vectorsSKey)
	if err != nil {
		fmt.Println(err)
		return
	}
	root, err := checkpoints.ParseHash("3k2gEukQVDO7YuTYzqaI4RWfVXHdsfDxArHua9P6ZK0=")
	if err != nil {
		fmt.Println(err)
		return
	}
	signed, err := checkpoints.SignCheckpoint(checkpoints.Checkpoint{Origin: "log.annal.example/vectors", Size: 7, Hash: root}, signer)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Print(string(signed))
	// Output:
	// log.annal.example/vectors
	// 7
	// 3k2gEukQVDO7YuTYzqaI4RWfVXHdsfDxArHua9P6ZK0=
	//
	// — log.annal.example/vectors ASShJLwNehsGGUD2B+VY7Y/YS8FJX9DxpVrDhK/aRSHAxGxJ30KavY9stj87IOkdtfEM7UIz3HkKXhmXfzju9Q0Ssgg=
}

// Opening a checkpoint checks the log's signature and parses the body
// strictly; anything else, a changed byte included, is refused.
func ExampleOpenCheckpoint() {
	signed := []byte("log.annal.example/vectors\n7\n3k2gEukQVDO7YuTYzqaI4RWfVXHdsfDxArHua9P6ZK0=\n\n" +
		"— log.annal.example/vectors ASShJLwNehsGGUD2B+VY7Y/YS8FJX9DxpVrDhK/aRSHAxGxJ30KavY9stj87IOkdtfEM7UIz3HkKXhmXfzju9Q0Ssgg=\n")
	v, err := checkpoints.NewLogVerifier(vectorsVKey)
	if err != nil {
		fmt.Println(err)
		return
	}
	cp, err := checkpoints.OpenCheckpoint(signed, v)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(cp.Origin, cp.Size, base64.StdEncoding.EncodeToString(cp.Hash[:]))

	_, err = checkpoints.OpenCheckpoint([]byte(strings.Replace(string(signed), "\n7\n", "\n8\n", 1)), v)
	fmt.Println(err)
	// Output:
	// log.annal.example/vectors 7 3k2gEukQVDO7YuTYzqaI4RWfVXHdsfDxArHua9P6ZK0=
	// checkpoint signature by "log.annal.example/vectors" does not verify
}

// A c2sp.org/tlog-proof carries an entry's index, its inclusion proof and
// the signed checkpoint. Parsing checks the layout only: the caller opens
// the checkpoint and checks the inclusion (package verifier does both).
func ExampleParseTLogProof() {
	proof := []byte("c2sp.org/tlog-proof@v1\n" +
		"index 3\n" +
		"+MehGKUTzoJ99pU/uwSxAbCtSWvE0y34f6B1T5dG2QQ=\n" +
		"u9VUsBHMyxIYEiO5fsfCbZsyeSQKyKAtTpfdHbePEk8=\n" +
		"H08DN4u57+a0v6LcjioSO7DzSt2rXtY5C2iSmRJGY3I=\n" +
		"\n" +
		"log.annal.example/vectors\n7\n3k2gEukQVDO7YuTYzqaI4RWfVXHdsfDxArHua9P6ZK0=\n\n" +
		"— log.annal.example/vectors ASShJLwNehsGGUD2B+VY7Y/YS8FJX9DxpVrDhK/aRSHAxGxJ30KavY9stj87IOkdtfEM7UIz3HkKXhmXfzju9Q0Ssgg=\n")
	p, err := checkpoints.ParseTLogProof(proof)
	if err != nil {
		fmt.Println(err)
		return
	}
	v, err := checkpoints.NewLogVerifier(vectorsVKey)
	if err != nil {
		fmt.Println(err)
		return
	}
	cp, err := checkpoints.OpenCheckpoint(p.Checkpoint, v)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("index %d, %d proof hashes, in a tree of %d entries\n", p.Index, len(p.Hashes), cp.Size)

	// Its text form is canonical: Marshal gives back the same bytes.
	fmt.Println(string(p.Marshal()) == string(proof))
	// Output:
	// index 3, 3 proof hashes, in a tree of 7 entries
	// true
}
