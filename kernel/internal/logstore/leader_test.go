package logstore

import (
	"net/url"
	"testing"
)

// An advertised URL (a flag, and a row other kernels read) is accepted
// only when a request can be sent to it: http(s), a host, nothing else.
func FuzzCheckAdvertiseURL(f *testing.F) {
	for _, seed := range []string{"http://10.0.0.5:7420", "https://k.example", "http://h:1/", "ftp://x", "http://", "/v1", "http://u@h", "http://h/p", "http://h?q", "", "http://[::1]:7420", "http://h#f"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		if CheckAdvertiseURL(raw) != nil {
			return
		}
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || (u.Path != "" && u.Path != "/") || len(raw) > maxAdvertisedURL {
			t.Fatalf("accepted %q", raw)
		}
	})
}
