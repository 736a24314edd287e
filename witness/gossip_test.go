package witness

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/annal-dev/annal/verifier"
)

// TestGossip_SplitViewFoundByGossipAlone is the attack gossip exists for: a
// log shows one history to witness 1 and another to witnesses 2 and 3, and
// publishes the second as a real Tessera POSIX log. Each witness cosigns
// only what it was shown; they find the split by gossip alone, and every
// evidence file verifies offline.
func TestGossip_SplitViewFoundByGossipAlone(t *testing.T) {
	public := newTestLog(t, "example.com/split")
	var entries [][]byte
	for i := range 600 {
		entries = append(entries, fmt.Appendf(nil, "entry %d", i))
		public.tree.AppendData(entries[i])
	}
	hidden := public.fork(300).growTo(450)
	url, published := serveTesseraLog(t, public, entries)
	if cp, err := ParseSignedCheckpoint(published); err != nil || cp.Hash != public.root(600) {
		t.Fatalf("Tessera's checkpoint %q is not the tree of the test (%v)", published, err)
	}

	ws := startGossipGroup(t, 3, LogConfig{Origin: public.origin, Keys: []string{public.vkey}, TileURL: url}, Options{})
	ws[0].mustCosign(hidden.request(0, 450))
	ws[1].mustCosign(public.request(0, 520))
	ws[2].mustCosign(public.request(0, 300))
	ws[2].mustCosign(public.request(300, 600))
	for i, w := range ws {
		if got := w.evidence(public.vkey); len(got) != 0 {
			t.Fatalf("witness %d has evidence before any gossip", i+1)
		}
	}

	reports := make([]GossipReport, len(ws))
	for i, w := range ws {
		reports[i] = w.gossip()
	}
	// Witness 1 contradicts both others; 2 and 3 agree with each other.
	for i, want := range []struct{ consistent, evidence int }{{0, 2}, {1, 1}, {1, 1}} {
		r := reports[i]
		if r.Consistent != want.consistent || len(r.Equivocations) != want.evidence || r.Failed != 0 {
			t.Errorf("witness %d: report %+v, want %d consistent and %d equivocations", i+1, r, want.consistent, want.evidence)
		}
	}
	found := map[string]*verifier.EvidenceResult{}
	for i, w := range ws {
		ev := w.evidence(public.vkey)
		if len(ev) != len(reports[i].Equivocations) {
			t.Errorf("witness %d stored %d evidence files, reported %d", i+1, len(ev), len(reports[i].Equivocations))
		}
		for id, res := range ev {
			found[id] = res
			if !slices.Contains(reports[i].Equivocations, id) {
				t.Errorf("witness %d stored %s but did not report it", i+1, id)
			}
		}
		if logs := w.logs.String(); !strings.Contains(logs, "level=ERROR msg=\"LOG EQUIVOCATION") {
			t.Errorf("witness %d did not log the equivocation at error level:\n%s", i+1, logs)
		}
	}
	// Two splits: the hidden 450 against the public 520 and 600. Witness 1
	// found both, and each other witness the one with its own checkpoint,
	// under the same ID.
	if len(found) != 2 {
		t.Fatalf("%d distinct evidence files, want 2", len(found))
	}
	for id, res := range found {
		if res.Sizes[0] != 450 || res.Roots[0] != hidden.root(450) || res.PrefixRoot != public.root(450) {
			t.Errorf("evidence %s: %+v, want the hidden tree at 450 against the public tree's prefix", id, res)
		}
		if !(res.Sizes[1] == 520 && res.Roots[1] == public.root(520)) && !(res.Sizes[1] == 600 && res.Roots[1] == public.root(600)) {
			t.Errorf("evidence %s: larger checkpoint %d %x is not one the public witnesses cosigned", id, res.Sizes[1], res.Roots[1])
		}
	}

	// Evidence is served, one by one, and counted.
	a := ws[0].get("/evidence")
	if a.status != http.StatusOK || a.header.Get("Content-Type") != "application/json" || strings.Count(a.body, `"id":`) != 2 {
		t.Errorf("GET /evidence: %d %q", a.status, a.body)
	}
	for id := range ws[1].evidence(public.vkey) {
		stored, _ := ws[1].store.EvidenceFile(id)
		if a := ws[1].get("/evidence/" + id); a.status != http.StatusOK || a.body != string(stored) {
			t.Errorf("GET /evidence/%s: %d %q", id, a.status, a.body)
		}
	}
	m := ws[0].get("/metrics").body
	for _, want := range []string{
		`annal_witness_equivocation_evidence_total{source="gossip"} 2`,
		`annal_witness_evidence_files 2`,
		`annal_witness_gossip_checks_total{result="equivocation"} 2`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %q:\n%s", want, m)
		}
	}

	// Another round finds the same splits again and stores nothing new.
	for i, w := range ws {
		r := w.gossip()
		if !slices.Equal(r.Equivocations, reports[i].Equivocations) {
			t.Errorf("witness %d, second round: %v, want %v", i+1, r.Equivocations, reports[i].Equivocations)
		}
	}
	if m := ws[0].get("/metrics").body; !strings.Contains(m, `annal_witness_equivocation_evidence_total{source="gossip"} 2`) {
		t.Errorf("a second round counted evidence again:\n%s", m)
	}
}

