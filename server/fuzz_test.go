package server

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/annal-dev/annal/api"
)

// FuzzSubmitBody: any body sent to POST /v1/actions gets 200 or a 4xx with
// a message, never a 5xx or a panic; a refused body appends nothing; an
// accepted one commits the type and target its members spelt exactly
// "type" and "target" say.
func FuzzSubmitBody(f *testing.F) {
	for _, s := range []string{
		`{"type":"mutate","target":"workspace/a","payload":{"x":1}}`,
		`{"type":"observe","target":"a"}`,
		`{"type":"execute","target":"a","payload":{"input_oid":"sha256:00","exit_code":0}}`,
		`{"type":"mutate","target":"a","payload_hash":"sha256:0000000000000000000000000000000000000000000000000000000000000000"}`,
		`{"type":"mutate","target":"a","payload":[1e400]}`,
		`{"type":"mutate","target":"a/../b"}`,
		"{\"type\":\"mutate\",\"target\":\"\xff\"}",
		`{"type":"mutate"`,
		``,
		`{"type":"mutate","target":"workspace/checked","Target":"workspace/logged"}`,
		`{"type":"observe","TYPE":"mutate","target":"a"}`,
		`{"type":"observe","target":"a","ſession":"s"}`,
	} {
		f.Add([]byte(s))
	}
	ts := newTestServer(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		before := ts.size(t)
		req := httptest.NewRequest(http.MethodPost, "/v1/actions", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+ts.rootCred)
		rec := httptest.NewRecorder()
		New(ts.k, discardLogger()).ServeHTTP(rec, req)
		switch {
		case rec.Code == http.StatusOK:
			if ts.size(t) != before+1 {
				t.Fatalf("200 but the log went from %d to %d", before, ts.size(t))
			}
			var members map[string]json.RawMessage // exact keys
			var rc api.Receipt
			var typ, target string
			if err := json.Unmarshal(body, &members); err != nil || json.Unmarshal(rec.Body.Bytes(), &rc) != nil ||
				json.Unmarshal(members["type"], &typ) != nil || json.Unmarshal(members["target"], &target) != nil {
				t.Fatalf("200 for body %q: %v", body, err)
			}
			if rc.Type != typ || rc.Target != target {
				t.Fatalf("body %q says %s %q, but %s %q was committed", body, typ, target, rc.Type, rc.Target)
			}
		case rec.Code >= 400 && rec.Code < 500:
			if !strings.Contains(rec.Body.String(), `"error"`) {
				t.Fatalf("%d without an error message: %s", rec.Code, rec.Body)
			}
			if ts.size(t) != before {
				t.Fatalf("refused with %d but the log went from %d to %d", rec.Code, before, ts.size(t))
			}
		default:
			t.Fatalf("status %d for body %q: %s", rec.Code, body, rec.Body)
		}
	})
}

