package witness

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/annal-dev/annal/checkpoints"
	fnote "github.com/transparency-dev/formats/note"
	"github.com/transparency-dev/merkle/rfc6962"
	"golang.org/x/mod/sumdb/note"
)

// checkCosignature checks a 200 answer: one cosignature/v1 line by the
// witness key that verifies on the checkpoint, timestamped between
// notBefore and now.
func checkCosignature(t *testing.T, tw *testWitness, l *testLog, signed []byte, a answer, notBefore time.Time) {
	t.Helper()
	if a.status != http.StatusOK {
		t.Fatalf("status %d %q, want 200", a.status, a.body)
	}
	if ct := a.header.Values("Content-Type"); len(ct) != 1 || ct[0] != "text/plain; charset=utf-8" {
		t.Errorf("Content-Type %q", ct)
	}
	if strings.Count(a.body, "\n") != 1 || !strings.HasPrefix(a.body, "— "+testWitnessName+" ") || !strings.HasSuffix(a.body, "\n") {
		t.Fatalf("answer %q is not one note signature line by %s", a.body, testWitnessName)
	}
	wv, err := fnote.NewVerifierForCosignatureV1(tw.w.Cosigner().VerifierKey())
	if err != nil {
		t.Fatal(err)
	}
	lv, err := note.NewVerifier(l.vkey)
	if err != nil {
		t.Fatal(err)
	}
	// What a client does (c2sp.org/tlog-witness): append the answer to the
	// checkpoint and open it with the keys it trusts.
	n, err := note.Open(append(append([]byte{}, signed...), a.body...), note.VerifierList(wv, lv))
	if err != nil {
		t.Fatalf("checkpoint with the cosignature does not verify: %v", err)
	}
	var cosig *note.Signature
	for i := range n.Sigs {
		if n.Sigs[i].Hash == wv.KeyHash() {
			cosig = &n.Sigs[i]
		}
	}
	if cosig == nil || len(n.Sigs) != 2 {
		t.Fatalf("want the log's signature and the cosignature to verify, got %v", n.Sigs)
	}
	ts, err := fnote.CoSigV1Timestamp(*cosig)
	if err != nil {
		t.Fatal(err)
	}
	if ts.Before(notBefore.Truncate(time.Second)) || ts.After(time.Now()) {
		t.Errorf("cosignature timestamp %v is not between %v and now", ts, notBefore)
	}
}

func TestSpec200_CosignsFirstCheckpoint(t *testing.T) {
	tw := startWitness(t, t.TempDir(), Options{})
	l := newTestLog(t, "example.com/log").growTo(5)
	tw.addLog(l)
	start := time.Now()
	a := tw.post(l.request(0, 5))
	checkCosignature(t, tw, l, l.checkpoint(5), a, start)
	if got := tw.storedSize(l.origin); got != 5 {
		t.Errorf("stored size %d, want 5", got)
	}
}

func TestSpec200_GrowsWithConsistencyProof(t *testing.T) {
	tw := startWitness(t, t.TempDir(), Options{})
	l := newTestLog(t, "example.com/log").growTo(100)
	tw.addLog(l)
	tw.mustCosign(l.request(0, 1))
	for _, step := range [][2]uint64{{1, 2}, {2, 7}, {7, 8}, {8, 64}, {64, 65}, {65, 100}} {
		start := time.Now()
		signed := l.checkpoint(step[1])
		a := tw.post(requestBody(step[0], l.proof(step[0], step[1]), signed))
		checkCosignature(t, tw, l, signed, a, start)
	}
	if got := tw.storedSize(l.origin); got != 100 {
		t.Errorf("stored size %d, want 100", got)
	}
}

func TestSpec200_SameCheckpointAgain(t *testing.T) {
	tw := startWitness(t, t.TempDir(), Options{})
	l := newTestLog(t, "example.com/log").growTo(9)
	tw.addLog(l)
	tw.mustCosign(l.request(0, 9))
	// old = size = stored size, same root, empty proof: consistent.
	start := time.Now() // before the request: arguments are evaluated in order
	checkCosignature(t, tw, l, l.checkpoint(9), tw.post(l.request(9, 9)), start)
}

