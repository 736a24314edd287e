package fastpost

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// viaFast reports whether a request reached the handler through the fast
// path: net/http's ResponseWriter flushes, the fast path's does not.
func viaFast(w http.ResponseWriter) bool {
	_, flushes := w.(http.Flusher)
	return !flushes
}

type fastServer struct {
	addr string
	l    *Listener
	srv  *http.Server
}

func startFast(t testing.TB, h http.Handler, tune func(*Config)) *fastServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 2 * time.Second}
	cfg := Config{Path: testPath, Handler: h, MaxBody: 1 << 16, Server: srv,
		ReadHeaderTimeout: 2 * time.Second, ReadTimeout: 5 * time.Second, IdleTimeout: 5 * time.Second}
	if tune != nil {
		tune(&cfg)
	}
	l, err := New(ln, cfg)
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(l)
	t.Cleanup(func() {
		srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		l.Shutdown(ctx)
	})
	return &fastServer{addr: ln.Addr().String(), l: l, srv: srv}
}

// dial connects to addr, with 5 s for everything on the connection; it
// is closed when the test ends.
func dial(t testing.TB, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(5 * time.Second))
	return c
}

// exchange writes raw on a new connection to addr and reads n answers.
func exchange(t *testing.T, addr, raw string, n int) ([]*http.Response, []string) {
	t.Helper()
	c := dial(t, addr)
	defer c.Close()
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	var rs []*http.Response
	var bodies []string
	for range n {
		r, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("answer %d of %d: %v", len(rs)+1, n, err)
		}
		b, err := io.ReadAll(r.Body)
		if err != nil {
			t.Fatal(err)
		}
		rs, bodies = append(rs, r), append(bodies, string(b))
	}
	return rs, bodies
}

func post(body string, extra ...string) string {
	return "POST " + testPath + " HTTP/1.1\r\nHost: h\r\n" + strings.Join(extra, "") +
		fmt.Sprintf("Content-Length: %d\r\n\r\n", len(body)) + body
}

// For each kind of answer a handler gives, the fast path's answer is
// net/http's: the same status, header (but for the Date's value), body
// and connection reuse.
func TestAnswersAsNetHTTP(t *testing.T) {
	cases := answerCases()
	requests := map[string]string{
		"keep-alive": post(`{"a":1}`, "Authorization: Bearer k\r\n"),
		"close":      post(`{"a":1}`, "Connection: close\r\n"),
	}
	for name, h := range cases {
		var fast atomic.Bool
		handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fast.Store(viaFast(w))
			h(w, r)
		})
		ref := httptest.NewServer(handler)
		defer ref.Close()
		fs := startFast(t, handler, nil)
		for rname, raw := range requests {
			want, wantBody := exchange(t, ref.Listener.Addr().String(), raw, 1)
			if fast.Load() {
				t.Fatal("net/http's answer came through the fast path")
			}
			got, gotBody := exchange(t, fs.addr, raw, 1)
			if !fast.Load() {
				t.Fatalf("%s, %s: not served by the fast path", name, rname)
			}
			if d := answerDifference(got[0], gotBody[0], want[0], wantBody[0]); d != "" {
				t.Errorf("%s, %s:%s", name, rname, d)
			}
		}
	}
}

// answerDifference describes how the fast path's answer got differs from
// net/http's, want ("" if it does not), but for the Date's value.
func answerDifference(got *http.Response, gotBody string, want *http.Response, wantBody string) string {
	for _, r := range []*http.Response{want, got} {
		if len(r.Header["Date"]) != 1 {
			return fmt.Sprintf(" Date %q", r.Header["Date"])
		}
		delete(r.Header, "Date")
	}
	if got.StatusCode != want.StatusCode || !reflect.DeepEqual(got.Header, want.Header) ||
		gotBody != wantBody || got.Close != want.Close || got.ContentLength != want.ContentLength {
		return fmt.Sprintf("\n fast    %d %q %q close=%v len=%d\n net/http %d %q %q close=%v len=%d",
			got.StatusCode, got.Header, gotBody, got.Close, got.ContentLength,
			want.StatusCode, want.Header, wantBody, want.Close, want.ContentLength)
	}
	return ""
}

