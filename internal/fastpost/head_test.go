package fastpost

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"
)

const testPath = "/v1/actions"

// plainConfig serves the POST route alone; bufferedConfig also every GET
// and POST its Buffered is asked about but one, so that the parsing, not
// the choice of routes, is what the fuzz test exercises. Its route
// "/small" takes a body of at most one byte, and "/large" more than
// MaxBody, which still bounds it.
var (
	plainConfig    = Config{Path: testPath, MaxBody: 1 << 16}
	bufferedConfig = Config{Path: testPath, MaxBody: 1 << 16, Buffered: func(method string, u *url.URL) (int64, bool) {
		switch u.Path {
		case "/small":
			return 1, true
		case "/large":
			return 1 << 30, true
		}
		return 1 << 16, u.Path != "/refused"
	}}
)

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

// bufferedSeeds are heads that bufferedConfig takes (the first ones,
// bufferedTaken of them) and leaves to net/http, besides headSeeds.
var bufferedSeeds = []string{
	"GET /v1/proof/12 HTTP/1.1\r\nHost: h\r\nAuthorization: Bearer abc\r\nAccept: */*\r\n\r\n",
	"GET /v1/info?x=1&y=%20 HTTP/1.1\r\nHost: 127.0.0.1:7420\r\nConnection: close\r\n\r\n",
	"GET /a/%2F/./../b/ HTTP/1.1\r\nHost: h\r\n\r\n",
	"GET //x//y?%zz HTTP/1.1\r\nHost: h\r\n\r\n",
	"POST /v1/actions?wait=published HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n\r\n",
	"POST /v1/agents HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n\r\n",        // another POST
	"POST /v1/%61ctions?x HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n\r\n",   // the path escaped: Buffered's to judge
	"POST /small HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\n\r\n",            // at the route's limit
	"POST /large HTTP/1.1\r\nHost: h\r\nContent-Length: 65536\r\n\r\n",        // at MaxBody
	"PUT /v1/vfs/a/notes.md HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\n", // a PUT
	"GET /v1/info HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n",           // a GET with a length
	"GET /v1/info HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n",  // a GET with a body
	"GET /refused HTTP/1.1\r\nHost: h\r\n\r\n",                                // Buffered says no
	"GET /a%zz HTTP/1.1\r\nHost: h\r\n\r\n",                                   // not a path net/http parses
	"GET /a#f HTTP/1.1\r\nHost: h\r\n\r\n",                                    // a fragment
	"GET * HTTP/1.1\r\nHost: h\r\n\r\n",                                       // not origin form
	"GET http://h/v1/info HTTP/1.1\r\nHost: h\r\n\r\n",                        // absolute form
	"HEAD /v1/info HTTP/1.1\r\nHost: h\r\n\r\n",                               // another method
	"POST /small HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n\r\n",            // over the route's limit
	"POST /large HTTP/1.1\r\nHost: h\r\nContent-Length: 65537\r\n\r\n",        // over MaxBody
	"POST /refused HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n\r\n",          // Buffered says no
	"POST /v1/actions?wait=published HTTP/1.1\r\nHost: h\r\n\r\n",             // a POST without a length
	"GET /v1/info HTTP/1.1\r\nHost: h\r\nHost: i\r\n\r\n",                     // two Hosts
	"GET /v1/info  HTTP/1.1\r\nHost: h\r\n\r\n",                               // two spaces
	"GET /v1/info HTTP/1.0\r\nHost: h\r\n\r\n",
}

const bufferedTaken = 10

