package loadconn

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// countingServer answers each POST with its body reversed and counts the
// connections it accepted.
func countingServer(t *testing.T, h http.HandlerFunc) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, &conns
}

func reverse(b []byte) string {
	r := make([]byte, len(b))
	for i := range b {
		r[len(b)-1-i] = b[i]
	}
	return string(r)
}

// Requests of one log go one after the other on one kept connection, with
// their bodies, and each answer is read whole.
func TestConn_KeepsItsConnection(t *testing.T) {
	srv, conns := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/add-checkpoint" {
			http.Error(w, "wrong request "+r.Method+" "+r.URL.Path, http.StatusBadRequest)
			return
		}
		b, _ := io.ReadAll(r.Body)
		io.WriteString(w, reverse(b))
	})
	c, err := New(srv.URL+"/add-checkpoint", nil, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i := range 20 {
		body := strings.Repeat("ab", i*100) + "z"
		code, answer, err := c.Post(context.Background(), []byte(body))
		if err != nil || code != http.StatusOK || string(answer) != reverse([]byte(body)) {
			t.Fatalf("request %d: %d %.40q %v", i, code, answer, err)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("%d connections for 20 requests, want 1", n)
	}
}

// A connection the witness closes, or one that fails, is dialled again for
// the next request.
func TestConn_DialsAgainAfterClose(t *testing.T) {
	var n atomic.Int64
	srv, conns := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1)%2 == 0 {
			w.Header().Set("Connection", "close")
		}
		w.WriteHeader(http.StatusConflict)
		io.WriteString(w, "12\n")
	})
	c, err := New(srv.URL+"/add-checkpoint", nil, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i := range 6 {
		code, answer, err := c.Post(context.Background(), []byte("x"))
		if err != nil || code != http.StatusConflict || string(answer) != "12\n" {
			t.Fatalf("request %d: %d %q %v", i, code, answer, err)
		}
	}
	if got := conns.Load(); got != 3 {
		t.Fatalf("%d connections, want 3 (the witness closed every second)", got)
	}
}

// An answer slower than the timeout is an error, and the next request gets
// a fresh connection; so does ctx's end.
func TestConn_TimeoutAndCancel(t *testing.T) {
	var slow atomic.Bool
	slow.Store(true)
	release := make(chan struct{})
	srv, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		if slow.Load() {
			<-release
		}
		io.WriteString(w, "ok")
	})
	defer close(release)
	c, err := New(srv.URL+"/add-checkpoint", nil, 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, _, err := c.Post(context.Background(), []byte("x")); err == nil {
		t.Fatal("no error from an answer slower than the timeout")
	}
	c.SetTimeout(time.Minute)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	if _, _, err := c.Post(ctx, []byte("x")); err == nil {
		t.Fatal("no error after ctx ended")
	}
	slow.Store(false)
	if code, answer, err := c.Post(context.Background(), []byte("x")); err != nil || code != http.StatusOK || string(answer) != "ok" {
		t.Fatalf("after the timeout: %d %q %v", code, answer, err)
	}
}

func TestNew_HTTPOnly(t *testing.T) {
	for _, u := range []string{"https://127.0.0.1:1/add-checkpoint", "127.0.0.1:1", "http://[::1", "http:///x"} {
		if _, err := New(u, nil, time.Second); err == nil {
			t.Errorf("%q accepted", u)
		}
	}
}

// The Conn's header goes with every request; an answer longer than
// MaxAnswer is cut there, and its connection not kept.
func TestConn_HeaderAndLongAnswer(t *testing.T) {
	srv, conns := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		if got := r.Header.Get("Authorization"); got != "Bearer k" {
			http.Error(w, "authorization "+got, http.StatusUnauthorized)
			return
		}
		if r.URL.Query().Get("long") != "" {
			w.Write(make([]byte, MaxAnswer+10))
			return
		}
		io.WriteString(w, "ok")
	})
	c, err := New(srv.URL+"/v1/actions", http.Header{"Authorization": {"Bearer k"}}, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for range 3 {
		if code, answer, err := c.Post(context.Background(), []byte("{}")); err != nil || code != http.StatusOK || string(answer) != "ok" {
			t.Fatalf("%d %q %v", code, answer, err)
		}
	}
	long, err := New(srv.URL+"/v1/actions?long=1", http.Header{"Authorization": {"Bearer k"}}, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer long.Close()
	for range 2 {
		code, answer, err := long.Post(context.Background(), nil)
		if err != nil || code != http.StatusOK || len(answer) != MaxAnswer {
			t.Fatalf("%d, %d bytes, %v; want %d bytes", code, len(answer), err, MaxAnswer)
		}
	}
	if n := conns.Load(); n != 3 {
		t.Fatalf("%d connections, want 1 kept and 2 dropped after long answers", n)
	}
}

// A request under a context already ended fails, and sends nothing.
func TestConn_EndedContext(t *testing.T) {
	var served atomic.Int64
	srv, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		io.WriteString(w, "ok")
	})
	c, err := New(srv.URL+"/x", nil, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, _, err := c.Post(context.Background(), []byte("x")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for range 20 {
		if _, _, err := c.Post(ctx, []byte("x")); err == nil {
			t.Fatal("no error under an ended context")
		}
	}
	if n := served.Load(); n != 1 {
		t.Fatalf("%d requests served, want only the first", n)
	}
}

// A connection left idle past the server's idle timeout is closed by the
// server; with the idle limit below that timeout the next request dials
// afresh, where without it the request is lost on the closed connection.
func TestConn_DialsAgainAfterIdle(t *testing.T) {
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok")
	}))
	srv.Config.IdleTimeout = 50 * time.Millisecond
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	post := func(c *Conn) error {
		code, answer, err := c.Post(context.Background(), []byte("x"))
		if err == nil && (code != http.StatusOK || string(answer) != "ok") {
			err = fmt.Errorf("answer %d %q", code, answer)
		}
		return err
	}
	for _, tc := range []struct {
		maxIdle time.Duration
		fails   bool
	}{{maxIdle: 20 * time.Millisecond}, {maxIdle: time.Hour, fails: true}} {
		c, err := New(srv.URL+"/", nil, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		c.maxIdle = tc.maxIdle
		before := conns.Load()
		if err := post(c); err != nil {
			t.Fatal(err)
		}
		time.Sleep(300 * time.Millisecond) // past the server's idle timeout
		err = post(c)
		if tc.fails {
			if err == nil {
				t.Fatalf("idle limit %v: the request on the connection the server closed succeeded; the test does not close it", tc.maxIdle)
			}
		} else if err != nil {
			t.Fatalf("idle limit %v: %v", tc.maxIdle, err)
		} else if got := conns.Load() - before; got != 2 {
			t.Fatalf("idle limit %v: %d connections, want 2", tc.maxIdle, got)
		}
		c.Close()
	}
}
