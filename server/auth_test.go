package server

import (
	"net/http"
	"testing"
)

// TestRFC9110_11_1_AuthSchemeCaseInsensitive: the auth scheme is
// case-insensitive and one or more spaces come before the credential;
// another scheme, no credential and no header are refused with 401.
func TestRFC9110_11_1_AuthSchemeCaseInsensitive(t *testing.T) {
	ts := newTestServer(t)
	for _, tc := range []struct {
		name, header string
		status       int
	}{
		{"Bearer", "Bearer " + ts.rootCred, http.StatusOK},
		{"lower-case bearer", "bearer " + ts.rootCred, http.StatusOK},
		{"upper-case BEARER", "BEARER " + ts.rootCred, http.StatusOK},
		{"mixed case", "bEaReR " + ts.rootCred, http.StatusOK},
		{"several spaces", "Bearer   " + ts.rootCred, http.StatusOK},
		{"Basic", "Basic " + ts.rootCred, http.StatusUnauthorized},
		{"Basic x", "Basic x", http.StatusUnauthorized},
		{"empty", "", http.StatusUnauthorized},
		{"scheme only", "Bearer", http.StatusUnauthorized},
		{"scheme and spaces", "Bearer   ", http.StatusUnauthorized},
		{"no space", "Bearer" + ts.rootCred, http.StatusUnauthorized},
		{"tab instead of space", "Bearer\t" + ts.rootCred, http.StatusUnauthorized},
		{"a non-ASCII letter in the scheme", "Bearer\u212a " + ts.rootCred, http.StatusUnauthorized},
		{"wrong credential", "bearer annal_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", http.StatusUnauthorized},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodGet, ts.srv.URL+"/v1/envelopes", nil)
			if tc.header != "" {
				req.Header.Set("Authorization", tc.header)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Fatalf("Authorization %q: status %d, want %d", tc.header, resp.StatusCode, tc.status)
			}
		})
	}
}
