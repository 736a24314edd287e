package verifier

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"github.com/annal-dev/annal/checkpoints"
	"github.com/transparency-dev/merkle/rfc6962"
	"github.com/transparency-dev/merkle/testonly"
)

const testOrigin = "example.com/annal/verifier-test"

// testLog is an in-memory log built with the merkle module's reference tree,
// not with the kernel: the verifier is tested against an independent model.
type testLog struct {
	t       testing.TB
	tree    *testonly.Tree
	entries [][]byte
	skey    string
	vkey    string
}

func newTestLog(t testing.TB, origin string, n int) *testLog {
	t.Helper()
	skey, vkey, err := checkpoints.GenerateLogKey(origin)
	if err != nil {
		t.Fatal(err)
	}
	l := &testLog{t: t, tree: testonly.New(rfc6962.DefaultHasher), skey: skey, vkey: vkey}
	for i := 0; i < n; i++ {
		l.append(actionEntry(i))
	}
	return l
}

// actionEntry is a canonical (RFC 8785) action event: members sorted, no
// whitespace.
func actionEntry(i int) []byte {
	return fmt.Appendf(nil, `{"action":{"payload":{"n":%d},"target":"notes/%d","type":"create"},"actor":"root","decision":{"cost":10,"outcome":"committed","reserved":10,"settled":10},"id":"019a5c3e-0000-7000-8000-%012x","kind":"action","time":"2026-11-22T10:00:%02d.5Z","v":1}`, i, i, i, i%60)
}

func (l *testLog) append(entry []byte) {
	l.entries = append(l.entries, entry)
	l.tree.AppendData(entry)
}

func (l *testLog) checkpoint(size uint64) []byte {
	l.t.Helper()
	s, err := checkpoints.NewLogSigner(l.skey)
	if err != nil {
		l.t.Fatal(err)
	}
	signed, err := checkpoints.SignCheckpoint(checkpoints.Checkpoint{
		Origin: s.Name(), Size: size, Hash: [32]byte(l.tree.HashAt(size)),
	}, s)
	if err != nil {
		l.t.Fatal(err)
	}
	return signed
}

func (l *testLog) proof(index, size uint64) []byte {
	l.t.Helper()
	hashes, err := l.tree.InclusionProof(index, size)
	if err != nil {
		l.t.Fatal(err)
	}
	p := checkpoints.TLogProof{Index: index, Checkpoint: l.checkpoint(size)}
	for _, h := range hashes {
		p.Hashes = append(p.Hashes, [32]byte(h))
	}
	return p.Marshal()
}

func (l *testLog) consistency(size1, size2 uint64) []byte {
	l.t.Helper()
	hashes, err := l.tree.ConsistencyProof(size1, size2)
	if err != nil {
		l.t.Fatal(err)
	}
	var out [][32]byte
	for _, h := range hashes {
		out = append(out, [32]byte(h))
	}
	return checkpoints.MarshalHashes(out)
}

func TestVerifyProof_EveryIndexOfEverySize(t *testing.T) {
	l := newTestLog(t, testOrigin, 17)
	for size := uint64(1); size <= 17; size++ {
		for index := uint64(0); index < size; index++ {
			res, err := VerifyProof(l.entries[index], l.proof(index, size), l.vkey)
			if err != nil {
				t.Fatalf("index %d size %d: %v", index, size, err)
			}
			if res.Index != index || res.Size != size || res.Origin != testOrigin {
				t.Fatalf("index %d size %d: result %+v", index, size, res)
			}
			if !bytes.Equal(res.LeafHash[:], l.tree.LeafHash(index)) {
				t.Fatalf("index %d: leaf hash %x, tree has %x", index, res.LeafHash, l.tree.LeafHash(index))
			}
			if res.Event.Kind != "action" || res.Event.Type != "create" || res.Event.Target != fmt.Sprintf("notes/%d", index) {
				t.Fatalf("index %d: event %+v", index, res.Event)
			}
		}
	}
}