// FuzzTilePath: any path under /tile/ is either the canonical path of an
// existing tile (or of a partial cut from an existing full one) or a 404;
// nothing outside the tile tree is ever served.
func FuzzTilePath(f *testing.F) {
	for _, s := range []string{"0/000", "0/000.p/1", "entries/000.p/1", "0/x001/234", "../.state/treeState", "1/000.p/", "entries/x000/000", "0/000.p/01"} {
		f.Add(s)
	}
	ts := newTestServer(f)
	h := New(ts.k, discardLogger())
	f.Fuzz(func(t *testing.T, p string) {
		req, err := http.NewRequest(http.MethodGet, "http://x/tile/"+p, nil)
		if err != nil {
			return
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		switch rec.Code {
		case http.StatusOK:
			if strings.Contains(req.URL.Path, "..") || strings.Contains(req.URL.Path, ".state") {
				t.Fatalf("served %q", req.URL.Path)
			}
		case http.StatusNotFound, http.StatusMovedPermanently, http.StatusTemporaryRedirect, http.StatusBadRequest:
		default:
			t.Fatalf("GET /tile/%s = %d", p, rec.Code)
		}
	})
}

// FuzzControlBody: a body sent to an execution control endpoint is either
// taken (2xx, one event more) or refused with a 4xx naming the error and
// nothing appended; never a 5xx.
func FuzzControlBody(f *testing.F) {
	paths := []string{"/v1/elevations", "/v1/sessions", "/v1/sagas", "/v1/policies/p", "/v1/descriptors/d", "/v1/rings/config"}
	for i, s := range []string{
		`{"agent":"agent-x","ring":1,"reason":"r"}`,
		`{"id":"s1","config":{"isolation":"READ_COMMITTED","min_eff_score":0.5}}`,
		`{"id":"sg","steps":[{"id":"a","action":"x","compensation":"y"}]}`,
		`{"name":"p","blocked_actions":["x"],"blocked_patterns":["\\bssn\\b"]}`,
		`{"descriptor":{"action_id":"d","name":"d","execute_api":"/d","reversibility":"NONE","is_read_only":false,"is_admin":false},"applies_to":[{"pattern":"x/**","actions":["mutate"]}]}`,
		`{"network_allowlist":["api.example.com","*.corp.example:443"]}`,
		`{"config":{"max_participants":"10"}}`, `{"id":"s\n"}`, `{"name":"p","blocked_patterns":["x*"]}`, ``, `null`,
	} {
		f.Add(uint8(i), []byte(s))
	}
	ts := newTestServer(f)
	f.Fuzz(func(t *testing.T, which uint8, body []byte) {
		path := paths[int(which)%len(paths)]
		method := http.MethodPost
		if strings.HasPrefix(path, "/v1/policies/") || strings.HasPrefix(path, "/v1/descriptors/") || path == "/v1/rings/config" {
			method = http.MethodPut
		}
		before := ts.size(t)
		req := httptest.NewRequest(method, path, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+ts.rootCred)
		rec := httptest.NewRecorder()
		New(ts.k, discardLogger()).ServeHTTP(rec, req)
		switch {
		case rec.Code >= 200 && rec.Code < 300:
			if ts.size(t) != before+1 {
				t.Fatalf("%s %s: %d but the log went from %d to %d", method, path, rec.Code, before, ts.size(t))
			}
		case rec.Code >= 400 && rec.Code < 500:
			if !strings.Contains(rec.Body.String(), `"error"`) {
				t.Fatalf("%d without an error message: %s", rec.Code, rec.Body)
			}
			if ts.size(t) != before {
				t.Fatalf("refused with %d but the log went from %d to %d", rec.Code, before, ts.size(t))
			}
		default:
			t.Fatalf("%s %s: status %d for body %q: %s", method, path, rec.Code, body, rec.Body)
		}
	})
}

// FuzzEvidenceList: a witness's evidence list is outside input; whatever
// it holds, the parse returns records of the asked origin only, with ids
// that are safe to put in a URL path, or an error.
func FuzzEvidenceList(f *testing.F) {
	id := strings.Repeat("ab", 32)
	f.Add([]byte(`[]`))
	f.Add([]byte(`[{"id":"` + id + `","origin":"o.example/log","sizes":[3,5],"source":"gossip","found_at":"2026-11-25T00:00:00Z"}]`))
	f.Add([]byte(`[{"id":"../../x","origin":"o.example/log"}]`))
	f.Add([]byte(`{"not":"a list"}`))
	f.Add([]byte(`[{"id":"` + id + `","origin":"other"}]`))
	f.Fuzz(func(t *testing.T, body []byte) {
		out, err := parseEvidenceList(body, "http://w.example", "o.example/log")
		if err != nil {
			return
		}
		for _, e := range out {
			if !evidenceID.MatchString(e.ID) || e.URL != "http://w.example/evidence/"+e.ID {
				t.Fatalf("record %+v", e)
			}
		}
	})
}
