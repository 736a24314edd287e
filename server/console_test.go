package server

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/annal-dev/annal/api"
)

// consoleRequest sends one request as a browser with the console cookie
// would: cookie, optional CSRF token and extra headers.
func consoleRequest(t *testing.T, c *http.Client, method, url string, cookie *http.Cookie, csrf string, body string, headers map[string]string) (*http.Response, []byte) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if cookie != nil {
		req.AddCookie(cookie)
	}
	if csrf != "" {
		req.Header.Set(csrfHeader, csrf)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp, raw
}

func signIn(t *testing.T, c *http.Client, base, cred string) (*http.Cookie, api.ConsoleSession) {
	t.Helper()
	body, _ := json.Marshal(api.SignInRequest{Credential: cred})
	resp, raw := consoleRequest(t, c, "POST", base+"/ui/session", nil, "", string(body), nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("sign in: %d %s", resp.StatusCode, raw)
	}
	var sess api.ConsoleSession
	if err := json.Unmarshal(raw, &sess); err != nil {
		t.Fatal(err)
	}
	for _, ck := range resp.Cookies() {
		if ck.Name == consoleCookie {
			return ck, sess
		}
	}
	t.Fatalf("sign in set no %s cookie: %v", consoleCookie, resp.Header["Set-Cookie"])
	return nil, sess
}

// TestConsoleSessionCookie: signing in sets an httpOnly, SameSite=Strict
// cookie (not Secure over plain HTTP), which then authenticates the API.
func TestConsoleSessionCookie(t *testing.T) {
	ts := newTestServer(t)
	c := ts.srv.Client()
	cookie, sess := signIn(t, c, ts.srv.URL, ts.rootCred)
	if !cookie.HttpOnly || cookie.SameSite != http.SameSiteStrictMode || cookie.Path != "/" || cookie.Secure {
		t.Errorf("cookie %+v: want HttpOnly, SameSite=Strict, Path=/, not Secure over HTTP", cookie)
	}
	if sess.Actor.ID != "root" || len(sess.CSRF) < 40 || sess.CSRF == cookie.Value {
		t.Errorf("session %+v", sess)
	}
	resp, raw := consoleRequest(t, c, "GET", ts.srv.URL+"/v1/whoami", cookie, "", "", nil)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(raw), `"id":"root"`) {
		t.Errorf("whoami by cookie: %d %s", resp.StatusCode, raw)
	}
	// The session answers the page's reload with the same token.
	resp, raw = consoleRequest(t, c, "GET", ts.srv.URL+"/ui/session", cookie, "", "", nil)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(raw), sess.CSRF) {
		t.Errorf("GET /ui/session: %d %s", resp.StatusCode, raw)
	}
	// A bearer credential wins over a cookie: the header is what a script
	// or CLI means.
	agentID, agentCred := ts.newAgent(t, agentSpec{name: "a", energy: 10})
	req, _ := http.NewRequest("GET", ts.srv.URL+"/v1/whoami", nil)
	req.AddCookie(cookie)
	req.Header.Set("Authorization", "Bearer "+agentCred)
	r, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ = io.ReadAll(r.Body)
	r.Body.Close()
	if !strings.Contains(string(raw), agentID) {
		t.Errorf("bearer + cookie: %s", raw)
	}

	// Over TLS the cookie is Secure.
	tlsSrv := httptest.NewTLSServer(New(ts.k, discardLogger()))
	defer tlsSrv.Close()
	secure, _ := signIn(t, tlsSrv.Client(), tlsSrv.URL, ts.rootCred)
	if !secure.Secure {
		t.Errorf("cookie over TLS is not Secure: %+v", secure)
	}
}