func TestVerifyProof_Failures(t *testing.T) {
	l := newTestLog(t, testOrigin, 7)
	other := newTestLog(t, "example.com/annal/other", 7)
	impostor := newTestLog(t, testOrigin, 7) // same origin, another key
	good := l.proof(3, 7)

	tamperedEntry := bytes.Replace(l.entries[3], []byte("notes/3"), []byte("notes/4"), 1)
	nonCanonical := []byte(strings.Replace(string(l.entries[3]), `"v":1`, `"v": 1`, 1))
	wrongIndex := bytes.Replace(good, []byte("index 3\n"), []byte("index 2\n"), 1)
	outside := bytes.Replace(l.proof(6, 7), []byte("index 6\n"), []byte("index 7\n"), 1)
	short := func() []byte {
		p, _ := checkpoints.ParseTLogProof(good)
		p.Hashes = p.Hashes[1:]
		return p.Marshal()
	}()
	long := func() []byte {
		p, _ := checkpoints.ParseTLogProof(good)
		p.Hashes = append(p.Hashes, p.Hashes[0])
		return p.Marshal()
	}()
	// A checkpoint for a different tree size, re-signed honestly: the proof
	// hashes were computed for size 7, so inclusion must fail.
	otherSize := func() []byte {
		p, _ := checkpoints.ParseTLogProof(good)
		l.append(actionEntry(7))
		p.Checkpoint = l.checkpoint(8)
		return p.Marshal()
	}()
	tamperedBody := bytes.Replace(good, []byte("\n7\n"), []byte("\n8\n"), 1)

	for _, tc := range []struct {
		name  string
		entry []byte
		proof []byte
		vkey  string
		check Check
		want  string
	}{
		{"another log's key", l.entries[3], good, other.vkey, CheckCheckpoint, "no signature by log key"},
		{"same origin, another key", l.entries[3], good, impostor.vkey, CheckCheckpoint, "no signature by log key"},
		{"another log's proof", other.entries[3], other.proof(3, 7), l.vkey, CheckCheckpoint, "no signature"},
		{"key is not a key", l.entries[3], good, "not a key", CheckKey, "not a note verifier key"},
		{"key with bad base64", l.entries[3], good, testOrigin + "+01234567+!!!", CheckKey, ""},
		{"tampered entry", tamperedEntry, good, l.vkey, CheckInclusion, "not at index 3"},
		{"non-canonical entry", nonCanonical, good, l.vkey, CheckEntry, "canonical"},
		{"empty entry", nil, good, l.vkey, CheckEntry, "empty"},
		{"entry of another index", l.entries[2], good, l.vkey, CheckInclusion, ""},
		{"index changed", l.entries[3], wrongIndex, l.vkey, CheckInclusion, ""},
		{"index outside the tree", l.entries[6], outside, l.vkey, CheckIndex, "not inside"},
		{"proof hash missing", l.entries[3], short, l.vkey, CheckInclusion, ""},
		{"proof hash extra", l.entries[3], long, l.vkey, CheckInclusion, ""},
		{"checkpoint of another size", l.entries[3], otherSize, l.vkey, CheckInclusion, ""},
		{"checkpoint body tampered", l.entries[3], tamperedBody, l.vkey, CheckCheckpoint, "does not verify"},
		{"not a tlog-proof", l.entries[3], []byte("hello\n"), l.vkey, CheckFormat, "c2sp.org/tlog-proof@v1"},
		{"empty proof", l.entries[3], nil, l.vkey, CheckFormat, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := VerifyProof(tc.entry, tc.proof, tc.vkey)
			var verr *Error
			if !errors.As(err, &verr) {
				t.Fatalf("error %v, want a *verifier.Error", err)
			}
			if verr.Check != tc.check || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q (check %q), want check %q mentioning %q", err, verr.Check, tc.check, tc.want)
			}
		})
	}
}

