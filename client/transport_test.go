package client

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// connCounter counts the connections a test server accepted.
type connCounter struct{ n atomic.Int64 }

func (c *connCounter) hook(_ net.Conn, s http.ConnState) {
	if s == http.StateNew {
		c.n.Add(1)
	}
}

// countedServer is an httptest server of h that counts its connections.
func countedServer(t *testing.T, h http.Handler, configure func(*http.Server)) (*httptest.Server, *connCounter) {
	t.Helper()
	var conns connCounter
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ConnState = conns.hook
	if configure != nil {
		configure(srv.Config)
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, &conns
}

// directClient is an http.Client over a fresh callerTransport whose
// fallback fails the test if it is used.
func directClient(t *testing.T) (*http.Client, *callerTransport) {
	t.Helper()
	tr := newCallerTransport(roundTripFunc(func(r *http.Request) (*http.Response, error) {
		t.Errorf("%s %s went to the fallback transport", r.Method, r.URL)
		return nil, errors.New("fallback")
	}))
	tr.proxy = func(*http.Request) (*url.URL, error) { return nil, nil }
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}, tr
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func echo(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	fmt.Fprintf(w, "%s %s %s", r.Method, r.URL.Path, body)
}

func mustRead(t *testing.T, c *http.Client, req *http.Request) (int, string) {
	t.Helper()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the answer: %v", req.Method, req.URL, err)
	}
	return resp.StatusCode, string(raw)
}

func post(t *testing.T, u, body string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, u, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	return req
}

func get(t *testing.T, u string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

func TestCallerTransport_SequentialRequestsShareOneConnection(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/echo", echo)
	mux.HandleFunc("/empty", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	srv, conns := countedServer(t, mux, nil)
	c, _ := directClient(t)
	for i := range 50 {
		want := fmt.Sprintf("POST /echo body-%d", i)
		if _, got := mustRead(t, c, post(t, srv.URL+"/echo", fmt.Sprintf("body-%d", i))); got != want {
			t.Fatalf("answer %d: %q, want %q", i, got, want)
		}
		if code, _ := mustRead(t, c, get(t, srv.URL+"/empty")); code != http.StatusNoContent {
			t.Fatalf("GET /empty: %d", code)
		}
		head, _ := http.NewRequest(http.MethodHead, srv.URL+"/echo", nil)
		if code, _ := mustRead(t, c, head); code != http.StatusOK {
			t.Fatalf("HEAD /echo: %d", code)
		}
	}
	if n := conns.n.Load(); n != 1 {
		t.Fatalf("150 sequential requests opened %d connections, want 1", n)
	}
}

func TestCallerTransport_AnAnswerNotReadToItsEndClosesItsConnection(t *testing.T) {
	srv, conns := countedServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(strings.Repeat("x", 64<<10)))
	}), nil)
	c, _ := directClient(t)
	for range 3 {
		resp, err := c.Do(get(t, srv.URL))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(resp.Body, make([]byte, 10)); err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	if _, got := mustRead(t, c, get(t, srv.URL)); len(got) != 64<<10 {
		t.Fatalf("a whole answer after three cut short: %d bytes", len(got))
	}
	if n := conns.n.Load(); n != 4 {
		t.Fatalf("%d connections, want 4: one for each answer cut short, whose rest must not be read as the next answer", n)
	}
}

func TestCallerTransport_AConnectionTheServerClosedIsNotReused(t *testing.T) {
	srv, conns := countedServer(t, http.HandlerFunc(echo), func(s *http.Server) { s.IdleTimeout = 20 * time.Millisecond })
	c, _ := directClient(t)
	mustRead(t, c, post(t, srv.URL+"/a", "1"))
	time.Sleep(200 * time.Millisecond) // the server closes the idle connection
	if _, got := mustRead(t, c, post(t, srv.URL+"/b", "2")); got != "POST /b 2" {
		t.Fatalf("after the server closed the idle connection: %q", got)
	}
	if n := conns.n.Load(); n != 2 {
		t.Fatalf("%d connections, want 2", n)
	}
}

func TestCallerTransport_ConnectionCloseIsHonoured(t *testing.T) {
	srv, conns := countedServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/close" {
			w.Header().Set("Connection", "close")
		}
		echo(w, r)
	}), nil)
	c, _ := directClient(t)
	mustRead(t, c, get(t, srv.URL+"/close"))
	mustRead(t, c, get(t, srv.URL+"/keep"))
	req := get(t, srv.URL+"/keep")
	req.Close = true
	mustRead(t, c, req)
	mustRead(t, c, get(t, srv.URL+"/keep"))
	if n := conns.n.Load(); n != 3 {
		t.Fatalf("%d connections, want 3: after the server's Connection: close and after the request's", n)
	}
}

