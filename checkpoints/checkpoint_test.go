package checkpoints

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"reflect"
	"strings"
	"testing"

	"golang.org/x/mod/sumdb/note"
)

var (
	testRoot    = sha256.Sum256([]byte("test root"))
	testRoot64  = base64.StdEncoding.EncodeToString(testRoot[:])
	testBody    = testOrigin + "\n7\n" + testRoot64 + "\n"
	zeroHash64  = base64.StdEncoding.EncodeToString(make([]byte, 32))
	shortHash64 = base64.StdEncoding.EncodeToString(make([]byte, 31))
	longHash64  = base64.StdEncoding.EncodeToString(make([]byte, 33))
)

func TestParseCheckpointBody_Valid(t *testing.T) {
	for _, tc := range []struct {
		name string
		body string
		want Checkpoint
	}{
		{"plain", testBody, Checkpoint{Origin: testOrigin, Size: 7, Hash: testRoot}},
		{"size zero", "o\n0\n" + zeroHash64 + "\n", Checkpoint{Origin: "o", Size: 0}},
		{"largest size", "o\n18446744073709551615\n" + zeroHash64 + "\n", Checkpoint{Origin: "o", Size: 1<<64 - 1}},
		{"extension lines", testBody + "ext one\n— ext two\n", Checkpoint{Origin: testOrigin, Size: 7, Hash: testRoot, Extensions: []string{"ext one", "— ext two"}}},
		{"unicode origin", "日本.example\n1\n" + testRoot64 + "\n", Checkpoint{Origin: "日本.example", Size: 1, Hash: testRoot}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseCheckpointBody([]byte(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
			if m := string(got.Marshal()); m != tc.body {
				t.Errorf("Marshal = %q, want the input %q", m, tc.body)
			}
		})
	}
}

func TestParseCheckpointBody_Rejects(t *testing.T) {
	for _, tc := range []struct {
		name, body, wantErr string
	}{
		{"empty", "", "does not end with a newline"},
		{"no trailing newline", strings.TrimSuffix(testBody, "\n"), "does not end with a newline"},
		{"two lines", testOrigin + "\n7\n", "has 2 lines, want at least 3"},
		{"one line", testOrigin + "\n", "has 1 lines, want at least 3"},
		{"empty origin", "\n7\n" + testRoot64 + "\n", "checkpoint origin: origin is empty"},
		{"origin with space", "a b\n7\n" + testRoot64 + "\n", "checkpoint origin: origin \"a b\" contains a space"},
		{"origin with CR", testOrigin + "\r\n7\n" + testRoot64 + "\n", "checkpoint origin: origin \"log.annal.example/test\\r\" contains a space or control character"},
		{"origin with plus", "a+b\n7\n" + testRoot64 + "\n", "contains '+'"},
		{"size leading zero", testOrigin + "\n01\n" + testRoot64 + "\n", "checkpoint size: number \"01\" has a leading zero"},
		{"size 00", testOrigin + "\n00\n" + testRoot64 + "\n", "checkpoint size: number \"00\" has a leading zero"},
		{"size empty", testOrigin + "\n\n" + testRoot64 + "\n", "checkpoint size: empty number"},
		{"size signed", testOrigin + "\n+7\n" + testRoot64 + "\n", "checkpoint size: number \"+7\" is not plain decimal"},
		{"size negative", testOrigin + "\n-7\n" + testRoot64 + "\n", "checkpoint size: number \"-7\" is not plain decimal"},
		{"size with space", testOrigin + "\n7 \n" + testRoot64 + "\n", "checkpoint size: number \"7 \" is not plain decimal"},
		{"size with CR", testOrigin + "\n7\r\n" + testRoot64 + "\n", "checkpoint size: number \"7\\r\" is not plain decimal"},
		{"size hex", testOrigin + "\n0x7\n" + testRoot64 + "\n", "checkpoint size: number \"0x7\" has a leading zero"},
		{"size overflow", testOrigin + "\n18446744073709551616\n" + testRoot64 + "\n", "checkpoint size: number \"18446744073709551616\" does not fit in 64 bits"},
		{"hash not base64", testOrigin + "\n7\n!!!!" + testRoot64[4:] + "\n", "checkpoint root hash: hash \"!!!!"},
		{"hash unpadded", testOrigin + "\n7\n" + strings.TrimRight(testRoot64, "=") + "\n", "is not standard base64"},
		{"hash URL alphabet", testOrigin + "\n7\n" + strings.NewReplacer("+", "-", "/", "_").Replace(base64.StdEncoding.EncodeToString([]byte(strings.Repeat("\xfb\xff", 16)))) + "\n", "is not standard base64"},
		{"hash with non-zero padding bits", testOrigin + "\n7\n" + zeroHash64[:42] + "B=\n", "is not standard base64"},
		{"hash with CR", testOrigin + "\n7\n" + testRoot64 + "\r\n", "is not standard base64: line break at offset 44"},
		{"hash with inner CR", testOrigin + "\n7\n" + testRoot64[:20] + "\r" + testRoot64[20:] + "\n", "is not standard base64: line break at offset 20"},
		{"hash 31 bytes", testOrigin + "\n7\n" + shortHash64 + "\n", "checkpoint root hash: hash is 31 bytes, want 32"},
		{"hash 33 bytes", testOrigin + "\n7\n" + longHash64 + "\n", "checkpoint root hash: hash is 33 bytes, want 32"},
		{"hash empty", testOrigin + "\n7\n\n", "checkpoint root hash: hash is 0 bytes, want 32"},
		{"blank extension line", testBody + "\n", "checkpoint extension line 1 is empty"},
		{"blank second extension line", testBody + "ext\n\n", "checkpoint extension line 2 is empty"},
		{"blank line then signature", testBody + "\n— " + testOrigin + " AAAA\n", "checkpoint extension line 1 is empty"},
		{"extension with CR", testBody + "ext\r\n", "checkpoint extension line 1 is not UTF-8 text without control characters"},
		{"extension with NUL", testBody + "a\x00b\n", "checkpoint extension line 1 is not UTF-8 text without control characters"},
		{"extension not UTF-8", testBody + "ok\n\xff\n", "checkpoint extension line 2 is not UTF-8 text without control characters"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := ParseCheckpointBody([]byte(tc.body))
			if err == nil {
				t.Fatalf("accepted %q as %+v", tc.body, c)
			}
			if !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("error %q does not say %q", err, tc.wantErr)
			}
		})
	}
}

