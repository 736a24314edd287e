package server

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// CORS: an allowed origin's preflight is answered with the methods and
// headers a client sends (the credential, the signature), and its requests
// carry the origin back; any other origin gets no CORS header, so a browser
// keeps the answer from its page; credentials (cookies) are never allowed.
func TestCORSAnswersOnlyAllowedOrigins(t *testing.T) {
	ts := newTestServer(t)
	s := New(ts.k, discardLogger())
	if err := s.AllowOrigins("http://app.example:5173", "https://dash.example"); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"app.example", "https://dash.example/path", "ftp://x", "https://", "https://u:p@x.example", "*"} {
		if err := s.AllowOrigins(bad); err == nil {
			t.Errorf("origin %q was taken", bad)
		}
	}
	if err := s.AllowOrigins("http://app.example:5173", "https://dash.example"); err != nil {
		t.Fatal(err)
	}
	serve := func(method, path, origin string, header map[string]string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(method, path, nil)
		if origin != "" {
			r.Header.Set("Origin", origin)
		}
		for k, v := range header {
			r.Header.Set(k, v)
		}
		w := httptest.NewRecorder()
		s.ServeHTTP(w, r)
		return w
	}
	pre := map[string]string{"Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "authorization, content-type, annal-signature"}
	w := serve(http.MethodOptions, "/v1/actions", "http://app.example:5173", pre)
	h := w.Header()
	if w.Code != http.StatusNoContent || h.Get("Access-Control-Allow-Origin") != "http://app.example:5173" ||
		!strings.Contains(h.Get("Access-Control-Allow-Headers"), "Annal-Signature") || !strings.Contains(h.Get("Access-Control-Allow-Methods"), "POST") {
		t.Fatalf("an allowed preflight: %d %v", w.Code, h)
	}
	if h.Get("Access-Control-Allow-Credentials") != "" {
		t.Fatal("credentials allowed across origins")
	}
	w = serve(http.MethodGet, "/v1/info", "https://dash.example", nil)
	if w.Code != http.StatusOK || w.Header().Get("Access-Control-Allow-Origin") != "https://dash.example" ||
		!strings.Contains(w.Header().Get("Access-Control-Expose-Headers"), "Retry-After") || w.Header().Get("Vary") != "Origin" {
		t.Fatalf("an allowed request: %d %v", w.Code, w.Header())
	}
	for _, origin := range []string{"https://evil.example", "http://app.example:5174", "null"} {
		w = serve(http.MethodOptions, "/v1/actions", origin, pre)
		if w.Header().Get("Access-Control-Allow-Origin") != "" || w.Code == http.StatusNoContent {
			t.Errorf("origin %s: %d %v", origin, w.Code, w.Header())
		}
	}
	if w := serve(http.MethodGet, "/v1/info", "", nil); w.Header().Get("Access-Control-Allow-Origin") != "" {
		t.Fatal("a request with no origin got CORS headers")
	}
}