// TestGossip_HonestLogNoEvidence: witnesses at many sizes of one honest
// log, its tiles published at a larger size, find every pair consistent.
// The partial tiles of their sizes are gone: size 257 needs the full tile
// (Tessera's fallback), 69999 the wider partial tile of size 70000 (the
// witness's), 65537 a tile of level 2.
func TestGossip_HonestLogNoEvidence(t *testing.T) {
	l := newTestLog(t, "example.com/honest").growTo(70000)
	tiles := serveTiles(t, l, 70000)
	ws := startGossipGroup(t, 4, LogConfig{Origin: l.origin, Keys: []string{l.vkey}, TileURL: tiles.url()}, Options{})
	for i, size := range []uint64{1, 257, 65537, 69999} {
		ws[i].mustCosign(l.request(0, size))
	}
	for i, w := range ws {
		r := w.gossip()
		if r.Consistent != 3 || len(r.Equivocations) != 0 || r.Failed != 0 {
			t.Errorf("witness %d: %+v, want 3 consistent", i+1, r)
		}
		if len(w.evidence(l.vkey)) != 0 {
			t.Errorf("witness %d recorded evidence against an honest log", i+1)
		}
	}
}

// TestGossip_TilesFollowTheSmallerCheckpoint: witness 1 was shown a fork
// larger than what witness 2 cosigned, and the log's tiles follow witness
// 2's history. The tiles cannot prove anything against the fork's root,
// but the log's own signed checkpoint, at or past the fork's size, can.
func TestGossip_TilesFollowTheSmallerCheckpoint(t *testing.T) {
	for _, tc := range []struct {
		name          string
		publishedSize uint64
		wantEvidence  bool
	}{
		{"published past the fork's size", 50, true},
		{"published at the fork's size", 40, true},
		{"published behind the fork's size", 35, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			public := newTestLog(t, "example.com/log").growTo(50)
			hidden := public.fork(20).growTo(40)
			tiles := serveTiles(t, public, tc.publishedSize)
			ws := startGossipGroup(t, 2, LogConfig{Origin: public.origin, Keys: []string{public.vkey}, TileURL: tiles.url()}, Options{})
			ws[0].mustCosign(hidden.request(0, 40))
			ws[1].mustCosign(public.request(0, 30))
			for i, w := range ws {
				r := w.gossip()
				ev := w.evidence(public.vkey)
				if !tc.wantEvidence {
					if len(ev) != 0 || r.Failed != 1 {
						t.Errorf("witness %d: %+v, %d evidence files; want one failed check and no evidence", i+1, r, len(ev))
					}
					continue
				}
				if len(ev) != 1 || len(r.Equivocations) != 1 {
					t.Fatalf("witness %d: %+v, %d evidence files; want one", i+1, r, len(ev))
				}
				res := ev[r.Equivocations[0]]
				if res.Sizes != [2]uint64{40, tc.publishedSize} {
					t.Errorf("witness %d: evidence between sizes %v, want the fork's 40 and the log's %d", i+1, res.Sizes, tc.publishedSize)
				}
			}
		})
	}
}

