package testvectors

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"

	fnote "github.com/transparency-dev/formats/note"
	"golang.org/x/mod/sumdb/note"

	"github.com/annal-dev/annal/checkpoints"
	"github.com/annal-dev/annal/verifier"
)

const cosignaturesFile = "cosignatures.json"

// cosignatureVectors: Keys (the log's first, then witnesses) and, per
// vector, the checkpoint, the witness and the time are inputs; the
// witness's cosignature/v1 key, the signed message, the signature line and
// the cosigned checkpoint are computed.
type cosignatureVectors struct {
	Description string              `json:"description"`
	Keys        []keyVector         `json:"keys"`
	Witnesses   []cosignerKey       `json:"witnesses"`
	Vectors     []cosignatureVector `json:"vectors"`
	Rejects     []cosignatureReject `json:"rejects"`
}

// cosignerKey is a witness key in cosignature/v1 form (type 0x04).
type cosignerKey struct {
	Label       string `json:"label"`
	KeyID       string `json:"key_id"`
	VerifierKey string `json:"verifier_key"`
}

type cosignatureVector struct {
	Name     string `json:"name"`
	Witness  string `json:"witness"`
	Size     uint64 `json:"size"`
	RootHash string `json:"root_hash"`
	Time     uint64 `json:"time"`
	Message  string `json:"message"`
	SigLine  string `json:"signature_line"`
	Cosigned string `json:"cosigned_checkpoint"`
}

// cosignatureReject: the cosigned checkpoint of vector From with Old
// replaced by New; a verifier holding the policy of the log and the
// witness, quorum the witness, MUST refuse it.
type cosignatureReject struct {
	Name   string `json:"name"`
	Reason string `json:"reason"`
	From   string `json:"from"`
	Old    string `json:"old,omitempty"`
	New    string `json:"new,omitempty"`
	// NewTime, if set, rewrites the time inside the witness's signature
	// line, keeping the signature bytes.
	NewTime  uint64 `json:"new_time,omitempty"`
	Cosigned string `json:"cosigned_checkpoint"`
	GoError  string `json:"go_error"`
}

// cosignByHand is a c2sp.org/tlog-cosignature cosignature/v1 signature
// line, from the specification alone: Ed25519 over "cosignature/v1\ntime
// <t>\n" and the checkpoint text; the line carries the key id of
// SHA-256(name || 0x0A || 0x04 || public key), then the time as 8 bytes
// big-endian, then the signature.
func cosignByHand(text string, w *noteKey, t uint64) (message, line string) {
	message = fmt.Sprintf("cosignature/v1\ntime %d\n%s", t, text)
	sig := binary.BigEndian.AppendUint32(nil, cosignerKeyID(w))
	sig = binary.BigEndian.AppendUint64(sig, t)
	sig = append(sig, ed25519.Sign(w.priv, []byte(message))...)
	return message, "— " + w.name + " " + base64.StdEncoding.EncodeToString(sig) + "\n"
}

func cosignerKeyID(w *noteKey) uint32 {
	pub := w.priv.Public().(ed25519.PublicKey)
	sum := sha256.Sum256(append([]byte(w.name+"\n\x04"), pub...))
	return binary.BigEndian.Uint32(sum[:4])
}

func cosignerVKey(w *noteKey) string {
	pub := w.priv.Public().(ed25519.PublicKey)
	return fmt.Sprintf("%s+%08x+%s", w.name, cosignerKeyID(w), base64.StdEncoding.EncodeToString(append([]byte{4}, pub...)))
}