// A connection's writer is reset for each request, its storage kept: on
// one kept connection, answers of every kind in a random order are each
// net/http's, with nothing of the answer before (its header fields, its
// body, its status).
func TestKeptConnectionAnswersDoNotMix(t *testing.T) {
	cases := answerCases()
	delete(cases, "handler closes")
	var names []string
	for name := range cases {
		names = append(names, name)
	}
	var fast atomic.Bool
	handler := caseHandler(cases, &fast)
	ref := httptest.NewServer(handler)
	defer ref.Close()
	fs := startFast(t, handler, nil)
	refConn, fastConn := dial(t, ref.Listener.Addr().String()), dial(t, fs.addr)
	refReader, fastReader := bufio.NewReader(refConn), bufio.NewReader(fastConn)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 60 {
		name := names[rng.IntN(len(names))]
		raw := post(strings.Repeat("b", rng.IntN(300)), "X-Case: "+name+"\r\n")
		want, wantBody := roundTrip(t, refConn, refReader, raw)
		if fast.Load() {
			t.Fatal("net/http's answer came through the fast path")
		}
		got, gotBody := roundTrip(t, fastConn, fastReader, raw)
		if !fast.Load() {
			t.Fatalf("answer %d (%s): not served by the fast path", i, name)
		}
		if d := answerDifference(got, gotBody, want, wantBody); d != "" {
			t.Fatalf("answer %d (%s):%s", i, name, d)
		}
	}
}