func TestCheckpointMarshal_RoundTrip(t *testing.T) {
	for _, c := range []Checkpoint{
		{Origin: testOrigin, Size: 0},
		{Origin: testOrigin, Size: 12345, Hash: testRoot},
		{Origin: "o", Size: 1<<64 - 1, Hash: testRoot, Extensions: []string{"a", "b c"}},
	} {
		body := c.Marshal()
		got, err := ParseCheckpointBody(body)
		if err != nil {
			t.Fatalf("%q: %v", body, err)
		}
		if !reflect.DeepEqual(got, c) {
			t.Errorf("%q parses as %+v, want %+v", body, got, c)
		}
	}
}

// signNote signs text as is, without the checks SignCheckpoint makes, so
// tests can produce notes that a careless log could have signed.
func signNote(t testing.TB, text string, skeys ...string) []byte {
	t.Helper()
	var signers []note.Signer
	for _, k := range skeys {
		signers = append(signers, mustSigner(t, k))
	}
	signed, err := note.Sign(&note.Note{Text: text}, signers...)
	if err != nil {
		t.Fatal(err)
	}
	return signed
}

func TestSignCheckpoint(t *testing.T) {
	skey, vkey := fixedKey(testOrigin, 0)
	c := Checkpoint{Origin: testOrigin, Size: 7, Hash: testRoot, Extensions: []string{"ext"}}
	signed, err := SignCheckpoint(c, mustSigner(t, skey))
	if err != nil {
		t.Fatal(err)
	}
	// The note is the body, a blank line and one signature line by the key.
	body, sigs, ok := bytes.Cut(signed, []byte("\n\n"))
	if !ok || string(body)+"\n" != string(c.Marshal()) {
		t.Fatalf("signed note %q does not start with the body %q and a blank line", signed, c.Marshal())
	}
	if !bytes.HasPrefix(sigs, []byte("— "+testOrigin+" ")) || bytes.Count(sigs, []byte("\n")) != 1 {
		t.Errorf("signature lines %q are not one line by %s", sigs, testOrigin)
	}
	n, err := note.Open(signed, note.VerifierList(mustVerifier(t, vkey)))
	if err != nil {
		t.Fatalf("x/mod note does not open the signed checkpoint: %v", err)
	}
	if n.Text != string(c.Marshal()) {
		t.Errorf("note text %q, want %q", n.Text, c.Marshal())
	}
	again, _ := SignCheckpoint(c, mustSigner(t, skey))
	if !bytes.Equal(again, signed) {
		t.Error("signing twice gives different notes; Ed25519 is deterministic")
	}
}