// flakyServer answers each connection's first request and reads its
// second without answering, then closes the connection: a server that
// timed the connection out as the second request arrived. It counts the
// requests it read by method.
func flakyServer(t *testing.T) (string, *sync.Map) {
	t.Helper()
	var seen sync.Map
	u := rawServer(t, func(nc net.Conn, i int, req *http.Request) bool {
		n, _ := seen.LoadOrStore(req.Method, new(atomic.Int64))
		n.(*atomic.Int64).Add(1)
		if i == 1 {
			return false
		}
		io.WriteString(nc, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		return true
	})
	return u, &seen
}

// rawServer is a server written on sockets, for answers net/http's server
// would not send: serve is called with each request a connection reads
// (i counts them from 0) and writes what it likes; the connection is
// closed once it returns false. It returns the server's URL.
func rawServer(tb testing.TB, serve func(nc net.Conn, i int, req *http.Request) (keep bool)) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { ln.Close() })
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer nc.Close()
				br := bufio.NewReader(nc)
				for i := 0; ; i++ {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					io.Copy(io.Discard, req.Body)
					if !serve(nc, i, req) {
						return
					}
				}
			}()
		}
	}()
	return "http://" + ln.Addr().String()
}

func seenCount(m *sync.Map, method string) int64 {
	n, ok := m.Load(method)
	if !ok {
		return 0
	}
	return n.(*atomic.Int64).Load()
}

func TestCallerTransport_SendsAgainOnlyWhatNetHTTPWould(t *testing.T) {
	u, seen := flakyServer(t)
	c, _ := directClient(t)
	mustRead(t, c, get(t, u))
	// The kept connection dies with the second request: a GET is sent
	// again on a new connection and answered.
	if _, got := mustRead(t, c, get(t, u)); got != "ok" {
		t.Fatalf("GET sent again: %q", got)
	}
	if n := seenCount(seen, http.MethodGet); n != 3 {
		t.Fatalf("the server read %d GETs, want 3 (the second sent twice)", n)
	}
	// A POST is not: the server may have acted on it.
	if _, err := c.Do(post(t, u, "act")); err == nil {
		t.Fatal("a POST on a connection that died under it succeeded")
	}
	if n := seenCount(seen, http.MethodPost); n != 1 {
		t.Fatalf("the server read %d POSTs, want 1", n)
	}
}

func TestCallerTransport_TheContextEndsARequest(t *testing.T) {
	release := make(chan struct{})
	srv, conns := countedServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hang" {
			select {
			case <-release:
			case <-r.Context().Done():
			}
			return
		}
		echo(w, r)
	}), nil)
	defer close(release)
	c, _ := directClient(t)

	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	req := get(t, srv.URL+"/hang").WithContext(ctx)
	start := time.Now()
	if _, err := c.Do(req); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v, want context.Canceled", err)
	}
	ctx, cancel = context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := c.Do(get(t, srv.URL+"/hang").WithContext(ctx)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("past its deadline: %v, want context.DeadlineExceeded", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("two requests ended by their contexts took %v", d)
	}
	if _, got := mustRead(t, c, get(t, srv.URL+"/after")); got != "GET /after " {
		t.Fatalf("after two ended requests: %q", got)
	}
	if n := conns.n.Load(); n != 3 {
		t.Fatalf("%d connections, want 3: none that a context ended is kept", n)
	}
}

func TestCallerTransport_AStreamedAnswerArrivesAsWritten(t *testing.T) {
	next := make(chan struct{})
	srv, _ := countedServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range 3 {
			fmt.Fprintf(w, "data: %d\n\n", i)
			w.(http.Flusher).Flush()
			<-next
		}
	}), nil)
	c, _ := directClient(t)
	resp, err := c.Do(get(t, srv.URL))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	for i := range 3 {
		line, err := br.ReadString('\n')
		if err != nil || line != fmt.Sprintf("data: %d\n", i) {
			t.Fatalf("event %d: %q, %v", i, line, err)
		}
		br.ReadString('\n')
		next <- struct{}{} // the server writes the next only now
	}
	if rest, err := io.ReadAll(br); err != nil || len(rest) != 0 {
		t.Fatalf("after the last event: %q, %v", rest, err)
	}
}

func TestCallerTransport_InformationalAnswersAreSkipped(t *testing.T) {
	srv, _ := countedServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Link", "</style.css>; rel=preload")
		w.WriteHeader(http.StatusEarlyHints)
		echo(w, r)
	}), nil)
	c, _ := directClient(t)
	if code, got := mustRead(t, c, get(t, srv.URL+"/x")); code != http.StatusOK || got != "GET /x " {
		t.Fatalf("%d %q", code, got)
	}
}