// With Buffered, a kept connection that mixes the route's POSTs, its
// POSTs with a query, and the GETs, other POSTs and PUTs Buffered takes stays on
// the fast path, and each answer is net/http's to the same request, the
// request as the handler saw it included. The first request Buffered does
// not take, or whose body is longer than Buffered allows its route, hands
// the connection to net/http, which answers it and the rest.
func TestBufferedRequestsKeepTheConnection(t *testing.T) {
	cases := answerCases()
	delete(cases, "handler closes")
	cases["request"] = func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%s %s %q %s %#v host=%s len=%d body=%q %v nobody=%v close=%v",
			r.Method, r.RequestURI, r.URL.String(), r.URL.Path, r.URL.Query(), r.Host, r.ContentLength, b, err, r.Body == http.NoBody, r.Close)
	}
	names := slices.Sorted(maps.Keys(cases))
	var fast atomic.Bool
	handler := caseHandler(cases, &fast)
	ref := httptest.NewServer(handler)
	defer ref.Close()
	var asked atomic.Int64
	fs := startFast(t, handler, func(c *Config) {
		c.Buffered = func(method string, u *url.URL) (int64, bool) {
			asked.Add(1)
			if strings.HasPrefix(u.Path, "/v1/write/") {
				return 100, method == http.MethodPost || method == http.MethodPut
			}
			return 1 << 10, method == http.MethodPost && u.Path == testPath || strings.HasPrefix(u.Path, "/v1/read/")
		}
	})
	refConn, fastConn := dial(t, ref.Listener.Addr().String()), dial(t, fs.addr)
	refReader, fastReader := bufio.NewReader(refConn), bufio.NewReader(fastConn)
	rng := rand.New(rand.NewPCG(3, 4))
	kinds := map[string]int{}
	for i := range 90 {
		name := names[rng.IntN(len(names))]
		var raw, kind string
		switch rng.IntN(4) {
		case 0:
			kind, raw = "route", post(strings.Repeat("b", rng.IntN(300)), "X-Case: "+name+"\r\n")
		case 1:
			body := strings.Repeat("q", rng.IntN(50))
			kind = "query"
			raw = fmt.Sprintf("POST %s?wait=published&n=%d HTTP/1.1\r\nHost: h\r\nX-Case: %s\r\nContent-Length: %d\r\n\r\n%s", testPath, i, name, len(body), body)
		case 2:
			body := strings.Repeat("w", rng.IntN(101))
			kind = "post"
			method := []string{"POST", "PUT"}[rng.IntN(2)]
			raw = fmt.Sprintf("%s /v1/write/%d?n=%d HTTP/1.1\r\nHost: h\r\nX-Case: %s\r\nContent-Length: %d\r\n\r\n%s", method, i, i, name, len(body), body)
		default:
			kind = "get"
			raw = fmt.Sprintf("GET /v1/read/%d/a%%20b?x=%d&y=%%41 HTTP/1.1\r\nHost: h:1\r\nX-Case: %s\r\nAuthorization: Bearer t\r\n\r\n", i, i, name)
		}
		kinds[kind]++
		want, wantBody := roundTrip(t, refConn, refReader, raw)
		got, gotBody := roundTrip(t, fastConn, fastReader, raw)
		if !fast.Load() {
			t.Fatalf("answer %d (%s, %s): not served by the fast path", i, kind, name)
		}
		if d := answerDifference(got, gotBody, want, wantBody); d != "" {
			t.Fatalf("answer %d (%s, %s):%s", i, kind, name, d)
		}
	}
	if len(kinds) != 4 || asked.Load() != int64(kinds["query"]+kinds["get"]+kinds["post"]) {
		t.Fatalf("requests %v; Buffered asked %d times, want once for each GET, query and other POST", kinds, asked.Load())
	}
	if st := fs.l.Stats(); st != (Stats{Accepted: 1}) {
		t.Fatalf("after the kept connection's requests: %+v", st)
	}
	// A GET Buffered does not take goes to net/http with the connection,
	// and so does every request after it; so does, on a new connection, a
	// POST longer than its route reads.
	for i, raw := range []string{
		"GET /v1/other HTTP/1.1\r\nHost: h\r\nX-Case: request\r\n\r\n",
		post("after", "X-Case: request\r\n"),
		"new connection",
		"POST /v1/write/1 HTTP/1.1\r\nHost: h\r\nX-Case: request\r\nContent-Length: 101\r\n\r\n" + strings.Repeat("w", 101),
		post("after", "X-Case: request\r\n"),
	} {
		if raw == "new connection" {
			refConn, fastConn = dial(t, ref.Listener.Addr().String()), dial(t, fs.addr)
			refReader, fastReader = bufio.NewReader(refConn), bufio.NewReader(fastConn)
			continue
		}
		want, wantBody := roundTrip(t, refConn, refReader, raw)
		got, gotBody := roundTrip(t, fastConn, fastReader, raw)
		if fast.Load() {
			t.Fatalf("request %d after the hand-off: served by the fast path", i)
		}
		if d := answerDifference(got, gotBody, want, wantBody); d != "" {
			t.Fatalf("request %d after the hand-off:%s", i, d)
		}
	}
	if st := fs.l.Stats(); st != (Stats{Accepted: 2, HandedOff: 2}) {
		t.Fatalf("after two connections handed off: %+v", st)
	}
}

// caseHandler answers a request as cases' handler named by its X-Case
// field, with a field of the case's own (so that a field left from the
// answer before shows), and tells fast whether the fast path called it.
func caseHandler(cases map[string]http.HandlerFunc, fast *atomic.Bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fast.Store(viaFast(w))
		name := r.Header.Get("X-Case")
		w.Header().Set("X-Only-"+strings.ReplaceAll(name, " ", "-"), name)
		cases[name](w, r)
	})
}

// roundTrip writes raw on c and reads its answer from br.
func roundTrip(t *testing.T, c net.Conn, br *bufio.Reader, raw string) (*http.Response, string) {
	t.Helper()
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	r, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(r.Body)
	if err != nil {
		t.Fatal(err)
	}
	return r, string(b)
}