// Flipping any one byte of a valid proof must make verification fail with
// an error, never a panic and never a success.
func TestVerifyProof_EverySingleByteFlipFails(t *testing.T) {
	l := newTestLog(t, testOrigin, 11)
	good := l.proof(5, 11)
	if _, err := VerifyProof(l.entries[5], good, l.vkey); err != nil {
		t.Fatal(err)
	}
	for i := range good {
		for _, mask := range []byte{0x01, 0x20, 0x80} {
			bad := bytes.Clone(good)
			bad[i] ^= mask
			if _, err := VerifyProof(l.entries[5], bad, l.vkey); err == nil {
				t.Fatalf("proof with byte %d (%q) xor %#x verified", i, good[i], mask)
			}
		}
	}
	for i := range l.entries[5] {
		bad := bytes.Clone(l.entries[5])
		bad[i] ^= 0x01
		if _, err := VerifyProof(bad, good, l.vkey); err == nil {
			t.Fatalf("entry with byte %d flipped verified", i)
		}
	}
}

func TestVerifyProof_IgnoresUnknownCosignatures(t *testing.T) {
	l := newTestLog(t, testOrigin, 4)
	witness, _, err := checkpoints.GenerateLogKey("witness.example")
	if err != nil {
		t.Fatal(err)
	}
	ws, err := checkpoints.NewLogSigner(witness)
	if err != nil {
		t.Fatal(err)
	}
	p, err := checkpoints.ParseTLogProof(l.proof(1, 4))
	if err != nil {
		t.Fatal(err)
	}
	// Append a signature line by a key the verifier does not know.
	n, err := checkpoints.OpenCheckpoint(p.Checkpoint, mustVerifier(t, l.vkey))
	if err != nil {
		t.Fatal(err)
	}
	cosigned, err := signAgain(n.Note.Text, p.Checkpoint, ws)
	if err != nil {
		t.Fatal(err)
	}
	p.Checkpoint = cosigned
	if _, err := VerifyProof(l.entries[1], p.Marshal(), l.vkey); err != nil {
		t.Fatalf("an extra unknown signature made verification fail: %v", err)
	}
}

func TestVerifyConsistency(t *testing.T) {
	l := newTestLog(t, testOrigin, 13)
	for size2 := uint64(1); size2 <= 13; size2++ {
		for size1 := uint64(0); size1 <= size2; size1++ {
			res, err := VerifyConsistency(l.checkpoint(size1), l.checkpoint(size2), l.consistency(size1, size2), l.vkey)
			if err != nil {
				t.Fatalf("%d -> %d: %v", size1, size2, err)
			}
			if res.Old.Size != size1 || res.New.Size != size2 {
				t.Fatalf("%d -> %d: result sizes %d -> %d", size1, size2, res.Old.Size, res.New.Size)
			}
		}
	}
}

func TestVerifyConsistency_Failures(t *testing.T) {
	l := newTestLog(t, testOrigin, 9)
	// A fork: the same first 5 entries, then a different history signed by
	// the same key. Both checkpoints verify alone; they are not consistent.
	fork := &testLog{t: t, tree: testonly.New(rfc6962.DefaultHasher), skey: l.skey, vkey: l.vkey}
	for i := 0; i < 5; i++ {
		fork.append(l.entries[i])
	}
	for i := 100; i < 104; i++ {
		fork.append(actionEntry(i))
	}
	other := newTestLog(t, "example.com/annal/other", 9)
	proof59 := l.consistency(5, 9)
	for _, tc := range []struct {
		name          string
		old, new, prf []byte
		check         Check
	}{
		{"forked new checkpoint", l.checkpoint(5), fork.checkpoint(9), proof59, CheckConsistency},
		{"forked old checkpoint", fork.checkpoint(7), l.checkpoint(9), l.consistency(7, 9), CheckConsistency},
		{"same size, other root", l.checkpoint(9), fork.checkpoint(9), nil, CheckConsistency},
		{"old larger than new", l.checkpoint(9), l.checkpoint(5), proof59, CheckConsistency},
		{"empty proof", l.checkpoint(5), l.checkpoint(9), nil, CheckConsistency},
		{"proof for other sizes", l.checkpoint(5), l.checkpoint(9), l.consistency(6, 9), CheckConsistency},
		{"proof not hashes", l.checkpoint(5), l.checkpoint(9), []byte("xyz\n"), CheckFormat},
		{"old signed by another log", other.checkpoint(5), l.checkpoint(9), proof59, CheckCheckpoint},
		{"new not a note", l.checkpoint(5), []byte("junk"), proof59, CheckCheckpoint},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := VerifyConsistency(tc.old, tc.new, tc.prf, l.vkey)
			var verr *Error
			if !errors.As(err, &verr) || verr.Check != tc.check {
				t.Fatalf("error %v, want check %q", err, tc.check)
			}
		})
	}
}