func TestCosignatureVectors(t *testing.T) {
	var f cosignatureVectors
	load(t, cosignaturesFile, &f)
	keys := deriveKeys(t, cosignaturesFile, f.Keys)
	log := keys[f.Keys[0].Label]
	for i := range f.Witnesses {
		w := &f.Witnesses[i]
		k := keys[w.Label]
		if k == nil {
			t.Fatalf("witness %q has no key", w.Label)
		}
		expect(t, cosignaturesFile, w.Label, "key_id", &w.KeyID, fmt.Sprintf("%08x", cosignerKeyID(k)))
		expect(t, cosignaturesFile, w.Label, "verifier_key", &w.VerifierKey, cosignerVKey(k))
		if lib, err := fnote.VKeyToCosignatureV1(k.vkey); err != nil || lib != w.VerifierKey {
			t.Errorf("witness %q: transparency-dev/formats makes the key %q (%v)", w.Label, lib, err)
		}
	}
	cosigned := map[string]string{}
	for i := range f.Vectors {
		v := &f.Vectors[i]
		w := keys[v.Witness]
		root, err := checkpoints.ParseHash(v.RootHash)
		if err != nil || w == nil {
			t.Fatalf("vector %q: bad inputs", v.Name)
		}
		text := string(checkpoints.Checkpoint{Origin: log.name, Size: v.Size, Hash: root}.Marshal())
		message, line := cosignByHand(text, w, v.Time)
		signed := signByHand(text, log) + line
		expect(t, cosignaturesFile, v.Name, "message", &v.Message, message)
		expect(t, cosignaturesFile, v.Name, "signature_line", &v.SigLine, line)
		expect(t, cosignaturesFile, v.Name, "cosigned_checkpoint", &v.Cosigned, signed)
		cosigned[v.Name] = signed
		// transparency-dev/formats verifies it and reads the time back.
		cv, err := fnote.NewVerifierForCosignatureV1(cosignerVKey(w))
		if err != nil {
			t.Fatal(err)
		}
		n, err := note.Open([]byte(signed), note.VerifierList(log.verifier, cv))
		if err != nil || len(n.Sigs) != 2 {
			t.Fatalf("vector %q: x/mod note with formats' verifier: %v", v.Name, err)
		}
		if ts, err := fnote.CoSigV1Timestamp(n.Sigs[1]); err != nil || uint64(ts.Unix()) != v.Time {
			t.Errorf("vector %q: formats reads the time %v (%v)", v.Name, ts, err)
		}
		// Annal's verifier accepts it under a policy whose quorum is the witness.
		p := witnessPolicy(t, log, w, v.Witness)
		pr, err := p.OpenCheckpoint([]byte(signed))
		if err != nil || strings.Join(pr.Cosigners, ",") != v.Witness {
			t.Errorf("vector %q: policy: %v, cosigners %v", v.Name, err, pr)
		}
	}
	for i := range f.Rejects {
		r := &f.Rejects[i]
		from, ok := cosigned[r.From]
		if !ok || !strings.Contains(from, r.Old) || r.Reason == "" {
			t.Fatalf("reject %q: bad inputs", r.Name)
		}
		bad := strings.Replace(from, r.Old, r.New, 1)
		if r.NewTime != 0 {
			bad = retime(t, bad, r.NewTime)
		}
		expect(t, cosignaturesFile, r.Name, "cosigned_checkpoint", &r.Cosigned, bad)
		var witness string
		for _, v := range f.Vectors {
			if v.Name == r.From {
				witness = v.Witness
			}
		}
		_, err := witnessPolicy(t, log, keys[witness], witness).OpenCheckpoint([]byte(bad))
		if err == nil {
			t.Errorf("reject %q (%s): accepted", r.Name, r.Reason)
			continue
		}
		expect(t, cosignaturesFile, r.Name, "go_error", &r.GoError, err.Error())
	}
	save(t, cosignaturesFile, &f)
}

func witnessPolicy(t *testing.T, log, w *noteKey, name string) *verifier.Policy {
	t.Helper()
	p, err := verifier.ParsePolicy([]byte(fmt.Sprintf("log %s\nwitness %s %s\nquorum %s\n", log.vkey, name, cosignerVKey(w), name)))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// retime rewrites the time of the last signature line (a cosignature),
// keeping its key id and signature bytes.
func retime(t *testing.T, signed string, time uint64) string {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(signed, "\n"), "\n")
	last := lines[len(lines)-1]
	i := strings.LastIndexByte(last, ' ')
	sig, err := base64.StdEncoding.DecodeString(last[i+1:])
	if err != nil || len(sig) != 4+8+ed25519.SignatureSize {
		t.Fatalf("%q is not a cosignature/v1 line", last)
	}
	binary.BigEndian.PutUint64(sig[4:12], time)
	lines[len(lines)-1] = last[:i+1] + base64.StdEncoding.EncodeToString(sig)
	return strings.Join(lines, "\n") + "\n"
}