func TestSpec200_EmptyTree(t *testing.T) {
	tw := startWitness(t, t.TempDir(), Options{})
	l := newTestLog(t, "example.com/log")
	tw.addLog(l)
	// Tessera publishes and witnesses a size-0 checkpoint on a new log.
	start := time.Now()
	checkCosignature(t, tw, l, l.checkpoint(0), tw.post(l.request(0, 0)), start)
	l.growTo(3)
	tw.mustCosign(l.request(0, 3))
}

func TestSpec200_KeyNamedOtherThanOriginAndSecondKey(t *testing.T) {
	tw := startWitness(t, t.TempDir(), Options{})
	// Like sum.golang.org signing "go.sum database tree": the key name is
	// not the origin, and the origin has spaces.
	l := newTestLog(t, "sum.example.com").growTo(4)
	l.origin = "example database tree"
	rotated := newTestLog(t, "sum.example.com/2025")
	if err := tw.store.AddLog(LogConfig{Origin: l.origin, Keys: []string{rotated.vkey, l.vkey}}); err != nil {
		t.Fatal(err)
	}
	tw.mustCosign(l.request(0, 4))
	// The second key alone is trusted too.
	l.growTo(6)
	tw.mustCosign(requestBody(4, l.proof(4, 6), l.signWith(rotated.signer, checkpoints.Checkpoint{Origin: l.origin, Size: 6, Hash: l.root(6)})))
}

func TestSpec200_IgnoresUnknownSignatures(t *testing.T) {
	tw := startWitness(t, t.TempDir(), Options{})
	l := newTestLog(t, "example.com/log").growTo(4)
	tw.addLog(l)
	other := newTestLog(t, "other-witness.example.com")
	n, err := note.Open(l.checkpoint(4), note.VerifierList(mustVerifier(t, l.vkey)))
	if err != nil {
		t.Fatal(err)
	}
	// A checkpoint carrying another witness's signature besides the log's.
	signed, err := note.Sign(n, other.signer)
	if err != nil {
		t.Fatal(err)
	}
	tw.mustCosign(requestBody(0, nil, signed))
	stored := tw.get(checkpointPath(l.origin)).body
	if strings.Contains(stored, other.origin) {
		t.Errorf("stored checkpoint keeps an unverified signature:\n%s", stored)
	}
}

func TestSpec404_UnknownOrigin(t *testing.T) {
	tw := startWitness(t, t.TempDir(), Options{})
	known := newTestLog(t, "example.com/known")
	tw.addLog(known)
	l := newTestLog(t, "example.com/unknown").growTo(3)
	a := tw.post(l.request(0, 3))
	if a.status != http.StatusNotFound || !strings.Contains(a.body, "unknown log origin") {
		t.Errorf("got %d %q, want 404 unknown log origin", a.status, a.body)
	}
}

func TestSpec403_NoTrustedSignature(t *testing.T) {
	tw := startWitness(t, t.TempDir(), Options{})
	l := newTestLog(t, "example.com/log").growTo(3)
	tw.addLog(l)
	// Same origin and key name, another key: an unknown key to the witness.
	impostor := newTestLog(t, l.origin)
	signed := l.signWith(impostor.signer, checkpoints.Checkpoint{Origin: l.origin, Size: 3, Hash: l.root(3)})
	a := tw.post(requestBody(0, nil, signed))
	if a.status != http.StatusForbidden || !strings.Contains(a.body, "no signature by a configured key") {
		t.Errorf("got %d %q, want 403", a.status, a.body)
	}
	if tw.storedSize(l.origin) != -1 {
		t.Error("a refused request changed the state")
	}
}

func TestSpec403_TrustedSignatureFails(t *testing.T) {
	tw := startWitness(t, t.TempDir(), Options{})
	l := newTestLog(t, "example.com/log").growTo(3)
	tw.addLog(l)
	signed := string(l.checkpoint(3))
	// Flip a bit of the Ed25519 signature, keeping the key ID: a signature
	// by the trusted key that does not verify.
	i := strings.LastIndexByte(signed[:len(signed)-1], ' ')
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(signed[i+1:]))
	if err != nil {
		t.Fatal(err)
	}
	raw[10] ^= 1
	bad := signed[:i+1] + base64.StdEncoding.EncodeToString(raw) + "\n"
	a := tw.post(requestBody(0, nil, []byte(bad)))
	if a.status != http.StatusForbidden || !strings.Contains(a.body, "does not verify") {
		t.Errorf("got %d %q, want 403 signature does not verify", a.status, a.body)
	}
}

