package logserver

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// FuzzSubmitBody: any body sent to POST /v1/actions gets 200 or a 4xx with
// a message, never a 5xx or a panic; a refused body appends nothing.
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
// existing tile or a 404; nothing outside the tile tree is ever served.
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