// TestGossip_UncheckableIsNotEvidence: checks that cannot be made are
// failures, logged, never evidence.
func TestGossip_UncheckableIsNotEvidence(t *testing.T) {
	public := newTestLog(t, "example.com/log").growTo(60)
	forkA := public.fork(10).growTo(30)
	forkB := public.fork(10).growTo(40)
	tiles := serveTiles(t, public, 60)
	for _, tc := range []struct {
		name     string
		tileURL  string
		sizes    [2]uint64
		logs     [2]*testLog
		wantLogs string
	}{
		{"no tile URL", "", [2]uint64{30, 40}, [2]*testLog{public, public}, "has no tile URL"},
		{"tiles match neither checkpoint", tiles.url(), [2]uint64{30, 40}, [2]*testLog{forkA, forkB}, "match neither checkpoint"},
		{"tiles missing", tiles.srv.URL + "/nothing/", [2]uint64{30, 40}, [2]*testLog{forkA, public}, "file does not exist"},
		{"log behind both", tiles.url(), [2]uint64{30, 40}, [2]*testLog{public, public}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "log behind both" {
				tiles := serveTiles(t, public, 35)
				tc.tileURL = tiles.url()
				tc.wantLogs = "file does not exist"
			}
			ws := startGossipGroup(t, 2, LogConfig{Origin: public.origin, Keys: []string{public.vkey}, TileURL: tc.tileURL}, Options{})
			for i, w := range ws {
				w.mustCosign(tc.logs[i].request(0, tc.sizes[i]))
			}
			for i, w := range ws {
				r := w.gossip()
				if r.Failed != 1 || len(r.Equivocations) != 0 || len(w.evidence(public.vkey)) != 0 {
					t.Errorf("witness %d: %+v, want one failed check and no evidence", i+1, r)
				}
				if logs := w.logs.String(); !strings.Contains(logs, "level=WARN msg=\"gossip: could not check") || !strings.Contains(logs, tc.wantLogs) {
					t.Errorf("witness %d: log lacks the failure %q:\n%s", i+1, tc.wantLogs, logs)
				}
			}
		})
	}
}

// TestGossip_SameSizeNeedsNoTiles: two witnesses shown two trees of one
// size find it without any tile URL.
func TestGossip_SameSizeNeedsNoTiles(t *testing.T) {
	a := newTestLog(t, "example.com/log").growTo(10)
	b := a.fork(4).growTo(10)
	ws := startGossipGroup(t, 2, LogConfig{Origin: a.origin, Keys: []string{a.vkey}}, Options{})
	ws[0].mustCosign(a.request(0, 10))
	ws[1].mustCosign(b.request(0, 10))
	var ids []string
	for i, w := range ws {
		r := w.gossip()
		ev := w.evidence(a.vkey)
		if len(ev) != 1 || len(r.Equivocations) != 1 {
			t.Fatalf("witness %d: %+v, %d evidence files, want one", i+1, r, len(ev))
		}
		res := ev[r.Equivocations[0]]
		if res.Sizes != [2]uint64{10, 10} || res.Roots[0] == res.Roots[1] {
			t.Errorf("witness %d: %+v", i+1, res)
		}
		ids = append(ids, r.Equivocations[0])
	}
	if ids[0] != ids[1] {
		t.Errorf("the two witnesses named one split %s and %s", ids[0], ids[1])
	}
	// The file keeps the peer's cosignature beside the log's signature.
	file, _ := ws[0].store.EvidenceFile(ids[0])
	if !strings.Contains(string(file), "— witness.test/g1 ") || !strings.Contains(string(file), "— witness.test/g2 ") {
		t.Errorf("evidence lacks the witnesses' cosignatures:\n%s", file)
	}
}

// A peer without a monitoring endpoint (omniwitness, litewitness: 404 for
// every log) is compared through the log's own published checkpoint when
// the log publishes the peer's cosignature; when no log does, the round
// names the peer (and warns) instead of counting it as skipped in silence.
func TestGossip_PeerWithoutMonitoringEndpoint(t *testing.T) {
	l := newTestLog(t, "example.com/published").growTo(10)
	tiles := serveTiles(t, l, 10)
	cfg := LogConfig{Origin: l.origin, Keys: []string{l.vkey}, TileURL: tiles.url()}
	ws := startGossipGroup(t, 2, cfg, Options{})
	a, b := ws[0], ws[1]
	a.mustCosign(l.request(0, 5))
	// b is the peer as a log sees it: it cosigns, but a gossip peer finds
	// no monitoring endpoint at its address.
	cosig := b.mustCosign(l.request(0, 10)).body
	noEndpoint := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(noEndpoint.Close)
	if err := a.store.RemovePeer(b.w.Cosigner().Name()); err != nil {
		t.Fatal(err)
	}
	a.addPeer(noEndpoint.URL, b.w.Cosigner().VerifierKey())

	// The log publishes only its own signature: nothing to compare with.
	r := a.gossip()
	if r.Consistent != 0 || len(r.NoMonitoring) != 1 || r.NoMonitoring[0] != b.w.Cosigner().Name() {
		t.Fatalf("a peer without a monitoring endpoint, no cosignature published: %+v", r)
	}
	// The log publishes the peer's cosignature with its checkpoint.
	tiles.mu.Lock()
	tiles.files["checkpoint"] = append(l.checkpoint(10), cosig...)
	tiles.mu.Unlock()
	r = a.gossip()
	if r.Consistent != 1 || r.ThroughLog != 1 || len(r.NoMonitoring) != 0 || r.Failed != 0 {
		t.Fatalf("compared through the log's published checkpoint: %+v", r)
	}
}
