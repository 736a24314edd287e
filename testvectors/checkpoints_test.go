package testvectors

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"reflect"
	"strings"
	"testing"

	formatslog "github.com/transparency-dev/formats/log"
	"golang.org/x/mod/sumdb/note"

	"github.com/annal-dev/annal/checkpoints"
)

const checkpointsFile = "checkpoints.json"

type checkpointVectors struct {
	Description string             `json:"description"`
	Keys        []keyVector        `json:"keys"`
	Vectors     []checkpointVector `json:"vectors"`
	Rejects     []checkpointReject `json:"rejects"`
}

// checkpointVector: Signers (key labels, the log's first), Origin, Size,
// RootHashHex and Extensions are inputs; Body and SignedNote are expected.
type checkpointVector struct {
	Name        string   `json:"name"`
	Signers     []string `json:"signers"`
	Origin      string   `json:"origin"`
	Size        uint64   `json:"size"`
	RootHashHex string   `json:"root_hash_hex"`
	Extensions  []string `json:"extensions,omitempty"`
	Body        string   `json:"body"`
	SignedNote  string   `json:"signed_note"`
}

// checkpointReject is a signed note that a reader trusting the key Verifier
// MUST refuse: Text signed as is by Signers, then the first Old in the
// signed note replaced by New. SignedNote and GoError are computed.
type checkpointReject struct {
	Name       string   `json:"name"`
	Reason     string   `json:"reason"`
	Signers    []string `json:"signers"`
	Text       string   `json:"text"`
	Old        string   `json:"old,omitempty"`
	New        string   `json:"new,omitempty"`
	Verifier   string   `json:"verifier"`
	SignedNote string   `json:"signed_note"`
	GoError    string   `json:"go_error"`
}

func TestCheckpointVectors(t *testing.T) {
	var f checkpointVectors
	load(t, checkpointsFile, &f)
	if len(f.Vectors) == 0 || len(f.Rejects) == 0 {
		t.Fatalf("%s has %d vectors and %d rejects", checkpointsFile, len(f.Vectors), len(f.Rejects))
	}
	keys := deriveKeys(t, checkpointsFile, f.Keys)
	for i := range f.Vectors {
		v := &f.Vectors[i]
		signers, ok := keysOf(t, keys, v.Name, v.Signers)
		if !ok {
			continue
		}
		root, err := hex.DecodeString(v.RootHashHex)
		if err != nil || len(root) != 32 {
			t.Errorf("vector %q: root_hash_hex is not 32 bytes of hex", v.Name)
			continue
		}
		c := checkpoints.Checkpoint{Origin: v.Origin, Size: v.Size, Hash: [32]byte(root), Extensions: v.Extensions}
		body := string(c.Marshal())
		byHand := fmt.Sprintf("%s\n%d\n%s\n", v.Origin, v.Size, base64.StdEncoding.EncodeToString(root))
		for _, e := range v.Extensions {
			byHand += e + "\n"
		}
		if body != byHand {
			t.Errorf("vector %q: Checkpoint.Marshal = %q, c2sp.org/tlog-checkpoint by hand = %q", v.Name, body, byHand)
		}
		expect(t, checkpointsFile, v.Name, "body", &v.Body, body)

		signed := signByHand(body, signers...)
		if lib := mustSignNote(t, body, signers); lib != signed {
			t.Errorf("vector %q: x/mod note signs\n%q\nby hand\n%q", v.Name, lib, signed)
		}
		if len(signers) == 1 {
			ours, err := checkpoints.SignCheckpoint(c, signers[0].signer)
			if err != nil || string(ours) != signed {
				t.Errorf("vector %q: checkpoints.SignCheckpoint = %q, %v; by hand %q", v.Name, ours, err, signed)
			}
		}
		expect(t, checkpointsFile, v.Name, "signed_note", &v.SignedNote, signed)
		openCheckpoint(t, v.Name, []byte(signed), signers[0], c)
	}
	for i := range f.Rejects {
		r := &f.Rejects[i]
		signers, ok := keysOf(t, keys, r.Name, r.Signers)
		if !ok {
			continue
		}
		verifier, ok := keys[r.Verifier]
		if !ok {
			t.Errorf("reject %q: no key %q", r.Name, r.Verifier)
			continue
		}
		signed := mustSignNote(t, r.Text, signers)
		if !strings.Contains(signed, r.Old) || r.Old != "" && r.Old == r.New {
			t.Errorf("reject %q: the signed note does not contain %q, or the change is empty", r.Name, r.Old)
			continue
		}
		if r.Old != "" {
			signed = strings.Replace(signed, r.Old, r.New, 1)
		}
		expect(t, checkpointsFile, r.Name, "signed_note", &r.SignedNote, signed)
		sc, err := checkpoints.OpenCheckpoint([]byte(signed), verifier.verifier)
		if err == nil {
			t.Errorf("reject %q (%s): OpenCheckpoint accepts it as %+v", r.Name, r.Reason, sc.Checkpoint)
			continue
		}
		expect(t, checkpointsFile, r.Name, "go_error", &r.GoError, err.Error())
	}
	save(t, checkpointsFile, &f)
}

func keysOf(t *testing.T, keys map[string]*noteKey, vector string, labels []string) ([]*noteKey, bool) {
	t.Helper()
	var out []*noteKey
	for _, l := range labels {
		k, ok := keys[l]
		if !ok {
			t.Errorf("vector %q: no key %q", vector, l)
			return nil, false
		}
		out = append(out, k)
	}
	if len(out) == 0 {
		t.Errorf("vector %q: no signers", vector)
		return nil, false
	}
	return out, true
}

// mustSignNote signs text with x/mod note, without Annal's checks, so that
// rejects can hold notes a careless log could sign.
func mustSignNote(t *testing.T, text string, keys []*noteKey) string {
	t.Helper()
	var signers []note.Signer
	for _, k := range keys {
		signers = append(signers, k.signer)
	}
	signed, err := note.Sign(&note.Note{Text: text}, signers...)
	if err != nil {
		t.Fatalf("signing %q: %v", text, err)
	}
	return string(signed)
}

// openCheckpoint reads a signed checkpoint with Annal's reader and with the
// transparency-dev/formats one, trusting only the log key, and checks that
// both read c.
func openCheckpoint(t *testing.T, name string, signed []byte, log *noteKey, c checkpoints.Checkpoint) {
	t.Helper()
	sc, err := checkpoints.OpenCheckpoint(signed, log.verifier)
	if err != nil {
		t.Errorf("vector %q: OpenCheckpoint: %v", name, err)
	} else if !reflect.DeepEqual(sc.Checkpoint, c) {
		t.Errorf("vector %q: OpenCheckpoint reads %+v, want %+v", name, sc.Checkpoint, c)
	}
	theirs, rest, _, err := formatslog.ParseCheckpoint(signed, log.name, log.verifier)
	if err != nil {
		t.Errorf("vector %q: formats log.ParseCheckpoint: %v", name, err)
		return
	}
	wantRest := strings.Join(c.Extensions, "\n")
	if len(c.Extensions) > 0 {
		wantRest += "\n"
	}
	if theirs.Origin != c.Origin || theirs.Size != c.Size || !bytes.Equal(theirs.Hash, c.Hash[:]) || string(rest) != wantRest {
		t.Errorf("vector %q: formats reads %+v and extensions %q", name, theirs, rest)
	}
}
