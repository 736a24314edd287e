package fastpost

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
)

const testPath = "/v1/actions"

// headSeeds are heads the fast path takes and heads it must leave to
// net/http; FuzzParseHead starts from them.
var headSeeds = []string{
	"POST /v1/actions HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nContent-Length: 2\r\n\r\n",
	"POST /v1/actions HTTP/1.1\r\nHost: h\r\nAuthorization: Bearer abc\r\nContent-Type: application/json\r\nContent-Length: 17\r\nUser-Agent: Go-http-client/1.1\r\nAccept-Encoding: gzip\r\n\r\n",
	"POST /v1/actions HTTP/1.1\r\nhost: h\r\ncontent-length:0\r\nconnection: Close\r\nX-A: 1\r\nx-a:  2 \r\n\r\n",
	"POST /v1/actions HTTP/1.1\r\nHost: [::1]:80\r\nContent-Length: 1\r\nConnection: keep-alive\r\n\r\n",
	"POST /v1/actions HTTP/1.1\r\nHost: h\r\nX-Empty:\r\nX-Spaces:   \r\nContent-Length: 2\r\nx-empty: \r\n\r\n",
	"POST /v1/actions HTTP/1.1\r\nContent-Length: 2\r\n\r\n",                                 // no Host
	"POST /v1/actions HTTP/1.1\r\nHost: h\r\nHost: h\r\nContent-Length: 2\r\n\r\n",           // two Hosts
	"POST /v1/actions HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\n", // two lengths
	"POST /v1/actions HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n",             // chunked
	"POST /v1/actions HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n",
	"POST /v1/actions HTTP/1.1\r\nHost: h\r\nContent-Length: +2\r\n\r\n",
	"POST /v1/actions HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\nExpect: 100-continue\r\n\r\n",
	"POST /v1/actions HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\nX: a\r\n b\r\n\r\n",       // folded
	"POST /v1/actions HTTP/1.1\r\nHost: h\r\nContent-Length: 2\nX: a\r\n\r\n",               // bare LF
	"POST /v1/actions HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\nX y: a\r\n\r\n",           // bad name
	"POST /v1/actions HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\nX: caf\xc3\xa9\r\n\r\n",   // not ASCII
	"POST /v1/actions HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\nPragma: no-cache\r\n\r\n", // rewritten by net/http
	"POST /v1/actions HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\nConnection: upgrade\r\n\r\n",
	"POST /v1/actions?wait=published HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n\r\n",
	"POST /v1/actions HTTP/1.0\r\nHost: h\r\nContent-Length: 2\r\n\r\n",
	"GET /v1/actions HTTP/1.1\r\nHost: h\r\n\r\n",
	"POST /v1/actionsx HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n\r\n",
	"POST http://h/v1/actions HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n\r\n",
	"POST /v1/actions HTTP/1.1\r\nHost: h\r\nContent-Length: 99999999\r\n\r\n", // over the limit
	"POST /v1/actions HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n\r\nextra",
}

func TestParseHead(t *testing.T) {
	for i, in := range headSeeds {
		_, ok := parseHead([]byte(in), testPath, 1<<16)
		if want := i < 5; ok != want {
			t.Errorf("seed %d %q: taken %v, want %v", i, in, ok, want)
		}
	}
	h, ok := parseHead([]byte(headSeeds[2]), testPath, 1<<16)
	want := http.Header{"Content-Length": {"0"}, "Connection": {"Close"}, "X-A": {"1", "2"}}
	if !ok || h.host != "h" || h.contentLength != 0 || !h.close || !reflect.DeepEqual(h.header, want) {
		t.Fatalf("parsed %+v %v", h, ok)
	}
	// Empty values, in a buffer larger than the head, as the Listener
	// reads it.
	in := append(make([]byte, 0, 512), headSeeds[4]...)
	h, ok = parseHead(in, testPath, 1<<16)
	want = http.Header{"X-Empty": {"", ""}, "X-Spaces": {""}, "Content-Length": {"2"}}
	if !ok || !reflect.DeepEqual(h.header, want) {
		t.Fatalf("parsed %q %v", h.header, ok)
	}
}

// FuzzParseHead compares parseHead with net/http: every head the fast
// path takes, net/http reads as the same request.
func FuzzParseHead(f *testing.F) {
	for _, s := range headSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		// As the Listener reads it: into a buffer larger than the head.
		buf := make([]byte, len(in), len(in)+64)
		copy(buf, in)
		h, ok := parseHead(buf, testPath, 1<<16)
		if !ok {
			return
		}
		body := strings.Repeat("x", int(h.contentLength))
		r, err := http.ReadRequest(bufio.NewReader(io.MultiReader(bytes.NewReader(in), strings.NewReader(body))))
		if err != nil {
			t.Fatalf("fast path took %q, net/http refused it: %v", in, err)
		}
		b, err := io.ReadAll(r.Body)
		switch {
		case err != nil || string(b) != body:
			t.Fatalf("%q: body %q, %v", in, b, err)
		case r.Method != http.MethodPost || r.URL.Path != testPath || r.URL.RawQuery != "" || r.RequestURI != testPath || r.Proto != "HTTP/1.1":
			t.Fatalf("%q: net/http read %s %s %s", in, r.Method, r.RequestURI, r.Proto)
		case r.Host != h.host:
			t.Fatalf("%q: host %q, fast path %q", in, r.Host, h.host)
		case r.ContentLength != h.contentLength || r.Close != h.close:
			t.Fatalf("%q: length %d close %v, fast path %d %v", in, r.ContentLength, r.Close, h.contentLength, h.close)
		case !reflect.DeepEqual(r.Header, h.header):
			t.Fatalf("%q: header %q, fast path %q", in, r.Header, h.header)
		}
	})
}
