package witness

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/annal-dev/annal/checkpoints"
	"github.com/annal-dev/annal/format/evidence"
	"github.com/annal-dev/annal/verifier"
	"golang.org/x/mod/sumdb/note"
)

// TestEvidence_AddCheckpointSameSize: the case the core witness refuses
// with 422 (or 409 when the old size is wrong too), a checkpoint of the
// stored size with another root signed by the log, is recorded as evidence
// before the answer, once.
func TestEvidence_AddCheckpointSameSize(t *testing.T) {
	tw := startWitness(t, t.TempDir(), Options{})
	l := newTestLog(t, "example.com/log").growTo(10)
	f := l.fork(6).growTo(10)
	tw.addLog(l)
	tw.mustCosign(l.request(0, 10))
	if a := tw.post(requestBody(10, nil, f.checkpoint(10))); a.status != http.StatusUnprocessableEntity {
		t.Fatalf("same size, other root: %d %q, want 422", a.status, a.body)
	}
	ev := tw.evidence(l.vkey)
	if len(ev) != 1 {
		t.Fatalf("%d evidence files, want 1", len(ev))
	}
	for _, res := range ev {
		if res.Sizes != [2]uint64{10, 10} {
			t.Errorf("evidence %+v", res)
		}
	}
	if a := tw.post(requestBody(4, nil, f.checkpoint(10))); a.status != http.StatusConflict {
		t.Fatalf("same size, other root, wrong old size: %d %q, want 409", a.status, a.body)
	}
	if got := tw.evidence(l.vkey); len(got) != 1 {
		t.Errorf("the same split made %d evidence files, want 1", len(got))
	}
	list, _ := tw.store.Evidence()
	if list[0].Source != EvidenceFromAddCheckpoint {
		t.Errorf("source %q", list[0].Source)
	}
	if m := tw.get("/metrics").body; !strings.Contains(m, `annal_witness_equivocation_evidence_total{source="add-checkpoint"} 1`) {
		t.Errorf("metrics:\n%s", m)
	}
	// The witness still holds its first view.
	if cp, _ := tw.store.Latest(LogID(l.origin)); cp.Size != 10 || [32]byte(cp.Root) != l.root(10) {
		t.Errorf("stored checkpoint changed: %+v", cp)
	}
}

// TestEvidence_SurvivesRestart: evidence is in the bbolt state, served
// unchanged by the next witness on the folder.
func TestEvidence_SurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	tw := startWitness(t, dir, Options{})
	l := newTestLog(t, "example.com/log").growTo(10)
	f := l.fork(3).growTo(10)
	tw.addLog(l)
	tw.mustCosign(l.request(0, 10))
	tw.post(requestBody(10, nil, f.checkpoint(10)))
	before := tw.evidence(l.vkey)
	list, _ := tw.store.Evidence()
	if len(before) != 1 {
		t.Fatalf("%d evidence files", len(before))
	}
	file, _ := tw.store.EvidenceFile(list[0].ID)
	tw.stop()

	again := startWitness(t, dir, Options{})
	after, err := again.store.Evidence()
	if err != nil || len(after) != 1 || after[0] != list[0] {
		t.Fatalf("after restart: %+v %v, want %+v", after, err, list)
	}
	if a := again.get("/evidence/" + list[0].ID); a.status != http.StatusOK || a.body != string(file) {
		t.Errorf("after restart, GET /evidence/%s: %d %q", list[0].ID, a.status, a.body)
	}
	if m := again.get("/metrics").body; !strings.Contains(m, "annal_witness_evidence_files 1") {
		t.Errorf("metrics after restart:\n%s", m)
	}
}

// TestEvidence_KeyNotNamedAfterOrigin: the format needs an Ed25519 key
// named after the origin. A log trusted under another name still has its
// equivocation logged, but no file that would not verify is written.
func TestEvidence_KeyNotNamedAfterOrigin(t *testing.T) {
	tw := startWitness(t, t.TempDir(), Options{})
	l := newTestLog(t, "example.com/log").growTo(10)
	skey, vkey, err := note.GenerateKey(nil, "other-name")
	if err != nil {
		t.Fatal(err)
	}
	signer, _ := note.NewSigner(skey)
	if err := tw.store.AddLog(LogConfig{Origin: l.origin, Keys: []string{vkey}}); err != nil {
		t.Fatal(err)
	}
	sign := func(size uint64, root [32]byte) []byte {
		return l.signWith(signer, checkpoints.Checkpoint{Origin: l.origin, Size: size, Hash: root})
	}
	tw.mustCosign(requestBody(0, nil, sign(10, l.root(10))))
	if a := tw.post(requestBody(10, nil, sign(10, l.fork(2).growTo(10).root(10)))); a.status != http.StatusUnprocessableEntity {
		t.Fatalf("%d %q", a.status, a.body)
	}
	if list, _ := tw.store.Evidence(); len(list) != 0 {
		t.Errorf("evidence written: %+v", list)
	}
	if logs := tw.logs.String(); !strings.Contains(logs, "no evidence file could be written") {
		t.Errorf("equivocation not logged:\n%s", logs)
	}
}

