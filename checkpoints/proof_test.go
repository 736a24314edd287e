package checkpoints

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/transparency-dev/formats/proof"
)

func testHashes(n int) [][sha256.Size]byte {
	hs := make([][sha256.Size]byte, n)
	for i := range hs {
		hs[i] = sha256.Sum256([]byte{byte(i), byte(i >> 8)})
	}
	return hs
}

func hashLines(hs [][sha256.Size]byte) string {
	var b strings.Builder
	for _, h := range hs {
		b.WriteString(base64.StdEncoding.EncodeToString(h[:]) + "\n")
	}
	return b.String()
}

func testSignedCheckpoint(t testing.TB) []byte {
	skey, _ := fixedKey(testOrigin, 0)
	return signNote(t, testBody, skey)
}

func TestTLogProof_RoundTrip(t *testing.T) {
	cp := testSignedCheckpoint(t)
	for _, tc := range []struct {
		name string
		p    TLogProof
		text string
	}{
		{"no hashes", TLogProof{Index: 0, Checkpoint: cp},
			"c2sp.org/tlog-proof@v1\nindex 0\n\n" + string(cp)},
		{"three hashes", TLogProof{Index: 5, Hashes: testHashes(3), Checkpoint: cp},
			"c2sp.org/tlog-proof@v1\nindex 5\n" + hashLines(testHashes(3)) + "\n" + string(cp)},
		{"extra data", TLogProof{Extra: []byte("annal"), Index: 6, Hashes: testHashes(1), Checkpoint: cp},
			"c2sp.org/tlog-proof@v1\nextra YW5uYWw=\nindex 6\n" + hashLines(testHashes(1)) + "\n" + string(cp)},
		{"empty extra data", TLogProof{Extra: []byte{}, Index: 1, Checkpoint: cp},
			"c2sp.org/tlog-proof@v1\nextra \nindex 1\n\n" + string(cp)},
		{"largest index, most hashes", TLogProof{Index: 1<<64 - 1, Hashes: testHashes(MaxProofHashes), Checkpoint: cp},
			"c2sp.org/tlog-proof@v1\nindex 18446744073709551615\n" + hashLines(testHashes(MaxProofHashes)) + "\n" + string(cp)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := string(tc.p.Marshal()); got != tc.text {
				t.Fatalf("Marshal =\n%q\nwant\n%q", got, tc.text)
			}
			got, err := ParseTLogProof([]byte(tc.text))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.p) {
				t.Errorf("ParseTLogProof = %+v, want %+v", got, tc.p)
			}
		})
	}
}

// TestTLogProof_AgreesWithFormats checks the layout against the
// transparency-dev/formats implementation of c2sp.org/tlog-proof.
func TestTLogProof_AgreesWithFormats(t *testing.T) {
	cp := testSignedCheckpoint(t)
	for _, p := range []TLogProof{
		{Index: 3, Hashes: testHashes(3), Checkpoint: cp},
		{Extra: []byte{0, 1, 2, 0xff}, Index: 0, Checkpoint: cp},
	} {
		theirs := proof.TLogProof{Index: p.Index, Hashes: p.Hashes, Checkpoint: p.Checkpoint, ExtraData: p.Extra}
		if ours, want := p.Marshal(), theirs.Marshal(); !bytes.Equal(ours, want) {
			t.Errorf("Marshal =\n%q\nformats/proof writes\n%q", ours, want)
		}
		var back proof.TLogProof
		if err := back.Unmarshal(p.Marshal()); err != nil {
			t.Fatalf("formats/proof cannot read our proof: %v", err)
		}
		if back.Index != p.Index || !reflect.DeepEqual(back.Hashes, p.Hashes) || !bytes.Equal(back.Checkpoint, p.Checkpoint) || !bytes.Equal(back.ExtraData, p.Extra) {
			t.Errorf("formats/proof reads %+v, want %+v", back, p)
		}
	}
}

