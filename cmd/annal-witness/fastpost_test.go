package main

import (
	"bytes"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	fnote "github.com/transparency-dev/formats/note"
	"golang.org/x/mod/sumdb/note"

	"github.com/annal-dev/annal/witness"
)

// exchange is one add-checkpoint answer as a client sees it.
type exchange struct {
	status      int
	contentType string
	body        string
}

func postFull(t *testing.T, url string, body []byte) exchange {
	t.Helper()
	resp, err := http.Post(url+"/add-checkpoint", "text/plain", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return exchange{resp.StatusCode, resp.Header.Get("Content-Type"), string(b)}
}

// TestServe_FastPostAnswersAsNetHTTP: with --fast-post (the default) and
// without, the same add-checkpoint requests get the same answers: 200 with
// an Ed25519 and an ML-DSA-44 line that verify under
// transparency-dev/formats' verifiers, 409 with the size, 400, 413 for a
// body over the limit (net/http's, as the fast path hands it over), 404;
// only the signatures differ.
func TestServe_FastPostAnswersAsNetHTTP(t *testing.T) {
	var answers [2][]exchange
	for i, fast := range []bool{false, true} {
		data := filepath.Join(t.TempDir(), "w")
		vkey, url := startServeWith(t, serveFlags{data: data, name: "witness.test/fast", mldsa: true, fastPost: fast})
		l := newCmdTestLog(t, "example.com/fast", 20)
		if out, err := run(t, "logs", "add", "--data", data, "--origin", l.origin, "--key", l.vkey); err != nil {
			t.Fatalf("logs add: %v\n%s", err, out)
		}
		ok, signed := l.request(t, 0, 10)
		first := postFull(t, url, ok)
		if first.status != http.StatusOK || strings.Count(first.body, "\n") != 2 {
			t.Fatalf("fast-post %v: %+v, want 200 with two lines", fast, first)
		}
		checkBothCosignatures(t, data, vkey, append(signed, first.body...))
		grown, _ := l.request(t, 10, 20)
		oversize := append([]byte("old 0\n\n"), bytes.Repeat([]byte("x"), witness.MaxRequestSize)...)
		other := newCmdTestLog(t, "example.com/unknown", 3)
		unknown, _ := other.request(t, 0, 3)
		answers[i] = []exchange{
			{first.status, first.contentType, ""},
			postFull(t, url, ok), // 409: the witness is at 10
			postFull(t, url, []byte("old 1x\n\n")),
			postFull(t, url, oversize),
			postFull(t, url, unknown),
		}
		if a := postFull(t, url, grown); a.status != http.StatusOK {
			t.Fatalf("fast-post %v: grown checkpoint %+v", fast, a)
		}
	}
	for j := range answers[0] {
		if answers[0][j] != answers[1][j] {
			t.Errorf("request %d: net/http %+v, fast path %+v", j, answers[0][j], answers[1][j])
		}
	}
	if answers[1][3].status != http.StatusRequestEntityTooLarge || answers[1][1].body != "10\n" {
		t.Errorf("fast path: oversize %+v, conflict %+v", answers[1][3], answers[1][1])
	}
}

// checkBothCosignatures checks that cosigned, a checkpoint with the
// witness's two lines, verifies under its Ed25519 key (vkey) and under its
// ML-DSA-44 key, read from the data folder.
func checkBothCosignatures(t *testing.T, data, vkey string, cosigned []byte) {
	t.Helper()
	cosigner, _, err := loadCosigner(data, "", true)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{vkey, cosigner.MLDSAVerifierKey()} {
		v, err := fnote.NewVerifierForCosignatureV1(key)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := note.Open(cosigned, note.VerifierList(v)); err != nil {
			t.Errorf("key %.40s…: %v\n%s", key, err, cosigned)
		}
	}
}