// TestConsoleCSRF: a state-changing request authenticated by the cookie
// needs the session's token, and is refused from another site; refused
// requests change nothing.
func TestConsoleCSRF(t *testing.T) {
	ts := newTestServer(t)
	c := ts.srv.Client()
	agentID, _ := ts.newAgent(t, agentSpec{name: "target", energy: 10})
	cookie, sess := signIn(t, c, ts.srv.URL, ts.rootCred)
	freeze := `{"status":"frozen","reason":"csrf test"}`
	path := ts.srv.URL + "/v1/actors/" + agentID + "/status"
	size := ts.size(t)
	for _, tc := range []struct {
		name    string
		csrf    string
		headers map[string]string
	}{
		{"no token", "", nil},
		{"wrong token", strings.Repeat("A", len(sess.CSRF)), nil},
		{"the cookie as token", cookie.Value, nil},
		{"from another site", sess.CSRF, map[string]string{"Sec-Fetch-Site": "cross-site"}},
		{"from a sibling site", sess.CSRF, map[string]string{"Sec-Fetch-Site": "same-site"}},
	} {
		resp, raw := consoleRequest(t, c, "POST", path, cookie, tc.csrf, freeze, tc.headers)
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s: %d %s, want 403", tc.name, resp.StatusCode, raw)
		}
	}
	if got := ts.size(t); got != size {
		t.Fatalf("refused console requests wrote %d entries", got-size)
	}
	resp, raw := consoleRequest(t, c, "POST", path, cookie, sess.CSRF, freeze, map[string]string{"Sec-Fetch-Site": "same-origin"})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("with the token: %d %s", resp.StatusCode, raw)
	}
	a := decode[api.Actor](t, ts.call(t, "GET", "/v1/actors/"+agentID, ts.rootCred, nil).ok(t))
	if a.Status != "frozen" {
		t.Errorf("status after the console froze it: %q", a.Status)
	}

	// Signing out ends the session: the cookie then authenticates nothing.
	resp, _ = consoleRequest(t, c, "DELETE", ts.srv.URL+"/ui/session", cookie, "", "", nil)
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("sign out without the token: %d, want 403", resp.StatusCode)
	}
	resp, _ = consoleRequest(t, c, "DELETE", ts.srv.URL+"/ui/session", cookie, sess.CSRF, "", nil)
	if resp.StatusCode != http.StatusNoContent {
		t.Errorf("sign out: %d", resp.StatusCode)
	}
	resp, _ = consoleRequest(t, c, "GET", ts.srv.URL+"/v1/whoami", cookie, "", "", nil)
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("whoami after sign out: %d, want 401", resp.StatusCode)
	}
}

// TestConsoleSignInRefusals: bad sign-ins get clear errors and no cookie.
func TestConsoleSignInRefusals(t *testing.T) {
	ts := newTestServer(t)
	c := ts.srv.Client()
	for _, tc := range []struct {
		name, body, contentType string
		headers                 map[string]string
		want                    int
	}{
		{"wrong credential", `{"credential":"annal-nope"}`, "application/json", nil, http.StatusUnauthorized},
		{"form post", `credential=x`, "application/x-www-form-urlencoded", nil, http.StatusBadRequest},
		{"text/plain (a cross-site simple request)", `{"credential":"` + ts.rootCred + `"}`, "text/plain", nil, http.StatusBadRequest},
		{"unknown member", `{"credential":"` + ts.rootCred + `","admin":true}`, "application/json", nil, http.StatusBadRequest},
		{"too large", `{"credential":"` + strings.Repeat("x", 8<<10) + `"}`, "application/json", nil, http.StatusRequestEntityTooLarge},
		{"cross-site", `{"credential":"` + ts.rootCred + `"}`, "application/json", map[string]string{"Sec-Fetch-Site": "cross-site"}, http.StatusForbidden},
	} {
		req, _ := http.NewRequest("POST", ts.srv.URL+"/ui/session", bytes.NewBufferString(tc.body))
		req.Header.Set("Content-Type", tc.contentType)
		for k, v := range tc.headers {
			req.Header.Set(k, v)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.want || len(resp.Cookies()) != 0 || !strings.Contains(string(raw), `"error"`) {
			t.Errorf("%s: %d %s cookies %v, want %d and no cookie", tc.name, resp.StatusCode, raw, resp.Cookies(), tc.want)
		}
	}
	// An unknown or expired session cookie is 401, not a silent anonymous.
	resp, _ := consoleRequest(t, c, "GET", ts.srv.URL+"/v1/whoami", &http.Cookie{Name: consoleCookie, Value: "forged"}, "", "", nil)
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("forged cookie: %d", resp.StatusCode)
	}
	srv := New(ts.k, discardLogger())
	hs := httptest.NewServer(srv)
	defer hs.Close()
	cookie, _ := signIn(t, hs.Client(), hs.URL, ts.rootCred)
	srv.console.now = func() time.Time { return time.Now().Add(consoleSessionTTL + time.Minute) }
	resp, raw := consoleRequest(t, hs.Client(), "GET", hs.URL+"/v1/whoami", cookie, "", "", nil)
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(string(raw), "sign in again") {
		t.Errorf("expired session: %d %s", resp.StatusCode, raw)
	}
	// The credential is checked on every request, as the API checks a
	// bearer: a killed agent's console answers what its bearer answers.
	agentID, agentCred := ts.newAgent(t, agentSpec{name: "doomed", energy: 10})
	agentCookie, _ := signIn(t, c, ts.srv.URL, agentCred)
	ts.call(t, "POST", "/v1/agents/"+agentID+"/kill", ts.rootCred, api.KillRequest{Reason: "manual"}).ok(t)
	resp, byCookie := consoleRequest(t, c, "GET", ts.srv.URL+"/v1/whoami", agentCookie, "", "", nil)
	byBearer := ts.call(t, "GET", "/v1/whoami", agentCred, nil)
	if resp.StatusCode != byBearer.status || !bytes.Equal(byCookie, byBearer.body) || !strings.Contains(string(byCookie), "terminated") {
		t.Errorf("a killed agent: cookie %d %s, bearer %v", resp.StatusCode, byCookie, byBearer)
	}
}

