package client

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"reflect"
	"testing"
	"time"
)

// referenceAnswer is what net/http makes of answer to a GET: the first
// answer that is not informational and its body, or failed.
func referenceAnswer(answer []byte, req *http.Request) (resp *http.Response, body []byte, ok bool) {
	br := bufio.NewReader(bytes.NewReader(answer))
	for {
		resp, err := http.ReadResponse(br, req)
		if err != nil {
			return nil, nil, false
		}
		if resp.StatusCode >= 200 || resp.StatusCode == http.StatusSwitchingProtocols {
			body, err := io.ReadAll(resp.Body)
			return resp, body, err == nil
		}
		resp.Body.Close()
	}
}

// FuzzCallerTransportAnswer holds callerTransport to net/http's reading
// of any answer a server sends: the same status, header and body where
// net/http reads one (plainAnswer's reading, or ReadResponse's), an error
// where it fails, and never a hang or a panic.
func FuzzCallerTransportAnswer(f *testing.F) {
	for _, seed := range []string{
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n",
		"HTTP/1.1 204 No Content\r\n\r\n",
		"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nx",
		"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n",
		"HTTP/1.1 200 OK\r\n\r\nread until the connection closes",
		"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort",
		"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 3\r\n\r\nabc",
		"HTTP/1.1 2x0 OK\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",
		"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-A:  padded \t\r\nX-A: second\r\nContent-Length: 2\r\n\r\n{}",
		"HTTP/1.1 409 Conflict\r\nRetry-After: 1\r\ncontent-length: 3\r\n\r\nabc",
		"HTTP/1.1 200 OK\nContent-Length: 2\n\nok",
		"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 200 \r\nContent-Length: 0\r\n\r\n",
		"HTTP/1.1 200 OK\r\nX-\x80: \xff\r\nContent-Length: 1\r\n\r\nx",
		"garbage",
		"",
	} {
		f.Add([]byte(seed))
	}
	answers := make(chan []byte)
	url := rawServer(f, func(nc net.Conn, _ int, _ *http.Request) bool {
		nc.Write(<-answers)
		return false
	}) + "/v1/health"
	tr := newCallerTransport(nil)
	defer tr.CloseIdleConnections()
	f.Fuzz(func(t *testing.T, answer []byte) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		want, wantBody, wantOK := referenceAnswer(answer, req)
		go func() { answers <- answer }()
		resp, err := tr.RoundTrip(req)
		if err != nil {
			if ctx.Err() != nil {
				t.Fatalf("no answer within 10 s: %v", err)
			}
			if wantOK {
				t.Fatalf("net/http reads status %d, body %q; the transport: %v", want.StatusCode, wantBody, err)
			}
			return
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if ctx.Err() != nil {
			t.Fatal("the body did not end within 10 s")
		}
		if ok := err == nil; ok != wantOK || (ok && (resp.StatusCode != want.StatusCode || !bytes.Equal(body, wantBody))) {
			t.Fatalf("the transport read status %d, body %q, error %v; net/http: %+v, body %q, read whole %v",
				resp.StatusCode, body, err, want, wantBody, wantOK)
		}
		if wantOK && (resp.Status != want.Status || !reflect.DeepEqual(resp.Header, want.Header) || resp.ContentLength != want.ContentLength) {
			t.Fatalf("the transport read %q %v (length %d); net/http %q %v (length %d)",
				resp.Status, resp.Header, resp.ContentLength, want.Status, want.Header, want.ContentLength)
		}
	})
}