func TestEvidence_StoreDedupAndLimit(t *testing.T) {
	tw := startWitness(t, t.TempDir(), Options{})
	rec := func(origin string, i int) EvidenceRecord {
		id := evidenceID(origin, checkpoints.Checkpoint{Size: uint64(i)}, checkpoints.Checkpoint{Size: uint64(i + 1)})
		return EvidenceRecord{ID: hex.EncodeToString(id[:]), Origin: origin, Sizes: [2]uint64{uint64(i), uint64(i + 1)}, FoundAt: time.Unix(int64(i), 0).UTC()}
	}
	for i := range MaxEvidencePerLog {
		if added, err := tw.store.putEvidence(rec("a", i), []byte("{}\n")); !added || err != nil {
			t.Fatalf("put %d: %v %v", i, added, err)
		}
	}
	if added, err := tw.store.putEvidence(rec("a", 0), []byte("{}\n")); added || err != nil {
		t.Errorf("put again: %v %v, want not added and no error", added, err)
	}
	if _, err := tw.store.putEvidence(rec("a", MaxEvidencePerLog), []byte("{}\n")); !errors.Is(err, ErrEvidenceLimit) {
		t.Errorf("put past the limit: %v", err)
	}
	if added, err := tw.store.putEvidence(rec("b", 0), []byte("{}\n")); !added || err != nil {
		t.Errorf("another log is not limited by the first: %v %v", added, err)
	}
	list, err := tw.store.Evidence()
	if err != nil || len(list) != MaxEvidencePerLog+1 {
		t.Fatalf("%d records, %v", len(list), err)
	}
	for _, id := range []string{"", "zz", strings.Repeat("A", 64), list[0].ID[:62]} {
		if _, err := tw.store.EvidenceFile(id); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("EvidenceFile(%q): %v", id, err)
		}
		if a := tw.get("/evidence/" + id); id != "" && a.status != http.StatusNotFound {
			t.Errorf("GET /evidence/%s: %d", id, a.status)
		}
	}
	unknown := evidenceID("c", checkpoints.Checkpoint{}, checkpoints.Checkpoint{})
	if _, err := tw.store.EvidenceFile(hex.EncodeToString(unknown[:])); !errors.Is(err, ErrUnknownEvidence) {
		t.Errorf("unknown ID: %v", err)
	}
}

// TestEvidence_IDIgnoresOrderAndSignatures: one split has one ID, whoever
// saw which side.
func TestEvidence_IDIgnoresOrderAndSignatures(t *testing.T) {
	a := checkpoints.Checkpoint{Origin: "o", Size: 5, Hash: [32]byte{1}}
	b := checkpoints.Checkpoint{Origin: "o", Size: 5, Hash: [32]byte{2}}
	c := checkpoints.Checkpoint{Origin: "o", Size: 7, Hash: [32]byte{0}}
	if evidenceID("o", a, b) != evidenceID("o", b, a) || evidenceID("o", a, c) != evidenceID("o", c, a) {
		t.Error("the ID depends on the order")
	}
	if evidenceID("o", a, b) == evidenceID("o", a, c) || evidenceID("o", a, b) == evidenceID("p", a, b) {
		t.Error("two splits share an ID")
	}
}

func TestHTTP_EvidenceRoutes(t *testing.T) {
	tw := startWitness(t, t.TempDir(), Options{})
	if a := tw.get("/evidence"); a.status != http.StatusOK || strings.TrimSpace(a.body) != "[]" {
		t.Errorf("GET /evidence with none: %d %q", a.status, a.body)
	}
	for _, path := range []string{"/abc/def", "/evidence/checkpoint", "/evidence/" + strings.Repeat("0", 64)} {
		if a := tw.get(path); a.status != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404", path, a.status)
		}
	}
	resp, err := http.Post(tw.srv.URL+"/evidence", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /evidence: %d", resp.StatusCode)
	}
	m := tw.get("/metrics").body
	for _, want := range []string{`annal_witness_equivocation_evidence_total{source="gossip"} 0`, `annal_witness_gossip_checks_total{result="failed"} 0`, "annal_witness_evidence_files 0"} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

// TestEvidence_CheckRefusesWhatTheVerifierRefuses: the witness's own check
// and the offline verifier agree on broken files.
func TestEvidence_CheckRefusesWhatTheVerifierRefuses(t *testing.T) {
	tw := startWitness(t, t.TempDir(), Options{})
	l := newTestLog(t, "example.com/log").growTo(10)
	tw.addLog(l)
	tw.mustCosign(l.request(0, 10))
	tw.post(requestBody(10, nil, l.fork(5).growTo(10).checkpoint(10)))
	list, _ := tw.store.Evidence()
	if len(list) != 1 {
		t.Fatal("no evidence")
	}
	good, _ := tw.store.EvidenceFile(list[0].ID)
	for i, bad := range []string{
		strings.Replace(string(good), evidence.Format, evidence.Format+"x", 1),
		strings.Replace(string(good), `"origin":"example.com/log"`, `"origin":"example.com/other"`, 1),
		strings.Replace(string(good), `"format"`, `"extra":1,"format"`, 1),
		string(good[:len(good)/2]),
		fmt.Sprintf(`{"format":%q,"origin":"example.com/log","log_key":%q,"checkpoints":[%q,%q]}`, evidence.Format, l.vkey, l.checkpoint(10), l.checkpoint(10)),
	} {
		_, verr := verifier.VerifyEvidence([]byte(bad), "")
		if err := checkEvidence([]byte(bad)); err == nil || verr == nil {
			t.Errorf("file %d: witness %v, verifier %v; both must refuse", i, err, verr)
		}
	}
	if err := checkEvidence(good); err != nil {
		t.Errorf("good file: %v", err)
	}
}
