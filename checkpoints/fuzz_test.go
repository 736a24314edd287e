package checkpoints

import (
	"bytes"
	"strings"
	"testing"
)

// The parsers must accept each value in exactly one spelling: whatever
// parses is re-encoded byte for byte, so a signed or hashed text has one
// meaning and one form.

func FuzzParseCheckpointBody(f *testing.F) {
	for _, seed := range []string{
		testBody,
		testBody + "ext one\n— ext two\n",
		"o\n0\n" + zeroHash64 + "\n",
		"o\n18446744073709551615\n" + zeroHash64 + "\n",
		"o\n18446744073709551616\n" + zeroHash64 + "\n",
		testOrigin + "\n01\n" + testRoot64 + "\n",
		testOrigin + "\n7\n" + testRoot64 + "\r\n",
		testOrigin + "\n7\n" + shortHash64 + "\n",
		testBody + "\n",
		testBody + "ext\r\n",
		strings.TrimSuffix(testBody, "\n"),
		"\n7\n" + testRoot64 + "\n",
		"",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		c, err := ParseCheckpointBody(body)
		if err != nil {
			return
		}
		if m := c.Marshal(); !bytes.Equal(m, body) {
			t.Fatalf("%q parses, but Marshal gives %q", body, m)
		}
		if err := ValidateOrigin(c.Origin); err != nil {
			t.Fatalf("%q parses with an invalid origin: %v", body, err)
		}
	})
}

func FuzzParseTLogProof(f *testing.F) {
	cp := string(testSignedCheckpoint(f))
	h := hashLines(testHashes(3))
	const hdr = "c2sp.org/tlog-proof@v1\n"
	for _, seed := range []string{
		hdr + "index 5\n" + h + "\n" + cp,
		hdr + "extra YW5uYWw=\nindex 0\n\n" + cp,
		hdr + "extra \nindex 1\n\n" + cp,
		hdr + "index 01\n" + h + "\n" + cp,
		hdr + "index 1\n" + strings.Replace(h, "\n", "\r\n", 1) + "\n" + cp,
		hdr + "extra AA==\r\nindex 1\n\n" + cp,
		hdr + "index 1\n" + h + cp,
		hdr + "index 1\n" + h + "\n",
		hdr + "index 1\n" + hashLines(testHashes(MaxProofHashes+1)) + "\n" + cp,
		"c2sp.org/tlog-proof@v2\nindex 1\n\n" + cp,
		hdr,
		"",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, text []byte) {
		p, err := ParseTLogProof(text)
		if err != nil {
			return
		}
		if m := p.Marshal(); !bytes.Equal(m, text) {
			t.Fatalf("%q parses, but Marshal gives %q", text, m)
		}
		if len(p.Hashes) > MaxProofHashes || len(p.Checkpoint) == 0 {
			t.Fatalf("%q parses with %d hashes and a %d-byte checkpoint", text, len(p.Hashes), len(p.Checkpoint))
		}
	})
}

func FuzzParseHashes(f *testing.F) {
	h := hashLines(testHashes(3))
	for _, seed := range []string{
		"",
		h,
		"\n",
		strings.TrimSuffix(h, "\n"),
		strings.ReplaceAll(h, "\n", "\r\n"),
		h + "@@@@\n",
		longHash64 + "\n",
		hashLines(testHashes(MaxProofHashes + 1)),
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, text []byte) {
		hs, err := ParseHashes(text)
		if err != nil {
			return
		}
		if m := MarshalHashes(hs); !bytes.Equal(m, text) {
			t.Fatalf("%q parses, but MarshalHashes gives %q", text, m)
		}
		if len(hs) > MaxProofHashes {
			t.Fatalf("%q parses as %d hashes", text, len(hs))
		}
	})
}

func FuzzOpenCheckpoint(f *testing.F) {
	skey, vkey := fixedKey(testOrigin, 0)
	witnessSkey, _ := fixedKey("witness.example", 0x40)
	otherSkey, _ := fixedKey(testOrigin, 0x80)
	signed := signNote(f, testBody, skey)
	for _, seed := range [][]byte{
		signed,
		signNote(f, testBody+"ext\n", skey),
		signNote(f, testBody, skey, witnessSkey),
		signNote(f, testBody, otherSkey),
		signNote(f, "log.annal.example/elsewhere\n7\n"+testRoot64+"\n", skey),
		signNote(f, testOrigin+"\n07\n"+testRoot64+"\n", skey),
		bytes.Replace(signed, []byte("\n7\n"), []byte("\n8\n"), 1),
		[]byte(testBody),
		nil,
	} {
		f.Add(seed)
	}
	v := mustVerifier(f, vkey)
	f.Fuzz(func(t *testing.T, signed []byte) {
		sc, err := OpenCheckpoint(signed, v)
		if err != nil {
			return
		}
		// Only a body the fixed key signed can open; it must then be a
		// checkpoint of the key's origin.
		c, err := ParseCheckpointBody([]byte(sc.Note.Text))
		if err != nil {
			t.Fatalf("%q opens, but its body does not parse: %v", signed, err)
		}
		if c.Origin != testOrigin || sc.Origin != testOrigin || !bytes.Equal(sc.Raw, signed) {
			t.Fatalf("%q opens as origin %q (body %q), Raw %q", signed, sc.Origin, c.Origin, sc.Raw)
		}
	})
}
