package loadconn

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// netHTTPAnswer reads one answer the way net/http does, as the Conn did
// before it had its own parser: ReadResponse, then at most MaxAnswer bytes
// of the body; keep as the Conn would decide it.
func netHTTPAnswer(br *bufio.Reader) (code int, body []byte, keep bool, err error) {
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodPost})
	if err != nil {
		return 0, nil, false, err
	}
	defer resp.Body.Close()
	if body, err = io.ReadAll(io.LimitReader(resp.Body, MaxAnswer)); err != nil {
		return 0, nil, false, err
	}
	var rest [1]byte
	n, err := resp.Body.Read(rest[:])
	if n == 0 && err != nil && err != io.EOF {
		return 0, nil, false, err
	}
	return resp.StatusCode, body, n == 0 && !resp.Close, nil
}

var answerSeeds = []string{
	"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Type: text/plain\r\n\r\nhello",
	"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhelloHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
	"HTTP/1.1 409 Conflict\r\nContent-Type: text/x.tlog.size\r\nContent-Length: 3\r\n\r\n12\n",
	"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n3;ext=1\r\nabc\r\n0\r\n\r\n",
	"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\nX-Trailer: 1\r\n\r\n",
	"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
	"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok",
	"HTTP/1.1 200 OK\r\nConnection: Keep-Alive, CLOSE\r\nContent-Length: 2\r\n\r\nok",
	"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok",
	"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nok",
	"HTTP/1.1 200 OK\r\n\r\nuntil the end",
	"HTTP/1.1 204 No Content\r\nContent-Length: 7\r\n\r\n",
	"HTTP/1.1 304 Not Modified\r\n\r\n",
	"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
	"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\nhello",
	"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 05\r\n\r\nhello",
	"HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nhello",
	"HTTP/1.1 200 OK\r\nContent-Length: +5\r\n\r\nhello",
	"HTTP/1.1 200 OK\r\nContent-Length:\t5 \r\n\r\nhello",
	"HTTP/1.1 200\r\nContent-Length: 0\r\n\r\n",
	"HTTP/1.1 +20 OK\r\n\r\n",
	"HTTP/1.1 200 OK\r\n Folded: yes\r\n\r\n",
	"HTTP/1.1 200 OK\r\nBad Name: x\r\n\r\n",
	"HTTP/1.1 200 OK\nContent-Length: 0\n\n",
	"HTTP/1.1 200 OK\r\nX: a\x00b\r\nContent-Length: 0\r\n\r\n",
	"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n",
	"HTTP/2.0 200 OK\r\nContent-Length: 0\r\n\r\n",
	"",
}

// Whatever answer readAnswer accepts, net/http's ReadResponse accepts too,
// with the same status, body and reuse of the connection, and both leave
// the same bytes for the next answer. readAnswer may refuse what net/http
// takes (it is stricter), never the other way round.
func FuzzReadAnswer(f *testing.F) {
	for _, s := range answerSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		ours := bufio.NewReader(bytes.NewReader(in))
		code, body, keep, err := readAnswer(ours, nil)
		if err != nil {
			return
		}
		theirs := bufio.NewReader(bytes.NewReader(in))
		wantCode, wantBody, wantKeep, werr := netHTTPAnswer(theirs)
		if werr != nil {
			t.Fatalf("readAnswer accepted %q (%d, %q, keep %v); net/http refused it: %v", in, code, body, keep, werr)
		}
		if code != wantCode || !bytes.Equal(body, wantBody) || keep != wantKeep {
			t.Fatalf("%q: readAnswer %d %q keep %v; net/http %d %q keep %v", in, code, body, keep, wantCode, wantBody, wantKeep)
		}
		if keep {
			rest, _ := io.ReadAll(ours)
			wantRest, _ := io.ReadAll(theirs)
			if !bytes.Equal(rest, wantRest) {
				t.Fatalf("%q: readAnswer left %q for the next answer, net/http %q", in, rest, wantRest)
			}
		}
	})
}