// answerCases are handlers giving each kind of answer, by name.
func answerCases() map[string]http.HandlerFunc {
	return map[string]http.HandlerFunc{
		"json": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("X-Content-Type-Options", "nosniff")
			b, _ := io.ReadAll(r.Body)
			fmt.Fprintf(w, `{"got":%q,"auth":%q,"len":%d}`, b, r.Header.Get("Authorization"), r.ContentLength)
		},
		"accepted": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Location", "/v1/holds/1")
			w.WriteHeader(http.StatusAccepted)
			io.WriteString(w, "held\n")
		},
		"error": func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "no: bad target", http.StatusForbidden)
		},
		"sniffed": func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "<html><body>x") },
		"empty":   func(w http.ResponseWriter, r *http.Request) {},
		"no content": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/plain")
			w.WriteHeader(http.StatusNoContent)
			io.WriteString(w, "dropped")
		},
		"handler closes": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Connection", "close")
			io.WriteString(w, "bye")
		},
		"header after WriteHeader": func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusTeapot)
			w.Header().Set("X-Late", "ignored")
			io.WriteString(w, "tea")
		},
		"own framing": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", "3")
			w.Header().Set("X-Multi", " a ")
			w.Header().Add("X-Multi", "b\r\nc")
			io.WriteString(w, "abc")
		},
		"odd status": func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(599) },
		// Past MaxAnswer the fast path streams the answer, chunked, as
		// net/http does (its first write buffered with the head).
		"long": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			block := make([]byte, 60<<10)
			for i := range MaxAnswer/len(block) + 3 {
				for j := range block {
					block[j] = 'a' + byte((i+j)%26)
				}
				w.Write(block[:len(block)-i])
			}
		},
	}
}

// Requests that are not the fast route's go to net/http with their
// connection, from the first such request on, and are answered as
// before: other routes, chunked bodies, a query, a head too long for the
// buffer, a bad request. Pipelined requests are answered in order.
func TestHandsOffToNetHTTP(t *testing.T) {
	var fastCount, slowCount atomic.Int64
	fs := startFast(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if viaFast(w) {
			fastCount.Add(1)
		} else {
			slowCount.Add(1)
		}
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%s %s %s", r.Method, r.URL, b)
	}), nil)
	chunked := "POST " + testPath + " HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"
	long := post("L", "X-Long: "+strings.Repeat("y", 5000)+"\r\n")
	get := "GET /v1/log HTTP/1.1\r\nHost: h\r\n\r\n"
	query := "POST " + testPath + "?wait=published HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\n\r\nq"

	_, bodies := exchange(t, fs.addr, post("one")+post("two")+get+post("three"), 4)
	want := []string{"POST /v1/actions one", "POST /v1/actions two", "GET /v1/log ", "POST /v1/actions three"}
	if !reflect.DeepEqual(bodies, want) || fastCount.Load() != 2 || slowCount.Load() != 2 {
		t.Fatalf("pipelined: %q, %d fast, %d by net/http", bodies, fastCount.Load(), slowCount.Load())
	}
	for _, tc := range []struct{ raw, body string }{
		{chunked, "POST /v1/actions abc"}, {long, "POST /v1/actions L"}, {query, "POST /v1/actions?wait=published q"},
	} {
		before := slowCount.Load()
		if _, b := exchange(t, fs.addr, tc.raw, 1); b[0] != tc.body || slowCount.Load() != before+1 {
			t.Fatalf("%.60q: %q, want %q from net/http", tc.raw, b[0], tc.body)
		}
	}
	// A request net/http refuses is refused by net/http, as before.
	rs, _ := exchange(t, fs.addr, "POST "+testPath+" HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab", 1)
	if rs[0].StatusCode != http.StatusBadRequest {
		t.Fatalf("conflicting lengths: %d", rs[0].StatusCode)
	}
	rs, _ = exchange(t, fs.addr, post(strings.Repeat("z", 1<<16+1)), 1)
	if rs[0].StatusCode != http.StatusOK || slowCount.Load() == 0 {
		t.Fatalf("a body over MaxBody: %d", rs[0].StatusCode)
	}
}

// A handler's panic closes its connection without an answer, as in
// net/http, and the server goes on.
func TestPanicClosesTheConnection(t *testing.T) {
	fs := startFast(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Panic") != "" {
			panic("boom")
		}
		io.WriteString(w, "ok")
	}), func(c *Config) { c.Logger = slogDiscard() })
	c := dial(t, fs.addr)
	io.WriteString(c, post("x", "X-Panic: 1\r\n"))
	if b, err := io.ReadAll(c); err != nil || len(b) != 0 {
		t.Fatalf("after a panic: %q %v", b, err)
	}
	if _, b := exchange(t, fs.addr, post("x"), 1); b[0] != "ok" {
		t.Fatalf("after a panic: %q", b[0])
	}
}

