package server

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// UnknownCredential tells a follower which reads it cannot answer itself:
// a bearer credential or console session its kernel does not know, never
// a request without one or with one it knows.
func TestUnknownCredential(t *testing.T) {
	ts := newTestServer(t)
	s := New(ts.k, discardLogger())
	cookie, _ := signIn(t, ts.srv.Client(), ts.srv.URL, ts.rootCred)
	cases := []struct {
		name    string
		header  http.Header
		cookie  *http.Cookie
		unknown bool
	}{
		{name: "no credential"},
		{name: "root", header: http.Header{"Authorization": {"Bearer " + ts.rootCred}}},
		{name: "a new credential", header: http.Header{"Authorization": {"Bearer annal_not-yet-folded"}}, unknown: true},
		{name: "another scheme", header: http.Header{"Authorization": {"Basic eDp5"}}, unknown: true},
		{name: "a session another server opened", cookie: cookie, unknown: true},
		{name: "an empty cookie", cookie: &http.Cookie{Name: consoleCookie, Value: ""}},
	}
	for _, c := range cases {
		r := httptest.NewRequest("GET", "/v1/whoami", nil)
		for k, v := range c.header {
			r.Header[k] = v
		}
		if c.cookie != nil {
			r.AddCookie(c.cookie)
		}
		if got := s.UnknownCredential(r); got != c.unknown {
			t.Errorf("%s: unknown %v", c.name, got)
		}
	}
	// The server that opened the session knows it.
	r := httptest.NewRequest("GET", "/v1/whoami", nil)
	r.AddCookie(cookie)
	if ts.srv.Config.Handler.(*Server).UnknownCredential(r) {
		t.Error("the server that signed the session in does not know it")
	}
}