// The seeds' verdicts, stated: what the Conn takes, and what it refuses.
func TestReadAnswer(t *testing.T) {
	for _, tc := range []struct {
		in   string
		code int
		body string
		keep bool
		err  string
	}{
		{in: answerSeeds[0], code: 200, body: "hello", keep: true},
		{in: answerSeeds[2], code: 409, body: "12\n", keep: true},
		{in: answerSeeds[3], code: 200, body: "helloabc", keep: true},
		{in: answerSeeds[4], err: "trailer"},
		{in: answerSeeds[5], err: "both"},
		{in: answerSeeds[6], code: 200, body: "ok", keep: false},
		{in: answerSeeds[7], code: 200, body: "ok", keep: false},
		{in: answerSeeds[8], code: 200, body: "ok", keep: false},
		{in: answerSeeds[9], code: 200, body: "ok", keep: true},
		{in: answerSeeds[10], code: 200, body: "until the end", keep: false},
		{in: answerSeeds[11], code: 204, keep: true},
		{in: answerSeeds[13], err: "informational"},
		{in: answerSeeds[15], err: "different"},
		{in: answerSeeds[16], err: "unexpected EOF"},
		{in: answerSeeds[17], err: "bad Content-Length"},
		{in: answerSeeds[18], code: 200, body: "hello", keep: true},
		{in: answerSeeds[19], code: 200, keep: true},
		{in: answerSeeds[21], err: "malformed"},
		{in: answerSeeds[23], err: "CRLF"},
		{in: answerSeeds[24], err: "control"},
		{in: answerSeeds[25], err: "Transfer-Encoding"},
		{in: answerSeeds[26], err: "status line"},
	} {
		code, body, keep, err := readAnswer(bufio.NewReader(strings.NewReader(tc.in)), nil)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: error %v, want one saying %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || code != tc.code || string(body) != tc.body || keep != tc.keep {
			t.Errorf("%q: %d %q keep %v %v; want %d %q keep %v", tc.in, code, body, keep, err, tc.code, tc.body, tc.keep)
		}
	}
}

// A chunked body longer than MaxAnswer is cut there and the connection
// not kept, as with Content-Length.
func TestReadAnswer_LongChunked(t *testing.T) {
	var b strings.Builder
	b.WriteString("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
	chunk := strings.Repeat("x", 1<<16)
	for range MaxAnswer/len(chunk) + 1 {
		b.WriteString("10000\r\n" + chunk + "\r\n")
	}
	b.WriteString("0\r\n\r\n")
	code, body, keep, err := readAnswer(bufio.NewReader(strings.NewReader(b.String())), nil)
	if err != nil || code != 200 || len(body) != MaxAnswer || keep {
		t.Fatalf("%d, %d bytes, keep %v, %v; want 200, %d bytes, not kept", code, len(body), keep, err, MaxAnswer)
	}
}

// New refuses header names and values that would break the request's
// framing, and the headers the Conn writes itself.
func TestNew_RefusesHeadersThatBreakFraming(t *testing.T) {
	for _, h := range []http.Header{
		{"X-A": {"one\r\nContent-Length: 0"}},
		{"X-A": {"a\nb"}},
		{"Bad Name": {"x"}},
		{"": {"x"}},
		{"Content-Length": {"3"}},
		{"host": {"elsewhere"}},
		{"Transfer-Encoding": {"chunked"}},
		{"Connection": {"close"}},
	} {
		if _, err := New("http://127.0.0.1:1/x", h, time.Second); err == nil {
			t.Errorf("header %q accepted", h)
		}
	}
}

// A server that answers in chunks, and one that speaks HTTP/1.0, are
// read right; the HTTP/1.0 one closes after each answer, so every request
// dials again.
func TestConn_ChunkedAndHTTP10Servers(t *testing.T) {
	srv, conns := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "part one, ")
		w.(http.Flusher).Flush() // forces chunked framing
		io.WriteString(w, "part two")
	})
	c, err := New(srv.URL+"/x", nil, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i := range 3 {
		code, answer, err := c.Post(t.Context(), []byte("x"))
		if err != nil || code != 200 || string(answer) != "part one, part two" {
			t.Fatalf("chunked %d: %d %q %v", i, code, answer, err)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("%d connections for 3 chunked answers, want 1", n)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan int, 1)
	go func() {
		n := 0
		defer func() { accepted <- n }()
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			n++
			req, err := http.ReadRequest(bufio.NewReader(conn))
			if err == nil {
				b, _ := io.ReadAll(req.Body)
				io.WriteString(conn, "HTTP/1.0 201 Created\r\n\r\ngot "+string(b))
			}
			conn.Close()
		}
	}()
	c10, err := New("http://"+ln.Addr().String()+"/x", nil, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c10.Close()
	for i := range 3 {
		code, answer, err := c10.Post(t.Context(), []byte{'a' + byte(i)})
		if err != nil || code != 201 || string(answer) != "got "+string(rune('a'+i)) {
			t.Fatalf("HTTP/1.0 %d: %d %q %v", i, code, answer, err)
		}
	}
	ln.Close()
	if n := <-accepted; n != 3 {
		t.Fatalf("%d connections to the HTTP/1.0 server, want 3", n)
	}
}