func TestSpec403_OneTrustedSignatureFailsAnotherVerifies(t *testing.T) {
	tw := startWitness(t, t.TempDir(), Options{})
	l := newTestLog(t, "example.com/log").growTo(3)
	second := newTestLog(t, "example.com/log-2025")
	if err := tw.store.AddLog(LogConfig{Origin: l.origin, Keys: []string{l.vkey, second.vkey}}); err != nil {
		t.Fatal(err)
	}
	n, err := note.Open(l.checkpoint(3), note.VerifierList(mustVerifier(t, l.vkey)))
	if err != nil {
		t.Fatal(err)
	}
	signed, err := note.Sign(n, second.signer)
	if err != nil {
		t.Fatal(err)
	}
	// Corrupt the second key's signature: the first still verifies, but the
	// spec says a note with a failing trusted signature is rejected.
	text := string(signed)
	i := strings.LastIndexByte(text[:len(text)-1], ' ')
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(text[i+1:]))
	if err != nil {
		t.Fatal(err)
	}
	raw[20] ^= 1
	bad := text[:i+1] + base64.StdEncoding.EncodeToString(raw) + "\n"
	if a := tw.post(requestBody(0, nil, []byte(bad))); a.status != http.StatusForbidden || !strings.Contains(a.body, "example.com/log-2025") {
		t.Errorf("got %d %q, want 403 naming the failing key", a.status, a.body)
	}
	if tw.storedSize(l.origin) != -1 {
		t.Error("a refused request changed the state")
	}
}

func TestSpec400_OldSizeBeyondCheckpoint(t *testing.T) {
	tw := startWitness(t, t.TempDir(), Options{})
	l := newTestLog(t, "example.com/log").growTo(5)
	tw.addLog(l)
	a := tw.post(requestBody(6, nil, l.checkpoint(5)))
	if a.status != http.StatusBadRequest || !strings.Contains(a.body, "old size is larger than the checkpoint size") {
		t.Errorf("got %d %q, want 400", a.status, a.body)
	}
}

func TestSpec400_MalformedBody(t *testing.T) {
	tw := startWitness(t, t.TempDir(), Options{})
	l := newTestLog(t, "example.com/log").growTo(5)
	tw.addLog(l)
	cp := string(l.checkpoint(5))
	hash := base64.StdEncoding.EncodeToString(make([]byte, 32))
	root := l.root(5)
	rootB64 := base64.StdEncoding.EncodeToString(root[:])
	sigB64 := cp[strings.LastIndexByte(cp[:len(cp)-1], ' ')+1 : len(cp)-1]
	for _, tc := range []struct{ name, body, want string }{
		{"empty", "", "old size line does not end with a newline"},
		{"no old line", "\n" + cp, `first line "" is not "old <size>"`},
		{"old with leading zero", "old 05\n\n" + cp, "leading zero"},
		{"old negative", "old -1\n\n" + cp, "not plain decimal"},
		{"old two spaces", "old  5\n\n" + cp, "not plain decimal"},
		{"old too big", "old 18446744073709551616\n\n" + cp, "does not fit in 64 bits"},
		{"no blank line", "old 0\n" + cp, "consistency proof line 1"},
		{"proof not base64", "old 3\nnot-base64!\n\n" + cp, "consistency proof line 1"},
		{"proof 31 bytes", "old 3\n" + base64.StdEncoding.EncodeToString(make([]byte, 31)) + "\n\n" + cp, "hash is 31 bytes"},
		{"64 proof lines", "old 3\n" + strings.Repeat(hash+"\n", 64) + "\n" + cp, "more than 63 consistency proof lines"},
		{"long line", "old 3\n" + strings.Repeat("A", MaxLineLength+1) + "\n\n" + cp, "more than 4096"},
		{"no checkpoint", "old 0\n\n", "no checkpoint after the blank line"},
		{"unsigned checkpoint", "old 0\n\n" + cp[:strings.Index(cp, "\n\n")+1], "no blank line before its signatures"},
		{"size with leading zero", "old 0\n\n" + strings.Replace(cp, "\n5\n", "\n05\n", 1), "checkpoint size"},
		{"root not canonical", "old 0\n\n" + strings.Replace(cp, rootB64, setUnusedBit(t, rootB64), 1), "checkpoint root hash"},
		{"root of 31 bytes", "old 0\n\n" + strings.Replace(cp, rootB64, base64.StdEncoding.EncodeToString(make([]byte, 31)), 1), "hash is 31 bytes"},
		{"two lines", "old 0\n\n" + strings.Replace(cp, "\n5\n", "\n", 1), "want at least 3"},
		{"control character", "old 0\n\n" + strings.Replace(cp, "example.com/log", "example.com/\tlog", 1), "control character"},
		{"bad signature prefix", "old 0\n\n" + strings.Replace(cp, "— ", "- ", 1), `does not start with "— "`},
		{"too many signatures", "old 0\n\n" + cp + strings.Repeat(cp[strings.Index(cp, "\n\n")+2:], MaxSignatureLines), "more than 32"},
		{"non-canonical signature base64", "old 0\n\n" + cp[:len(cp)-len(sigB64)-1] + setUnusedBit(t, sigB64) + "\n", "not canonical standard base64"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := tw.post([]byte(tc.body))
			if a.status != http.StatusBadRequest || !strings.Contains(a.body, tc.want) {
				t.Errorf("got %d %q, want 400 containing %q", a.status, a.body, tc.want)
			}
		})
	}
	if tw.storedSize(l.origin) != -1 {
		t.Error("a malformed request changed the state")
	}
}