// TestConsoleStaticHeaders: the console's pages carry a CSP without inline
// script and with Trusted Types, and refuse framing.
func TestConsoleStaticHeaders(t *testing.T) {
	ts := newTestServer(t)
	c := ts.srv.Client()
	for path, ctype := range map[string]string{"/ui/": "text/html", "/ui/app.js": "text/javascript", "/ui/verify.js": "text/javascript", "/ui/app.css": "text/css"} {
		resp, raw := consoleRequest(t, c, "GET", ts.srv.URL+path, nil, "", "", nil)
		if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), ctype) || len(raw) == 0 {
			t.Errorf("%s: %d %q", path, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		csp := resp.Header.Get("Content-Security-Policy")
		for _, want := range []string{"script-src 'self'", "frame-ancestors 'none'", "require-trusted-types-for 'script'", "default-src 'none'"} {
			if !strings.Contains(csp, want) {
				t.Errorf("%s: CSP %q lacks %q", path, csp, want)
			}
		}
		if strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "unsafe-eval") {
			t.Errorf("%s: CSP allows inline script: %q", path, csp)
		}
		if resp.Header.Get("X-Frame-Options") != "DENY" || resp.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s: headers %v", path, resp.Header)
		}
	}
	// The page has no inline script or style, and no on* attribute.
	_, page := consoleRequest(t, c, "GET", ts.srv.URL+"/ui/", nil, "", "", nil)
	for _, bad := range []string{"<script>", "<style", " onclick=", " onload=", "javascript:"} {
		if bytes.Contains(page, []byte(bad)) {
			t.Errorf("index.html contains %q", bad)
		}
	}
	for _, path := range []string{"/ui/nope.js", "/ui/../go.mod", "/ui/%2e%2e/server.go"} {
		resp, _ := consoleRequest(t, c, "GET", ts.srv.URL+path, nil, "", "", nil)
		if resp.StatusCode == http.StatusOK {
			t.Errorf("%s: 200", path)
		}
	}
	resp, _ := consoleRequest(t, c, "GET", ts.srv.URL+"/", nil, "", "", nil)
	if resp.Request.URL.Path != "/ui/" {
		t.Errorf("/ leads to %s, want /ui/", resp.Request.URL.Path)
	}
}

// TestConsoleSessionsBounded: an actor signing in again and again ends only
// its own oldest sessions, never another actor's.
func TestConsoleSessionsBounded(t *testing.T) {
	ts := newTestServer(t)
	c := ts.srv.Client()
	rootCookie, _ := signIn(t, c, ts.srv.URL, ts.rootCred)
	_, agentCred := ts.newAgent(t, agentSpec{name: "flooder", energy: 10})
	first, _ := signIn(t, c, ts.srv.URL, agentCred)
	for range maxSessionsPerActor + 4 {
		signIn(t, c, ts.srv.URL, agentCred)
	}
	if resp, _ := consoleRequest(t, c, "GET", ts.srv.URL+"/v1/whoami", rootCookie, "", "", nil); resp.StatusCode != http.StatusOK {
		t.Errorf("root's session after an agent signed in %d times: %d", maxSessionsPerActor+5, resp.StatusCode)
	}
	if resp, _ := consoleRequest(t, c, "GET", ts.srv.URL+"/v1/whoami", first, "", "", nil); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("the agent's oldest session outlived %d newer ones: %d", maxSessionsPerActor+4, resp.StatusCode)
	}
}

// TestNotFoundsLeakNothing: 404s (and the other refusals of unknown
// things) name what was asked for, never a file path of the data folder or
// a Go internal.
func TestNotFoundsLeakNothing(t *testing.T) {
	ts := newTestServer(t)
	dataDir := filepath.Dir(ts.k.LogPath())
	for _, path := range []string{"/v1/events/999999", "/tile/0/999", "/tile/entries/999", "/tile/9/000", "/v1/actors/nope",
		"/v1/sessions/nope", "/v1/proof/99999", "/v1/envelopes/x", "/v1/sagas/x", "/nope", "/ui/nope.js", "/v1/blobs/sha256:" + strings.Repeat("a", 64),
		"/v1/proof/consistency?old=5&new=999999"} {
		r := ts.call(t, "GET", path, ts.rootCred, nil)
		if r.status < 400 {
			t.Errorf("%s: %d", path, r.status)
		}
		for _, leak := range []string{dataDir, ".go:", "goroutine", "runtime.", "open /", "stat /"} {
			if bytes.Contains(r.body, []byte(leak)) {
				t.Errorf("%s answers %q, which holds %q", path, r.body, leak)
			}
		}
	}
}