func TestCallerTransport_HTTPSAndProxiedRequestsGoToTheFallback(t *testing.T) {
	var fellBack []string
	tr := newCallerTransport(roundTripFunc(func(r *http.Request) (*http.Response, error) {
		fellBack = append(fellBack, r.URL.String())
		return &http.Response{StatusCode: http.StatusTeapot, Body: http.NoBody, Request: r}, nil
	}))
	tr.proxy = func(r *http.Request) (*url.URL, error) {
		if r.URL.Host == "proxied.example:80" {
			return url.Parse("http://proxy.example:3128")
		}
		return nil, nil
	}
	for _, u := range []string{"https://kernel.example/v1/health", "http://proxied.example:80/v1/health"} {
		req, _ := http.NewRequest(http.MethodGet, u, nil)
		resp, err := tr.RoundTrip(req)
		if err != nil || resp.StatusCode != http.StatusTeapot {
			t.Fatalf("%s: %v, %v", u, resp, err)
		}
	}
	req, _ := http.NewRequest(http.MethodGet, "http://kernel.example/", nil)
	req.Header.Set("Upgrade", "websocket")
	tr.RoundTrip(req)
	if len(fellBack) != 3 {
		t.Fatalf("fallback took %v, want the https, the proxied and the upgrade requests", fellBack)
	}
}

func TestCallerTransport_ConcurrentRequestsGetTheirOwnAnswers(t *testing.T) {
	srv, conns := countedServer(t, http.HandlerFunc(echo), nil)
	c, _ := directClient(t)
	const workers, each = 16, 40
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				body := fmt.Sprintf("%d-%d", w, i)
				req := post(t, srv.URL+"/w", body)
				resp, err := c.Do(req)
				if err != nil {
					errs <- err
					return
				}
				raw, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || string(raw) != "POST /w "+body {
					errs <- fmt.Errorf("answer to %s: %q, %v", body, raw, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if n := conns.n.Load(); n > workers {
		t.Fatalf("%d workers opened %d connections", workers, n)
	}
}

func TestClient_DefaultTimeoutEndsARequest(t *testing.T) {
	release := make(chan struct{})
	srv, _ := countedServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}), nil)
	defer close(release)
	c, err := New(srv.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	if c.timeout != DefaultTimeout {
		t.Fatalf("a new client's timeout is %v, want %v", c.timeout, DefaultTimeout)
	}
	c.timeout = 50 * time.Millisecond
	if _, err := c.Health(context.Background()); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a request past the client's timeout: %v, want context.DeadlineExceeded", err)
	}
	if c.WithHTTPClient(&http.Client{}).timeout != 0 {
		t.Fatal("a client given its own http.Client keeps the default timeout over it")
	}
}

func TestCallerTransport_ABodyCutShortStaysAnError(t *testing.T) {
	u := rawServer(t, func(nc net.Conn, _ int, _ *http.Request) bool {
		io.WriteString(nc, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly this")
		return false
	})
	c, _ := directClient(t)
	resp, err := c.Do(get(t, u))
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(resp.Body)
	if string(got) != "only this" || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("an answer cut short: %q, %v", got, err)
	}
	if _, err := resp.Body.Read(make([]byte, 8)); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("reading again after the cut: %v, want io.ErrUnexpectedEOF still", err)
	}
	resp.Body.Close()
}

func TestCallerTransport_ReadingAClosedBodyIsAnError(t *testing.T) {
	srv, _ := countedServer(t, http.HandlerFunc(echo), nil)
	c, _ := directClient(t)
	resp, err := c.Do(get(t, srv.URL+"/x"))
	if err != nil {
		t.Fatal(err)
	}
	io.ReadAll(resp.Body)
	resp.Body.Close()
	if _, err := resp.Body.Read(make([]byte, 8)); err == nil || err == io.EOF {
		t.Fatalf("a read after Close: %v, want an error", err)
	}
}

func TestCallerTransport_AnAnswerHeaderWithoutEndIsRefused(t *testing.T) {
	u := rawServer(t, func(nc net.Conn, _ int, _ *http.Request) bool {
		io.WriteString(nc, "HTTP/1.1 200 OK\r\n")
		line := "X-Junk: " + strings.Repeat("a", 1000) + "\r\n"
		for range 4 * maxAnswerHeaderBytes / len(line) { // bounded: four times the limit
			if _, err := io.WriteString(nc, line); err != nil {
				break
			}
		}
		return false
	})
	c, _ := directClient(t)
	if _, err := c.Do(get(t, u)); !errors.Is(err, errAnswerHeaderTooLarge) {
		t.Fatalf("an answer header of 4 MiB: %v, want errAnswerHeaderTooLarge", err)
	}
}