func TestParseEvent_Rejects(t *testing.T) {
	good := string(actionEntry(1))
	if _, err := ParseEvent([]byte(good)); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, entry, want string }{
		{"not JSON", `hello`, "not valid JSON"},
		{"invalid UTF-8", "{\"v\":\xff}", "UTF-8"},
		{"duplicate key", `{"v":1,"v":1}`, "not valid JSON"},
		{"whitespace", strings.Replace(good, `"v":1`, `"v": 1`, 1), "canonical"},
		{"unsorted", `{"v":1,"actor":"root"}`, "canonical"},
		{"array", `[1]`, "not an event object"},
		{"missing id", `{"actor":"root","kind":"action","time":"2026-11-22T10:00:00Z","v":1}`, `"id"`},
		{"version 2", strings.Replace(good, `"v":1`, `"v":2`, 1), "version 2"},
		{"upper-case id", strings.Replace(good, "019a5c3e", "019A5C3E", 1), "not a lower-case UUID"},
		{"local time", strings.Replace(good, "10:00:01.5Z", "10:00:01.5+01:00", 1), "not RFC 3339 UTC"},
		{"time not canonical", strings.Replace(good, "10:00:01.5Z", "10:00:01.50Z", 1), "canonical form"},
		{"bad actor", strings.Replace(good, `"actor":"root"`, `"actor":"Root"`, 1), "not a valid actor id"},
		{"bad kind", strings.Replace(good, `"kind":"action"`, `"kind":"Action!"`, 1), "malformed"},
		{"bad action type", strings.Replace(good, `"type":"create"`, `"type":"delete"`, 1), "unknown action type"},
		{"action without action", `{"actor":"root","id":"019a5c3e-0000-7000-8000-000000000001","kind":"action","time":"2026-11-22T10:00:01.5Z","v":1}`, "lacks action.type"},
		{"too large", `{"a":"` + strings.Repeat("x", MaxEntrySize) + `"}`, "more than 65535"},
		{"trace id all zeros", strings.Replace(good, `,"v":1}`, `,"trace_id":"00000000000000000000000000000000","v":1}`, 1), "trace_id"},
		{"trace id upper case", strings.Replace(good, `,"v":1}`, `,"trace_id":"4BF92F3577B34DA6A3CE929D0E0E4736","v":1}`, 1), "trace_id"},
		{"trace id of 31 digits", strings.Replace(good, `,"v":1}`, `,"trace_id":"4bf92f3577b34da6a3ce929d0e0e473","v":1}`, 1), "trace_id"},
		{"trace id not a string", strings.Replace(good, `,"v":1}`, `,"trace_id":1,"v":1}`, 1), "trace_id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseEvent([]byte(tc.entry))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one mentioning %q", err, tc.want)
			}
		})
	}
	// A trace id is read back.
	traced := strings.Replace(good, `,"v":1}`, `,"trace_id":"4bf92f3577b34da6a3ce929d0e0e4736","v":1}`, 1)
	if ev, err := ParseEvent([]byte(traced)); err != nil || ev.TraceID != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Fatalf("trace id: %+v, %v", ev, err)
	}
	// Kinds a later version adds are read, not refused.
	later := `{"actor":"root","id":"019a5c3e-0000-7000-8000-000000000001","kind":"energy.produced","time":"2026-11-22T10:00:01Z","v":1}`
	ev, err := ParseEvent([]byte(later))
	if err != nil || ev.Kind != "energy.produced" {
		t.Fatalf("later kind: %+v, %v", ev, err)
	}
}

