package server

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/annal-dev/annal/api"
)

// answerBoth answers r through writeReceipt and through writeJSON.
func answerBoth(status int, r api.Receipt) (fast, general *httptest.ResponseRecorder) {
	fast, general = httptest.NewRecorder(), httptest.NewRecorder()
	writeReceipt(fast, status, &r)
	writeJSON(general, status, r)
	return fast, general
}

// A receipt answer is the same bytes, status and headers whether written
// by hand or by writeJSON, and the hand writes it whenever its strings are
// plain.
func TestWriteReceipt_SameAsWriteJSON(t *testing.T) {
	committed := api.Receipt{Status: "committed", EventID: "017f22e2-79b2-7cc3-98c4-dc0c0c07398f", Index: 1 << 40,
		LeafHash: "ab12", Time: "2026-11-26T23:01:02.123456789Z", Actor: "agent-1", Type: "mutate", Target: "workspace/a/b", Cost: 3}
	cases := map[string]struct {
		r     api.Receipt
		plain bool
	}{
		"committed":       {committed, true},
		"with envelope":   {func() api.Receipt { r := committed; r.Envelope = "env-1"; return r }(), true},
		"held":            {func() api.Receipt { r := committed; r.Status, r.HoldID = "held", "hold-1"; return r }(), true},
		"zero figures":    {func() api.Receipt { r := committed; r.Index, r.Cost = 0, 0; return r }(), true},
		"proof error":     {func() api.Receipt { r := committed; r.ProofError = "no checkpoint yet"; return r }(), true},
		"trace id":        {func() api.Receipt { r := committed; r.TraceID = "4bf92f3577b34da6a3ce929d0e0e4736"; return r }(), true},
		"unicode target":  {func() api.Receipt { r := committed; r.Target = "docs/日本/\u2028"; return r }(), false},
		"quote in target": {func() api.Receipt { r := committed; r.Target = `a/"b"`; return r }(), false},
		"html in target":  {func() api.Receipt { r := committed; r.Target = "a/<b>&c"; return r }(), false},
		"published":       {func() api.Receipt { r := committed; r.Checkpoint, r.Proof = "origin\n5\nroot\n", "index 1\n"; return r }(), false},
		"hold answer":     {func() api.Receipt { r := committed; r.HoldID, r.Reason = "hold-1", "checked by phone"; return r }(), true},
		"unicode reason":  {func() api.Receipt { r := committed; r.HoldID, r.Reason = "hold-1", "geprüft <ok>"; return r }(), false},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			for _, status := range []int{http.StatusOK, http.StatusAccepted} {
				fast, general := answerBoth(status, c.r)
				if fast.Code != general.Code || !bytes.Equal(fast.Body.Bytes(), general.Body.Bytes()) {
					t.Fatalf("writeReceipt: %d %s\nwriteJSON: %d %s", fast.Code, fast.Body, general.Code, general.Body)
				}
				for _, h := range []string{"Content-Type", "Cache-Control"} {
					if fast.Header().Get(h) != general.Header().Get(h) {
						t.Errorf("%s: %q against %q", h, fast.Header().Get(h), general.Header().Get(h))
					}
				}
			}
			if _, plain := appendReceipt(nil, &c.r); plain != c.plain {
				t.Errorf("written by hand: %v, want %v", plain, c.plain)
			}
		})
	}
}

// FuzzAppendReceipt: whatever the strings, what appendReceipt writes when
// it writes is what writeJSON writes.
func FuzzAppendReceipt(f *testing.F) {
	f.Add("committed", "", "workspace/a", "env-1", uint64(3))
	f.Add("held", "hold-1", "a/<b>", "", uint64(0))
	f.Add("committed", "", "docs/日本\u2028\"\\", "e\n", uint64(1<<63))
	f.Fuzz(func(t *testing.T, status, holdID, target, envelope string, cost uint64) {
		r := api.Receipt{Status: status, HoldID: holdID, EventID: "id", Index: cost / 3, LeafHash: "00", Time: "t", Actor: "a", Type: "mutate", Target: target, Envelope: envelope, Cost: cost,
			Reason: envelope + holdID, TraceID: holdID}
		fast, general := answerBoth(http.StatusOK, r)
		if !bytes.Equal(fast.Body.Bytes(), general.Body.Bytes()) {
			t.Fatalf("writeReceipt %q, writeJSON %q", fast.Body, general.Body)
		}
	})
}
