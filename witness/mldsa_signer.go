package witness

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/cloudflare/circl/sign/mldsa/mldsa44"
	"github.com/transparency-dev/formats/log"
)

// mldsaSigner is the witness's ML-DSA-44 note signer: the cosignature/v1
// subtree signature of c2sp.org/tlog-cosignature, exactly as
// transparency-dev/formats makes it (its NewMLDSASigner gives the name and
// key hash; its verifier checks every line, in tests and in every client),
// but signed with Cloudflare's circl, whose ML-DSA-44 signs 2.3–3.5x
// faster than filippo.io/mldsa (the port of Go's FIPS 140 ML-DSA) on these
// machines: 96 against 348 µs a signature once; on 2026-11-28, 3,000
// signatures each, interleaved, on a loaded machine, p50 114–120 µs
// against 254–274 µs, p90 320–415 against 900–1,170 µs. ML-DSA signing is
// the largest part of a witness's CPU per cosignature (about 40% with one
// client).
//
// The signing is hedged (FIPS 204's default: fresh randomness mixed with
// the key and the message). Deterministic signing costs the same here
// (circl and filippo.io/mldsa give the same deterministic bytes, and
// neither is faster that way), so there is nothing to gain by giving up
// the randomness. The time of one signature varies with the number of
// rounds of its rejection loop (4.25 on average for ML-DSA-44, each round
// some 30 µs here): p90 is three times p50. What does not depend on the
// message is computed once, when the key is made: circl's private key
// holds the expanded matrix A and the NTT forms of s1, s2 and t0, and
// each Sign starts from them.
//
// With one client the line is made by the request's own goroutine while
// its journal write is under way (commitAlone); the signature (0.16 ms of
// CPU on average) and the write (0.135 ms on the device) then overlap,
// and only a long rejection loop shows in the answer's latency. Two ways
// to take even that off were measured on 2026-11-28 (two vCPUs,
// annal-witness-bench --logs 1, interleaved with the build without them)
// and both lost: signing speculatively from the moment the request is
// parsed, on a goroutine of its own (whichever of it and the request came
// to the line first made it), p50 0.41–0.48 ms against 0.37–0.47 ms,
// higher in seven of eight pairs; and racing two hedged signatures of
// the line on two goroutines, the first one answered, p50 0.60–0.69 ms
// against 0.39–0.43 ms. A goroutine woken on the other processor costs more here
// (a sleeping virtual CPU to wake, a second wake-up to hand the line
// back) than the rounds it saves, and the loser of a race takes a
// processor from the next request. circl signs only whole signatures, so
// its rounds cannot be shared between processors without a fork.
type mldsaSigner struct {
	name string
	hash uint32
	key  *mldsa44.PrivateKey
	now  func() time.Time
}

func newMLDSASigner(name string, hash uint32, seed []byte) (*mldsaSigner, error) {
	if len(seed) != mldsa44.SeedSize {
		return nil, fmt.Errorf("ML-DSA-44 seed is %d bytes, not %d", len(seed), mldsa44.SeedSize)
	}
	_, key := mldsa44.NewKeyFromSeed((*[mldsa44.SeedSize]byte)(seed))
	return &mldsaSigner{name: name, hash: hash, key: key, now: time.Now}, nil
}

func (s *mldsaSigner) Name() string    { return s.name }
func (s *mldsaSigner) KeyHash() uint32 { return s.hash }

// Sign signs the checkpoint msg as the subtree [0, size) of its origin, at
// the current time: timestamp || ML-DSA-44 signature.
func (s *mldsaSigner) Sign(msg []byte) ([]byte, error) {
	var c log.Checkpoint
	if _, err := c.Unmarshal(msg); err != nil {
		return nil, err
	}
	sig := make([]byte, 8+mldsa44.SignatureSize)
	if err := s.signTo(sig, c.Origin, c.Size, c.Hash); err != nil {
		return nil, err
	}
	return sig, nil
}

// signTo writes into sig (8+mldsa44.SignatureSize bytes) the signature of
// the checkpoint (origin, size, hash) that Sign makes of its text.
func (s *mldsaSigner) signTo(sig []byte, origin string, size uint64, hash []byte) error {
	t := uint64(s.now().Unix())
	m, err := subtreeMessage(s.name, t, origin, 0, size, hash)
	if err != nil {
		return err
	}
	binary.BigEndian.PutUint64(sig, t)
	return mldsa44.SignTo(s.key, m, nil, true, sig[8:])
}

// line is the note signature line note.Sign makes with s on the text of
// the checkpoint (origin, size, hash), "— <name> <base64(key hash ||
// signature)>\n", made without parsing the text again and without building
// the signed note around it: the line alone is 3.3 KB of base64, which
// note.Sign encodes, copies into the note, and the caller cut out again.
func (s *mldsaSigner) line(origin string, size uint64, hash []byte) ([]byte, error) {
	raw := make([]byte, 4+8+mldsa44.SignatureSize)
	binary.BigEndian.PutUint32(raw, s.hash)
	if err := s.signTo(raw[4:], origin, size, hash); err != nil {
		return nil, err
	}
	out := make([]byte, 0, s.lineSize())
	out = append(out, noteSignaturePrefix...)
	out = append(out, s.name...)
	out = append(out, ' ')
	out = base64.StdEncoding.AppendEncode(out, raw)
	return append(out, '\n'), nil
}

// lineSize is the size of every line s makes.
func (s *mldsaSigner) lineSize() int {
	return len(noteSignaturePrefix) + len(s.name) + 1 + base64.StdEncoding.EncodedLen(4+8+mldsa44.SignatureSize) + 1
}

// subtreeMessage is the signed message of c2sp.org/tlog-cosignature's
// subtree signatures, the TLS presentation of
//
//	struct {
//	    uint8 label[12] = "subtree/v1\n\0";
//	    opaque cosigner_name<1..2^8-1>;
//	    uint64 timestamp;
//	    opaque log_origin<1..2^8-1>;
//	    uint64 start;
//	    uint64 end;
//	    uint8 hash[32];
//	} cosigned_message;
func subtreeMessage(name string, timestamp uint64, origin string, start, end uint64, hash []byte) ([]byte, error) {
	switch {
	case len(name) == 0 || len(name) > 255 || len(origin) == 0 || len(origin) > 255:
		return nil, errors.New("cosigner name and log origin are 1 to 255 bytes")
	case len(hash) != 32:
		return nil, errors.New("the root hash is 32 bytes")
	case start > 0 && timestamp > 0:
		return nil, errors.New("a subtree that does not start at 0 has timestamp 0")
	}
	const label = "subtree/v1\n\x00"
	m := make([]byte, 0, len(label)+1+len(name)+8+1+len(origin)+8+8+32)
	m = append(m, label...)
	m = append(m, byte(len(name)))
	m = append(m, name...)
	m = binary.BigEndian.AppendUint64(m, timestamp)
	m = append(m, byte(len(origin)))
	m = append(m, origin...)
	m = binary.BigEndian.AppendUint64(m, start)
	m = binary.BigEndian.AppendUint64(m, end)
	return append(m, hash...), nil
}