// Shutdown closes idle connections at once and waits for a request in
// flight, whose answer arrives whole.
func TestShutdownDrains(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	fs := startFast(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Wait") != "" {
			close(entered)
			<-release
		}
		io.WriteString(w, "done")
	}), nil)
	idle := dial(t, fs.addr)
	io.WriteString(idle, post("i"))
	br := bufio.NewReader(idle)
	if r, err := http.ReadResponse(br, nil); err != nil || r.StatusCode != 200 {
		t.Fatal(err)
	} else {
		io.ReadAll(r.Body)
	}
	answered := make(chan string, 1)
	go func() {
		_, b := exchange(t, fs.addr, post("w", "X-Wait: 1\r\n"), 1)
		answered <- b[0]
	}()
	<-entered
	shut := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		fs.srv.Shutdown(ctx)
		shut <- fs.l.Shutdown(ctx)
	}()
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("the idle connection after Shutdown: %v, want EOF", err)
	}
	select {
	case err := <-shut:
		t.Fatalf("Shutdown returned %v with a request in flight", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	if b := <-answered; b != "done" {
		t.Fatalf("the request in flight: %q", b)
	}
	if err := <-shut; err != nil {
		t.Fatal(err)
	}
	if _, err := net.DialTimeout("tcp", fs.addr, time.Second); err == nil {
		t.Fatal("still accepting after Shutdown")
	}
}

// A kept connection idle past IdleTimeout is closed.
func TestIdleTimeout(t *testing.T) {
	fs := startFast(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }),
		func(c *Config) { c.IdleTimeout = 100 * time.Millisecond })
	c := dial(t, fs.addr)
	io.WriteString(c, post("x"))
	br := bufio.NewReader(c)
	if r, err := http.ReadResponse(br, nil); err != nil {
		t.Fatal(err)
	} else {
		io.ReadAll(r.Body)
	}
	start := time.Now()
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("idle connection: %v, want EOF", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("closed after %v", d)
	}
}

func slogDiscard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// A head that does not arrive whole within ReadHeaderTimeout closes the
// connection, as net/http closes it, without a second header timeout of
// net/http's (2 s here) after it.
func TestSlowHeadIsClosed(t *testing.T) {
	fs := startFast(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }),
		func(c *Config) { c.ReadHeaderTimeout = 100 * time.Millisecond })
	c := dial(t, fs.addr)
	io.WriteString(c, "POST "+testPath+" HTTP/1.1\r\nHost: h\r\n")
	start := time.Now()
	b, err := io.ReadAll(c)
	if err != nil || len(b) != 0 {
		t.Fatalf("slow head: %q %v", b, err)
	}
	if d := time.Since(start); d > 1500*time.Millisecond {
		t.Fatalf("closed after %v: handed to net/http's header timeout", d)
	}
}

// flakyListener fails its first Accept with an error that is not a close.
type flakyListener struct {
	net.Listener
	failed atomic.Bool
}

func (l *flakyListener) Accept() (net.Conn, error) {
	if !l.failed.Swap(true) {
		return nil, errors.New("accept: too many open files")
	}
	return l.Listener.Accept()
}

// An accept error other than a closed listener is waited out, not taken
// as the end of serving.
func TestAcceptErrorIsWaitedOut(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	l, err := New(&flakyListener{Listener: ln}, Config{Path: testPath, Handler: h, MaxBody: 10, Logger: slogDiscard()})
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	defer srv.Close()
	if _, b := exchange(t, ln.Addr().String(), post("x"), 1); b[0] != "ok" {
		t.Fatalf("after an accept error: %q", b[0])
	}
	select {
	case err := <-served:
		t.Fatalf("Serve returned %v", err)
	default:
	}
	l.Close()
	if err := <-served; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Serve after Close: %v", err)
	}
}

