package server

import (
	"net/http"
	"strings"
	"testing"
)

// §20.6: wildcard CORS origins "MUST be rejected when credentials are
// enabled". annald allows no cross-origin reads at all: no answer, to a
// preflight or to a request with an Origin (a credential or a cookie with
// it or not), carries an Access-Control-Allow-* header, so no browser
// lets another site's page read what it answers.
func TestSpec004_20_6_NoCrossOriginAllowance(t *testing.T) {
	ts := newTestServer(t)
	for _, tc := range []struct{ method, path string }{
		{http.MethodOptions, "/v1/actions"},
		{http.MethodOptions, "/ui/session"},
		{http.MethodGet, "/v1/whoami"},
		{http.MethodGet, "/checkpoint"},
		{http.MethodPost, "/v1/actions"},
	} {
		for _, origin := range []string{"https://evil.example", "null", "*"} {
			req, _ := http.NewRequest(tc.method, ts.srv.URL+tc.path, strings.NewReader(`{"type":"observe","target":"workspace/x"}`))
			req.Header.Set("Origin", origin)
			req.Header.Set("Access-Control-Request-Method", "POST")
			req.Header.Set("Access-Control-Request-Headers", "authorization, content-type")
			req.Header.Set("Authorization", "Bearer "+ts.rootCred)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			for name := range resp.Header {
				if strings.HasPrefix(strings.ToLower(name), "access-control-") {
					t.Errorf("%s %s from %s: %s: %q", tc.method, tc.path, origin, name, resp.Header.Get(name))
				}
			}
			if tc.method == http.MethodOptions && resp.StatusCode/100 == 2 {
				t.Errorf("a preflight of %s from %s was answered %d", tc.path, origin, resp.StatusCode)
			}
		}
	}
}