// The verifier's whole point is independence from what it verifies: of
// this module it may import checkpoints and the format declarations
// (format/...), never kernel, server, client or witness code.
func TestImportsOnlyCheckpointsAndFormats(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	const module = "github.com/annal-dev/annal/"
	allowed := map[string]bool{module + "verifier": true, module + "checkpoints": true,
		module + "format/bundle": true, module + "format/evidence": true}
	seen := map[string]bool{}
	for _, pkg := range strings.Fields(string(out)) {
		if !strings.HasPrefix(pkg, module) {
			continue
		}
		seen[pkg] = true
		for _, banned := range []string{"kernel", "server", "client", "api", "witness"} {
			if pkg == module+banned || strings.HasPrefix(pkg, module+banned+"/") {
				t.Errorf("verifier depends on %s: it must never import %s/", pkg, banned)
			}
		}
		if !allowed[pkg] {
			t.Errorf("verifier depends on %s; it may import only checkpoints/ and format/ of this module", pkg)
		}
	}
	for pkg := range allowed {
		if !seen[pkg] {
			t.Errorf("go list does not show %s among the verifier's dependencies", pkg)
		}
	}
}

// The format declarations are shared by the writers and the verifier, so
// they may hold nothing of either: only the standard library.
func TestFormatsImportOnlyTheStandardLibrary(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}} {{.Standard}}", "../format/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, standard, _ := strings.Cut(line, " ")
		if standard != "true" && !strings.HasPrefix(pkg, "github.com/annal-dev/annal/format/") {
			t.Errorf("format/ depends on %s; it may import only the standard library", pkg)
		}
	}
}

func TestErrorsAreOneLineWithBase64Roots(t *testing.T) {
	l := newTestLog(t, testOrigin, 5)
	_, err := VerifyProof(l.entries[1], l.proof(2, 5), l.vkey)
	if err == nil {
		t.Fatal("entry 1 verified with the proof of entry 2")
	}
	root := base64.StdEncoding.EncodeToString(l.tree.HashAt(5))
	if strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "the checkpoint's root is "+root) {
		t.Fatalf("error %q: want one line naming the checkpoint's root %s", err, root)
	}
}

// x/mod note decodes signatures leniently; a signature whose last base64
// character has its unused bits set must still be refused, or one signed
// checkpoint would have many encodings.
func TestVerifyProof_RefusesNonCanonicalSignatureBase64(t *testing.T) {
	l := newTestLog(t, testOrigin, 3)
	good := l.proof(1, 3)
	pad := bytes.LastIndex(good, []byte("=\n")) // an Ed25519 note signature is 68 bytes: one '='
	if pad < 0 {
		t.Fatal("no padded signature in the proof")
	}
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	last := strings.IndexByte(alphabet, good[pad-1])
	if last%4 != 0 {
		t.Fatalf("signature's last character %q has unused bits set", good[pad-1])
	}
	bad := bytes.Clone(good)
	bad[pad-1] = alphabet[last+1] // same decoded bytes, different text
	_, err := VerifyProof(l.entries[1], bad, l.vkey)
	if err == nil || !strings.Contains(err.Error(), "not canonical base64") {
		t.Fatalf("non-canonical signature: %v", err)
	}
}

// The verifier works offline: neither the package nor the annal-verify
// command links an HTTP or TLS client, nor Annal's own client. (Package net
// is linked, by crypto/x509, which the note library needs for its key
// types; nothing here dials.)
func TestNoNetworkPackages(t *testing.T) {
	for _, dir := range []string{".", "../cmd/annal-verify"} {
		out, err := exec.Command("go", "list", "-deps", dir).Output()
		if err != nil {
			t.Fatalf("go list %s: %v", dir, err)
		}
		for _, pkg := range strings.Fields(string(out)) {
			if pkg == "net/http" || strings.HasPrefix(pkg, "net/http/") || pkg == "crypto/tls" || strings.Contains(pkg, "annal/server") {
				t.Errorf("%s depends on %s: the verifier must work with no network", dir, pkg)
			}
		}
	}
}