func TestParseHead(t *testing.T) {
	for i, in := range headSeeds {
		_, ok := parseHead([]byte(in), &plainConfig)
		if want := i < 5; ok != want {
			t.Errorf("seed %d %q: taken %v, want %v", i, in, ok, want)
		}
		// Buffered widens the route to a query and to GETs alone.
		_, ok = parseHead([]byte(in), &bufferedConfig)
		want := i < 5 || strings.HasPrefix(in, "POST /v1/actions?") || in == "GET /v1/actions HTTP/1.1\r\nHost: h\r\n\r\n" ||
			strings.HasPrefix(in, "POST /v1/actionsx ")
		if ok != want {
			t.Errorf("seed %d %q with Buffered: taken %v, want %v", i, in, ok, want)
		}
	}
	for i, in := range bufferedSeeds {
		if _, ok := parseHead([]byte(in), &plainConfig); ok {
			t.Errorf("buffered seed %d %q: taken without Buffered", i, in)
		}
		_, ok := parseHead([]byte(in), &bufferedConfig)
		if want := i < bufferedTaken; ok != want {
			t.Errorf("buffered seed %d %q: taken %v, want %v", i, in, ok, want)
		}
	}
	h, ok := parseHead([]byte(bufferedSeeds[1]), &bufferedConfig)
	if !ok || h.method != "GET" || h.target != "/v1/info?x=1&y=%20" || h.u.Path != "/v1/info" || h.u.Query().Get("y") != " " ||
		h.contentLength != 0 || !h.close || h.host != "127.0.0.1:7420" {
		t.Fatalf("parsed %+v %v", h, ok)
	}
	h, ok = parseHead([]byte(headSeeds[2]), &plainConfig)
	want := http.Header{"Content-Length": {"0"}, "Connection": {"Close"}, "X-A": {"1", "2"}}
	if !ok || h.host != "h" || h.contentLength != 0 || !h.close || !reflect.DeepEqual(h.header, want) {
		t.Fatalf("parsed %+v %v", h, ok)
	}
	// Empty values, in a buffer larger than the head, as the Listener
	// reads it.
	in := append(make([]byte, 0, 512), headSeeds[4]...)
	h, ok = parseHead(in, &plainConfig)
	want = http.Header{"X-Empty": {"", ""}, "X-Spaces": {""}, "Content-Length": {"2"}}
	if !ok || !reflect.DeepEqual(h.header, want) {
		t.Fatalf("parsed %q %v", h.header, ok)
	}
}

// FuzzParseHead compares parseHead with net/http: every head the fast
// path takes, net/http reads as the same request.
func FuzzParseHead(f *testing.F) {
	for _, s := range append(headSeeds, bufferedSeeds...) {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		// As the Listener reads it: into a buffer larger than the head.
		buf := make([]byte, len(in), len(in)+64)
		copy(buf, in)
		plain, plainOK := parseHead(buf, &plainConfig)
		h, ok := parseHead(buf, &bufferedConfig)
		if plainOK && (!ok || plain.method != h.method || plain.target != h.target) {
			t.Fatalf("%q: Buffered changed how the route's request reads: %v, %+v", in, ok, h)
		}
		if !ok {
			return
		}
		body := strings.Repeat("x", int(h.contentLength))
		r, err := http.ReadRequest(bufio.NewReader(io.MultiReader(bytes.NewReader(in), strings.NewReader(body))))
		if err != nil {
			t.Fatalf("fast path took %q, net/http refused it: %v", in, err)
		}
		b, err := io.ReadAll(r.Body)
		wantURL := h.u
		if wantURL == nil {
			wantURL = &url.URL{Path: testPath}
		}
		switch {
		case err != nil || string(b) != body:
			t.Fatalf("%q: body %q, %v", in, b, err)
		case h.method == http.MethodGet && r.Body != http.NoBody:
			t.Fatalf("%q: net/http gave a GET a body", in)
		case r.Method != h.method || !reflect.DeepEqual(r.URL, wantURL) || r.RequestURI != h.target || r.Proto != "HTTP/1.1":
			t.Fatalf("%q: net/http read %s %s %#v %s, fast path %s %s %#v", in, r.Method, r.RequestURI, r.URL, r.Proto, h.method, h.target, wantURL)
		case r.Host != h.host:
			t.Fatalf("%q: host %q, fast path %q", in, r.Host, h.host)
		case r.ContentLength != h.contentLength || r.Close != h.close:
			t.Fatalf("%q: length %d close %v, fast path %d %v", in, r.ContentLength, r.Close, h.contentLength, h.close)
		case !reflect.DeepEqual(r.Header, h.header):
			t.Fatalf("%q: header %q, fast path %q", in, r.Header, h.header)
		}
		if limit, _ := bufferedConfig.Buffered(r.Method, r.URL); r.URL.Path != testPath && h.contentLength > limit {
			t.Fatalf("%q: a body of %d bytes taken for a route that reads %d", in, h.contentLength, limit)
		}
	})
}