// A connection is forgotten once it closes or goes to net/http, so the
// Listener holds nothing for connections that came and went.
func TestConnectionsAreForgotten(t *testing.T) {
	fs := startFast(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }), nil)
	for i := range 40 {
		raw := post(strings.Repeat("b", 20<<10)) // a body above what a connection keeps
		if i%2 == 1 {
			raw += "GET /other HTTP/1.1\r\nHost: h\r\n\r\n" // then net/http's
		}
		exchange(t, fs.addr, raw, 1+i%2)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		fs.l.mu.Lock()
		n := len(fs.l.conns)
		fs.l.mu.Unlock()
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d connections still tracked after their clients closed", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A body that does not arrive whole within ReadTimeout of the request's
// start closes the connection without an answer.
func TestSlowBodyIsClosed(t *testing.T) {
	var called atomic.Bool
	fs := startFast(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { called.Store(true) }),
		func(c *Config) { c.ReadTimeout = 200 * time.Millisecond })
	c := dial(t, fs.addr)
	io.WriteString(c, "POST "+testPath+" HTTP/1.1\r\nHost: h\r\nContent-Length: 10\r\n\r\nabc")
	start := time.Now()
	b, err := io.ReadAll(c)
	if err != nil || len(b) != 0 || called.Load() {
		t.Fatalf("slow body: %q %v, handler called %v", b, err, called.Load())
	}
	if d := time.Since(start); d > 1500*time.Millisecond {
		t.Fatalf("closed after %v", d)
	}
}

// A streamed answer whose connection fails: the Write that failed and
// every one after it report it, and the connection is not kept.
func TestStreamedAnswerStopsAtAFailedWrite(t *testing.T) {
	var w writer
	var sent bytes.Buffer
	w.reset(&failAfter{n: 1, w: &sent}, false)
	if n, err := w.Write(make([]byte, MaxAnswer)); n != MaxAnswer || err != nil || sent.Len() != 0 {
		t.Fatalf("buffered write: %d, %v; %d bytes sent", n, err, sent.Len())
	}
	if n, err := w.Write([]byte("x")); n != 1 || err != nil || !bytes.HasPrefix(sent.Bytes(), []byte("HTTP/1.1 200 OK\r\n")) {
		t.Fatalf("first streamed write: %d, %v; sent %.40q", n, err, sent.Bytes())
	}
	if n, err := w.Write(nil); n != 0 || err != nil || w.failed { // sends nothing
		t.Fatalf("an empty write, streaming: %d, %v, failed %v", n, err, w.failed)
	}
	for range 2 {
		if n, err := w.Write([]byte("y")); n != 0 || !errors.Is(err, errConnWrite) || !w.failed {
			t.Fatalf("write after the connection failed: %d, %v, failed %v", n, err, w.failed)
		}
	}
}

// failAfter writes to w n times, then fails.
type failAfter struct {
	n int
	w io.Writer
}

func (f *failAfter) Write(p []byte) (int, error) {
	if f.n == 0 {
		return 0, errors.New("connection reset")
	}
	f.n--
	return f.w.Write(p)
}

// After a long request and a long, streamed answer, an idle connection
// keeps none of their buffers past keptBuffer.
func TestIdleConnectionKeepsSmallBuffers(t *testing.T) {
	var c conn
	c.body, c.out = make([]byte, 1<<20), make([]byte, 1<<20)
	c.w.reset(io.Discard, false)
	for _, n := range []int{MaxAnswer, 1} { // buffered, then streamed
		if _, err := c.w.Write(make([]byte, n)); err != nil {
			t.Fatal(err)
		}
	}
	if !c.w.streaming {
		t.Fatal("not streamed")
	}
	if cap(c.w.body) <= keptBuffer || cap(c.w.out) <= keptBuffer {
		t.Fatalf("the test's buffers are small already: %d, %d", cap(c.w.body), cap(c.w.out))
	}
	c.shrinkBuffers()
	for name, b := range map[string][]byte{"body": c.body, "out": c.out, "answer": c.w.body, "chunks": c.w.out} {
		if cap(b) > keptBuffer {
			t.Errorf("%s keeps %d bytes", name, cap(b))
		}
	}
}