func TestParseTLogProof_Rejects(t *testing.T) {
	cp := string(testSignedCheckpoint(t))
	h := hashLines(testHashes(2))
	const hdr = "c2sp.org/tlog-proof@v1\n"
	for _, tc := range []struct {
		name, text, wantErr string
	}{
		{"empty", "", `tlog-proof does not start with the line "c2sp.org/tlog-proof@v1"`},
		{"wrong header", "c2sp.org/tlog-proof@v2\nindex 1\n\n" + cp, `does not start with the line "c2sp.org/tlog-proof@v1"`},
		{"header with CR", "c2sp.org/tlog-proof@v1\r\nindex 1\n\n" + cp, `does not start with the line`},
		{"header only, no newline", "c2sp.org/tlog-proof@v1", `does not start with the line`},
		{"ends after header", hdr, "tlog-proof ends after its header"},
		{"ends after extra", hdr + "extra AA==\n", "tlog-proof ends after its extra line"},
		{"extra not base64", hdr + "extra !!\nindex 1\n\n" + cp, "tlog-proof extra data is not standard base64"},
		{"extra with CR", hdr + "extra AA==\r\nindex 1\n\n" + cp, "tlog-proof extra data is not standard base64: line break at offset 4"},
		{"extra unpadded", hdr + "extra AA\nindex 1\n\n" + cp, "tlog-proof extra data is not standard base64"},
		{"two extra lines", hdr + "extra AA==\nextra AA==\nindex 1\n\n" + cp, `tlog-proof line "extra AA==" is not "index <n>"`},
		{"no index", hdr + "\n" + h + "\n" + cp, `tlog-proof line "" is not "index <n>"`},
		{"index with two spaces", hdr + "index  1\n\n" + cp, `tlog-proof index: number " 1" is not plain decimal`},
		{"index leading zero", hdr + "index 01\n" + h + "\n" + cp, `tlog-proof index: number "01" has a leading zero`},
		{"index empty", hdr + "index \n\n" + cp, "tlog-proof index: empty number"},
		{"index negative", hdr + "index -1\n\n" + cp, `tlog-proof index: number "-1" is not plain decimal`},
		{"index overflow", hdr + "index 18446744073709551616\n\n" + cp, "does not fit in 64 bits"},
		{"index with CR", hdr + "index 1\r\n\n" + cp, `tlog-proof index: number "1\r" is not plain decimal`},
		{"bad base64 hash", hdr + "index 1\n" + h + "!!!!\n\n" + cp, "tlog-proof hash 3: hash \"!!!!\" is not standard base64"},
		{"hash with CR", hdr + "index 1\n" + strings.Replace(h, "\n", "\r\n", 1) + "\n" + cp, "tlog-proof hash 1: hash"},
		{"short hash", hdr + "index 1\n" + shortHash64 + "\n\n" + cp, "tlog-proof hash 1: hash is 31 bytes, want 32"},
		{"too many hashes", hdr + "index 1\n" + hashLines(testHashes(MaxProofHashes+1)) + "\n" + cp, "tlog-proof has more than 64 hashes"},
		{"no blank line before checkpoint", hdr + "index 1\n" + h + cp, "tlog-proof hash 3: hash \"log.annal.example/test\""},
		{"no blank line at all", hdr + "index 1\n" + h, "tlog-proof has no empty line before its checkpoint"},
		{"no checkpoint", hdr + "index 1\n" + h + "\n", "tlog-proof has no checkpoint"},
		{"oversize", hdr + "index 1\n\n" + cp + strings.Repeat("x", MaxTLogProofSize), "more than the limit of 131072"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := ParseTLogProof([]byte(tc.text))
			if err == nil {
				t.Fatalf("accepted %q as %+v", tc.text, p)
			}
			if !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("error %q does not say %q", err, tc.wantErr)
			}
		})
	}
}

// TestParseTLogProof_KeepsCheckpointVerbatim checks that the layout parser
// leaves the checkpoint to OpenCheckpoint: whatever follows the blank line,
// even bytes that are no signed note, is kept exactly.
func TestParseTLogProof_KeepsCheckpointVerbatim(t *testing.T) {
	text := "c2sp.org/tlog-proof@v1\nindex 2\n\nnot a note\r\n\n\x00"
	p, err := ParseTLogProof([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	if string(p.Checkpoint) != "not a note\r\n\n\x00" {
		t.Errorf("Checkpoint = %q", p.Checkpoint)
	}
	if string(p.Marshal()) != text {
		t.Errorf("Marshal = %q, want %q", p.Marshal(), text)
	}
}

func TestParseTLogProof_SizeLimitIsInclusive(t *testing.T) {
	head := "c2sp.org/tlog-proof@v1\nindex 1\n\n"
	text := head + strings.Repeat("x", MaxTLogProofSize-len(head))
	if _, err := ParseTLogProof([]byte(text)); err != nil {
		t.Errorf("a proof of exactly MaxTLogProofSize bytes is refused: %v", err)
	}
}

func TestHashes_RoundTrip(t *testing.T) {
	for _, n := range []int{0, 1, 2, 7, MaxProofHashes} {
		hs := testHashes(n)
		text := MarshalHashes(hs)
		if string(text) != hashLines(hs) {
			t.Errorf("%d hashes: MarshalHashes = %q, want %q", n, text, hashLines(hs))
		}
		got, err := ParseHashes(text)
		if err != nil {
			t.Fatalf("%d hashes: %v", n, err)
		}
		if len(got) != n || (n > 0 && !reflect.DeepEqual(got, hs)) {
			t.Errorf("%d hashes: ParseHashes = %x, want %x", n, got, hs)
		}
	}
}

func TestParseHashes_Rejects(t *testing.T) {
	h := hashLines(testHashes(2))
	for _, tc := range []struct {
		name, text, wantErr string
	}{
		{"no trailing newline", strings.TrimSuffix(h, "\n"), "proof does not end with a newline"},
		{"blank line", "\n", "proof line 1: hash is 0 bytes, want 32"},
		{"blank line between", strings.Replace(h, "\n", "\n\n", 1), "proof line 2: hash is 0 bytes, want 32"},
		{"CRLF lines", strings.ReplaceAll(h, "\n", "\r\n"), "proof line 1: hash"},
		{"bad base64", h + "@@@@\n", `proof line 3: hash "@@@@" is not standard base64`},
		{"33-byte hash", longHash64 + "\n", "proof line 1: hash is 33 bytes, want 32"},
		{"two hashes on a line", strings.TrimSuffix(h, "\n") + "\n" + zeroHash64 + zeroHash64 + "\n", "proof line 3: hash"},
		{"too many", hashLines(testHashes(MaxProofHashes + 1)), fmt.Sprintf("proof has %d hashes, more than %d", MaxProofHashes+1, MaxProofHashes)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseHashes([]byte(tc.text))
			if err == nil {
				t.Fatalf("accepted %q as %x", tc.text, got)
			}
			if !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("error %q does not say %q", err, tc.wantErr)
			}
		})
	}
}