// setUnusedBit sets an unused low bit of the last data character of a
// padded base64 string: Go's lenient decoder, which x/mod note uses, still
// decodes it to the same bytes.
func setUnusedBit(t *testing.T, b64 string) string {
	t.Helper()
	end := strings.IndexByte(b64, '=')
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	i := strings.IndexByte(alphabet, b64[end-1])
	if end < 1 || i < 0 || i&1 != 0 {
		t.Fatalf("cannot set an unused bit of %q", b64)
	}
	return b64[:end-1] + string(alphabet[i|1]) + b64[end:]
}

func TestSpec413_BodyTooLarge(t *testing.T) {
	tw := startWitness(t, t.TempDir(), Options{})
	a := tw.post([]byte("old 0\n" + strings.Repeat("A", MaxRequestSize)))
	if a.status != http.StatusRequestEntityTooLarge {
		t.Errorf("got %d %q, want 413", a.status, a.body)
	}
}

func TestSpec409_OldSizeIsNotTheStoredSize(t *testing.T) {
	tw := startWitness(t, t.TempDir(), Options{})
	l := newTestLog(t, "example.com/log").growTo(20)
	tw.addLog(l)
	check := func(a answer, want string) {
		t.Helper()
		if a.status != http.StatusConflict || a.body != want {
			t.Errorf("got %d %q, want 409 %q", a.status, a.body, want)
		}
		if ct := a.header.Values("Content-Type"); len(ct) != 1 || ct[0] != "text/x.tlog.size" {
			t.Errorf("Content-Type %q, want exactly text/x.tlog.size", ct)
		}
	}
	// Never cosigned: the stored size is 0.
	check(tw.post(l.request(3, 5)), "0\n")
	tw.mustCosign(l.request(0, 5))
	// A client that does not know the witness's state starts from 0.
	check(tw.post(l.request(0, 8)), "5\n")
	check(tw.post(l.request(4, 8)), "5\n")
	check(tw.post(l.request(6, 8)), "5\n")
	// The answer lets the client retry right.
	tw.mustCosign(l.request(5, 8))
}