func TestSignCheckpoint_RefusesOtherOrigin(t *testing.T) {
	skey, _ := fixedKey("log.annal.example/other", 0)
	_, err := SignCheckpoint(Checkpoint{Origin: testOrigin, Size: 1}, mustSigner(t, skey))
	if err == nil || !strings.Contains(err.Error(), `signer "log.annal.example/other" cannot sign a checkpoint of origin "log.annal.example/test"`) {
		t.Errorf("SignCheckpoint = %v, want a refusal naming signer and origin", err)
	}
}

func TestOpenCheckpoint(t *testing.T) {
	skey, vkey := fixedKey(testOrigin, 0)
	witnessSkey, witnessVkey := fixedKey("witness.example", 0x40)
	otherSkey, otherVkey := fixedKey(testOrigin, 0x80) // same name, other key
	signed := signNote(t, testBody, skey)

	t.Run("good signature", func(t *testing.T) {
		sc, err := OpenCheckpoint(signed, mustVerifier(t, vkey))
		if err != nil {
			t.Fatal(err)
		}
		want := Checkpoint{Origin: testOrigin, Size: 7, Hash: testRoot}
		if !reflect.DeepEqual(sc.Checkpoint, want) {
			t.Errorf("checkpoint %+v, want %+v", sc.Checkpoint, want)
		}
		if !bytes.Equal(sc.Raw, signed) || len(sc.Note.Sigs) != 1 || sc.Note.Text != testBody {
			t.Errorf("Raw %q, Sigs %d, Text %q: not the note as signed", sc.Raw, len(sc.Note.Sigs), sc.Note.Text)
		}
	})

	t.Run("unknown extra signature ignored", func(t *testing.T) {
		cosigned := signNote(t, testBody, skey, witnessSkey)
		sc, err := OpenCheckpoint(cosigned, mustVerifier(t, vkey))
		if err != nil {
			t.Fatal(err)
		}
		if len(sc.Note.Sigs) != 1 || sc.Note.Sigs[0].Name != testOrigin {
			t.Errorf("Sigs = %+v, want only the log's", sc.Note.Sigs)
		}
		if len(sc.Note.UnverifiedSigs) != 1 || sc.Note.UnverifiedSigs[0].Name != "witness.example" {
			t.Errorf("UnverifiedSigs = %+v, want the witness's", sc.Note.UnverifiedSigs)
		}
	})

	t.Run("other verifier kept", func(t *testing.T) {
		cosigned := signNote(t, testBody, skey, witnessSkey)
		sc, err := OpenCheckpoint(cosigned, mustVerifier(t, vkey), mustVerifier(t, witnessVkey))
		if err != nil {
			t.Fatal(err)
		}
		if len(sc.Note.Sigs) != 2 {
			t.Errorf("Sigs = %+v, want the log's and the witness's", sc.Note.Sigs)
		}
	})

	for _, tc := range []struct {
		name    string
		signed  []byte
		vkey    string
		others  []string
		wantErr string
	}{
		{"wrong key", signed, otherVkey, nil, `checkpoint has no signature by log key "log.annal.example/test"`},
		{"signed by another key of the same name", signNote(t, testBody, otherSkey), vkey, nil, `checkpoint has no signature by log key "log.annal.example/test"`},
		{"only a witness signature", signNote(t, testBody, witnessSkey), vkey, []string{witnessVkey}, `checkpoint has no signature by log key "log.annal.example/test"`},
		{"origin is not the key name", signNote(t, "log.annal.example/elsewhere\n7\n"+testRoot64+"\n", skey), vkey, nil,
			`checkpoint origin "log.annal.example/elsewhere" is not the log key's name "log.annal.example/test"`},
		{"tampered size", bytes.Replace(signed, []byte("\n7\n"), []byte("\n8\n"), 1), vkey, nil, `checkpoint signature by "log.annal.example/test" does not verify`},
		{"tampered signature", flipLastSigByte(signed), vkey, nil, `checkpoint signature by "log.annal.example/test" does not verify`},
		{"signed body does not parse", signNote(t, testOrigin+"\n07\n"+testRoot64+"\n", skey), vkey, nil, `checkpoint size: number "07" has a leading zero`},
		{"no signature", []byte(testBody + "\n"), vkey, nil, "checkpoint is not a well-formed signed note"},
		{"no blank line", []byte(testBody), vkey, nil, "checkpoint is not a well-formed signed note"},
		{"CR in note", bytes.Replace(signed, []byte("\n7\n"), []byte("\n7\r\n"), 1), vkey, nil, "checkpoint is not a well-formed signed note"},
		{"oversize", append(bytes.Repeat([]byte("x"), MaxCheckpointSize+1-len(signed)), signed...), vkey, nil, "checkpoint is 16385 bytes, more than the limit of 16384"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var others []note.Verifier
			for _, k := range tc.others {
				others = append(others, mustVerifier(t, k))
			}
			sc, err := OpenCheckpoint(tc.signed, mustVerifier(t, tc.vkey), others...)
			if err == nil {
				t.Fatalf("opened %q as %+v", tc.signed, sc.Checkpoint)
			}
			if !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("error %q does not say %q", err, tc.wantErr)
			}
		})
	}
}

// TestOpenCheckpoint_SizeLimitIsInclusive checks that a note of exactly
// MaxCheckpointSize bytes is opened: only larger ones are refused unread.
func TestOpenCheckpoint_SizeLimitIsInclusive(t *testing.T) {
	skey, vkey := fixedKey(testOrigin, 0)
	one := signNote(t, testBody+"x\n", skey)
	ext := strings.Repeat("x", MaxCheckpointSize-len(one)+1)
	signed := signNote(t, testBody+ext+"\n", skey)
	if len(signed) != MaxCheckpointSize {
		t.Fatalf("test note is %d bytes, want %d", len(signed), MaxCheckpointSize)
	}
	if _, err := OpenCheckpoint(signed, mustVerifier(t, vkey)); err != nil {
		t.Errorf("a note of exactly MaxCheckpointSize bytes is refused: %v", err)
	}
}

func flipLastSigByte(signed []byte) []byte {
	out := bytes.Clone(signed)
	// The last signature line ends "<base64>\n"; change a base64 digit in
	// the middle of the Ed25519 signature, keeping the encoding valid.
	i := len(out) - 10
	if out[i] == 'A' {
		out[i] = 'B'
	} else {
		out[i] = 'A'
	}
	return out
}