func TestSpec422_NotProvenConsistent(t *testing.T) {
	l := newTestLog(t, "example.com/log").growTo(40)
	// The fork shares the first 3 entries, not 5: its size-5 tree differs.
	fork := l.fork(3).growTo(40)
	wrong := l.proof(5, 12)
	wrong[0][0] ^= 1
	emptyRoot := [32]byte(rfc6962.DefaultHasher.EmptyRoot())
	badEmpty := emptyRoot
	badEmpty[0] ^= 1
	for _, tc := range []struct {
		name   string
		stored uint64 // cosigned first, from 0; 0 for none
		body   []byte
		want   string
	}{
		{"bad proof", 5, requestBody(5, wrong, l.checkpoint(12)), "does not verify"},
		{"missing proof", 5, requestBody(5, nil, l.checkpoint(12)), "does not verify"},
		{"truncated proof", 5, requestBody(5, l.proof(5, 12)[1:], l.checkpoint(12)), "does not verify"},
		{"proof with an extra hash", 5, requestBody(5, append(l.proof(5, 12), [32]byte{}), l.checkpoint(12)), "does not verify"},
		{"proof for another size", 5, requestBody(5, l.proof(5, 13), l.checkpoint(12)), "does not verify"},
		{"non-empty proof with old 0", 0, requestBody(0, l.proof(5, 12), l.checkpoint(12)), "a proof from the empty tree MUST be empty"},
		{"non-empty proof with old 0 and a size-0 checkpoint", 0, requestBody(0, [][32]byte{emptyRoot}, l.checkpoint(0)), "MUST be empty"},
		{"size-0 checkpoint with a wrong root", 0, requestBody(0, nil, l.signWith(l.signer, checkpoints.Checkpoint{Origin: l.origin, Hash: badEmpty})), "empty tree's root"},
		{"same size, different root", 5, requestBody(5, nil, l.checkpointWithRoot(5, sha256.Sum256([]byte("x")))), "cosigned root"},
		{"same size, different root, with a proof", 5, requestBody(5, l.proof(4, 5), l.checkpointWithRoot(5, sha256.Sum256([]byte("x")))), "cosigned root"},
		{"same size, empty proof expected", 5, requestBody(5, l.proof(4, 5), l.checkpoint(5)), "does not verify"},
		{"proof from a fork", 5, requestBody(5, fork.proof(5, 12), fork.checkpoint(12)), "does not verify"},
		{"fork's own proof", 12, requestBody(12, fork.proof(12, 20), fork.checkpoint(20)), "does not verify"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tw := startWitness(t, t.TempDir(), Options{})
			tw.addLog(l)
			if tc.stored > 0 {
				tw.mustCosign(l.request(0, tc.stored))
			}
			before := tw.get(checkpointPath(l.origin))
			a := tw.post(tc.body)
			if a.status != http.StatusUnprocessableEntity || !strings.Contains(a.body, tc.want) {
				t.Errorf("got %d %q, want 422 containing %q", a.status, a.body, tc.want)
			}
			if after := tw.get(checkpointPath(l.origin)); after.body != before.body {
				t.Errorf("a refused request changed the cosigned checkpoint:\n%s\nto\n%s", before.body, after.body)
			}
			// The log signed it, so it may prove misbehaviour: logged loudly.
			if logs := tw.logs.String(); !strings.Contains(logs, "level=ERROR") || !strings.Contains(logs, "inconsistent checkpoint") {
				t.Errorf("refusal not logged at error level:\n%s", logs)
			}
		})
	}
}

// checkpointWithRoot signs a checkpoint of size with an arbitrary root.
func (l *testLog) checkpointWithRoot(size uint64, root [32]byte) []byte {
	return l.signWith(l.signer, checkpoints.Checkpoint{Origin: l.origin, Size: size, Hash: root})
}

func TestMonitoring_LatestCosignedCheckpoint(t *testing.T) {
	tw := startWitness(t, t.TempDir(), Options{})
	l := newTestLog(t, "example.com/log").growTo(10)
	tw.addLog(l)
	if a := tw.get(checkpointPath(l.origin)); a.status != http.StatusNotFound {
		t.Errorf("before any cosignature: %d %q, want 404", a.status, a.body)
	}
	tw.mustCosign(l.request(0, 4))
	tw.mustCosign(l.request(4, 10))
	a := tw.get(checkpointPath(l.origin))
	if a.status != http.StatusOK || a.header.Get("Content-Type") != "text/plain; charset=utf-8" {
		t.Fatalf("got %d %q %q", a.status, a.header.Get("Content-Type"), a.body)
	}
	wv, err := fnote.NewVerifierForCosignatureV1(tw.w.Cosigner().VerifierKey())
	if err != nil {
		t.Fatal(err)
	}
	n, err := note.Open([]byte(a.body), note.VerifierList(wv, mustVerifier(t, l.vkey)))
	if err != nil || len(n.Sigs) != 2 || len(n.UnverifiedSigs) != 0 {
		t.Fatalf("served checkpoint %q: %v, sigs %v, unverified %v", a.body, err, n.Sigs, n.UnverifiedSigs)
	}
	if want := string(l.checkpointWithRoot(10, l.root(10))); !strings.HasPrefix(a.body, want[:strings.Index(want, "\n\n")+2]) {
		t.Errorf("served checkpoint %q is not the size-10 checkpoint", a.body)
	}
	id := LogID(l.origin)
	for _, path := range []string{
		checkpointPath("example.com/other"),
		"/" + strings.ToUpper(checkpointPath(l.origin)[1:65]) + "/checkpoint",
		"/" + base64.StdEncoding.EncodeToString(id[:]) + "/checkpoint",
		"/abc/checkpoint",
	} {
		if a := tw.get(path); a.status != http.StatusNotFound {
			t.Errorf("GET %s: %d %q, want 404", path, a.status, a.body)
		}
	}
}

func TestHTTP_MethodsAndMetrics(t *testing.T) {
	tw := startWitness(t, t.TempDir(), Options{})
	if a := tw.get("/add-checkpoint"); a.status != http.StatusMethodNotAllowed {
		t.Errorf("GET /add-checkpoint: %d, want 405", a.status)
	}
	l := newTestLog(t, "example.com/log").growTo(2)
	tw.addLog(l)
	tw.mustCosign(l.request(0, 2))
	tw.post(l.request(0, 2))
	m := tw.get("/metrics").body
	for _, want := range []string{`annal_witness_add_checkpoint_requests_total{code="200"} 1`, `annal_witness_add_checkpoint_requests_total{code="409"} 1`} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %q:\n%s", want, m)
		}
	}
}

func mustVerifier(t *testing.T, vkey string) note.Verifier {
	t.Helper()
	v, err := note.NewVerifier(vkey)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// Signature lines by keys the witness does not know are ignored, repeated
// or not (c2sp.org/tlog-witness; omniwitness and litewitness answer 200);
// a repeated line by a configured key is 403: only one can be checked.
func TestRepeatedSignatureLines(t *testing.T) {
	tw := startWitness(t, t.TempDir(), Options{})
	l := newTestLog(t, "example.com/log").growTo(6)
	tw.addLog(l)
	cp := string(l.checkpoint(5))
	skey, _, err := note.GenerateKey(rand.Reader, "stranger.example")
	if err != nil {
		t.Fatal(err)
	}
	stranger, err := note.NewSigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	text := cp[:strings.Index(cp, "\n\n")+1]
	other, err := note.Sign(&note.Note{Text: text}, stranger)
	if err != nil {
		t.Fatal(err)
	}
	strangerLine := string(other[strings.Index(string(other), "\n\n")+2:])
	if a := tw.post([]byte("old 0\n\n" + cp + strangerLine + strangerLine)); a.status != http.StatusOK {
		t.Fatalf("two lines by an unknown key: %d %s", a.status, a.body)
	}
	// The log's own line, then a bad second one under its key.
	cp6 := string(l.checkpoint(6))
	logLine := cp6[strings.Index(cp6, "\n\n")+2:]
	name, b64, _ := strings.Cut(strings.TrimPrefix(strings.TrimSuffix(logLine, "\n"), "— "), " ")
	raw, _ := base64.StdEncoding.DecodeString(b64)
	raw[len(raw)-1] ^= 1
	bad := "— " + name + " " + base64.StdEncoding.EncodeToString(raw) + "\n"
	a := tw.post(requestBody(5, l.proof(5, 6), []byte(cp6+bad)))
	if a.status != http.StatusForbidden || !strings.Contains(a.body, "only one can be checked") {
		t.Fatalf("a repeated line by the log's key: %d %s", a.status, a.body)
	}
	if tw.storedSize(l.origin) != 5 {
		t.Error("the refused request changed the state")
	}
}

// The body is read whole whether its length is declared or not (chunked),
// and refused past MaxRequestSize either way.
func TestSpec413_BodyReadWithOrWithoutContentLength(t *testing.T) {
	body := bytes.Repeat([]byte("x"), 5000)
	for _, declared := range []int64{int64(len(body)), -1} {
		r := httptest.NewRequest(http.MethodPost, "/add-checkpoint", bytes.NewReader(body))
		r.ContentLength = declared
		got, err := readBody(httptest.NewRecorder(), r)
		if err != nil || !bytes.Equal(got, body) {
			t.Errorf("Content-Length %d: %d bytes, %v; want the %d sent", declared, len(got), err, len(body))
		}
		large := httptest.NewRequest(http.MethodPost, "/add-checkpoint", bytes.NewReader(make([]byte, MaxRequestSize+1)))
		large.ContentLength = declared
		var tooLarge *http.MaxBytesError
		if _, err := readBody(httptest.NewRecorder(), large); !errors.As(err, &tooLarge) {
			t.Errorf("Content-Length %d, %d bytes: %v, want *http.MaxBytesError", declared, MaxRequestSize+1, err)
		}
	}
}
