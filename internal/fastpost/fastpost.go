// Package fastpost serves one route, POST to one exact path, on plain
// HTTP/1.1 connections without net/http's machinery for each request, and
// hands every other connection, untouched, to an http.Server. With
// Config.Buffered it also serves, on the same connections, the other GETs,
// POSTs and PUTs that its caller knows to be answered whole, so that a client
// which reads a proof or records a step between its actions keeps the
// fast path for them.
//
// For a request of a few hundred bytes whose handler takes tens of
// microseconds, net/http's own work is a large share: a header map parsed
// and another cloned for the answer, a context and a background read (a
// goroutine and an extra read system call) for every request. On the
// two-core machines annald runs on, that is a fifth of its CPU for an
// action. A Listener reads each request head itself and serves it only if
// the head is in a strict subset (parseHead: the one path or a target
// Buffered takes, HTTP/1.1, one Content-Length or for a GET none, one
// Host, visible ASCII, nothing that changes the framing); for those,
// net/http's ReadRequest gives the same request (a fuzz test compares
// them). At the first request that is not in the
// subset, before any of its bytes is consumed, the connection goes to the
// http.Server through Accept, with the bytes already read, and stays
// there. So the fast path never answers what net/http would refuse or read
// differently, and everything else (other routes, errors in framing,
// chunked bodies, Expect, upgrades) is net/http's, as before.
//
// The route's handler is the same http.Handler, called with an
// *http.Request like net/http's. Its answer is buffered whole (up to
// MaxAnswer bytes, beyond which it is streamed) and written in one write
// with a Content-Length; the
// header is completed as net/http completes it (Date, a sniffed
// Content-Type, Connection: close). What the fast path does not offer: the
// request's context is not cancelled when the client goes away (it is when
// the Listener is shut down), and the ResponseWriter has no Flush or
// Hijack. A route that needs either must not be served by it.
package fastpost

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// MaxAnswer bounds an answer the fast path buffers. A longer one goes out
// as the handler writes it, chunked, as net/http sends a long answer: its
// head and first MiB at once, then a chunk a Write.
const MaxAnswer = 1 << 20

// readBuffer is each connection's read buffer; a request head that does
// not fit in it goes to net/http, which allows longer ones.
const readBuffer = 4096

// Config is what a Listener serves and how long it waits.
type Config struct {
	Path    string       // the POST route served, e.g. "/v1/actions"; no query
	Handler http.Handler // the route's handler, and Buffered's
	MaxBody int64        // a longer Content-Length goes to net/http

	// Buffered, if set, widens the fast path to other requests: a GET
	// without a body, or a POST (to Path with a query, or to another
	// path) or a PUT, whose method and target (parsed as net/http parses
	// it) it takes (ok). maxBody is the longest body the request's handler
	// reads: a POST or PUT whose Content-Length is longer goes to net/http,
	// which closes the connection after the handler's 413 where the fast
	// path, having read the body, would keep it. Without Buffered, a
	// client that sends one such request on a kept connection, say a GET
	// of its receipt's proof, loses the fast path for every action after
	// it on that connection. Buffered must take only requests whose
	// answers Handler writes whole: with no Flush, no Hijack, and no need
	// of a context cancelled when the client goes away (it is cancelled
	// when the Listener shuts down). Answers should be small: one past
	// MaxAnswer goes out chunked, a write a Write.
	Buffered func(method string, u *url.URL) (maxBody int64, ok bool)

	// The same bounds as http.Server's: on the head from its first byte,
	// on the whole request, and between requests on a kept connection.
	ReadHeaderTimeout, ReadTimeout, IdleTimeout time.Duration

	// Server, if set, is put in each request's context under
	// http.ServerContextKey, as net/http does.
	Server *http.Server
	Logger *slog.Logger // a handler's panic is logged here (nil: slog.Default)
}

// Listener accepts connections from an inner listener, serves the fast
// route on them, and gives each connection whose request is not the fast
// route's to Accept. Close, which http.Server.Shutdown calls, stops
// accepting; Shutdown also drains the fast path's connections.
type Listener struct {
	inner net.Listener
	cfg   Config
	url   *url.URL
	// routePrefix is how the POST route's request line starts.
	routePrefix string
	handoff     chan net.Conn
	done        chan struct{} // closed by Close
	acceptErr   chan error

	// accepted and handedOff count connections: accepted on the inner
	// listener, and given to the http.Server (Stats).
	accepted, handedOff atomic.Uint64

	closeOnce sync.Once
	mu        sync.Mutex
	conns     map[*conn]bool // each fast connection: whether it is idle
	ctx       context.Context
	cancel    context.CancelFunc
	wg        sync.WaitGroup
}

// New starts accepting on inner.
func New(inner net.Listener, cfg Config) (*Listener, error) {
	u, err := url.ParseRequestURI(cfg.Path)
	if err != nil || u.RawQuery != "" || u.Fragment != "" || u.Path != cfg.Path {
		return nil, fmt.Errorf("fastpost: path %q must be a plain absolute path", cfg.Path)
	}
	if cfg.Handler == nil || cfg.MaxBody < 0 {
		return nil, errors.New("fastpost: a handler and a body limit are needed")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	l := &Listener{
		inner: inner, cfg: cfg, url: u, routePrefix: "POST " + cfg.Path + " ",
		handoff:   make(chan net.Conn),
		done:      make(chan struct{}),
		acceptErr: make(chan error, 1),
		conns:     make(map[*conn]bool),
	}
	l.ctx, l.cancel = context.WithCancel(context.Background())
	if cfg.Server != nil {
		l.ctx = context.WithValue(l.ctx, http.ServerContextKey, cfg.Server)
	}
	go l.acceptLoop()
	return l, nil
}

// acceptLoop accepts until the inner listener closes. Other errors (too
// many open files, a connection reset before it was accepted) are waited
// out, doubling the pause from 5 ms to 1 s, as http.Server waits them out.
func (l *Listener) acceptLoop() {
	var pause time.Duration
	for {
		c, err := l.inner.Accept()
		if err != nil {
			select {
			case <-l.done:
				l.acceptErr <- net.ErrClosed
				return
			default:
			}
			if errors.Is(err, net.ErrClosed) {
				l.acceptErr <- err
				return
			}
			pause = min(max(2*pause, 5*time.Millisecond), time.Second)
			l.cfg.Logger.Warn("fastpost: accept failed; waiting", "err", err, "pause", pause)
			time.Sleep(pause)
			continue
		}
		pause = 0
		l.accepted.Add(1)
		fc := &conn{l: l, nc: c, br: bufio.NewReaderSize(c, readBuffer), remote: c.RemoteAddr().String()}
		if !l.track(fc, true) {
			c.Close()
			continue
		}
		go fc.serve()
	}
}

// Accept returns the next connection for the http.Server: one whose
// request is not the fast route's, with the bytes already read in front.
func (l *Listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.handoff:
		return c, nil
	case err := <-l.acceptErr:
		l.acceptErr <- err // for later calls
		return nil, err
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Stats counts a Listener's connections since it started.
type Stats struct {
	Accepted uint64 // accepted on the inner listener
	// HandedOff were given to the http.Server, at their first request
	// the fast path does not take; every later request on them is
	// net/http's. A client that keeps sending such requests between its
	// fast ones shows here.
	HandedOff uint64
}

// Stats counts the Listener's connections so far.
func (l *Listener) Stats() Stats {
	return Stats{Accepted: l.accepted.Load(), HandedOff: l.handedOff.Load()}
}

// Addr is the inner listener's.
func (l *Listener) Addr() net.Addr { return l.inner.Addr() }

// Close stops accepting. Fast connections that are idle are closed; those
// serving a request close after their answer.
func (l *Listener) Close() error {
	var err error
	l.closeOnce.Do(func() {
		close(l.done)
		err = l.inner.Close()
		l.mu.Lock()
		for c, idle := range l.conns {
			if idle {
				c.nc.Close()
			}
		}
		l.mu.Unlock()
	})
	return err
}

// Shutdown closes the Listener and waits until every fast connection has
// closed or ctx ends; then it closes the rest and cancels their requests'
// context.
func (l *Listener) Shutdown(ctx context.Context) error {
	l.Close()
	drained := make(chan struct{})
	go func() { l.wg.Wait(); close(drained) }()
	select {
	case <-drained:
		return nil
	case <-ctx.Done():
		l.cancel()
		l.mu.Lock()
		for c := range l.conns {
			c.nc.Close()
		}
		l.mu.Unlock()
		return ctx.Err()
	}
}

// track records c as idle or busy; it reports false once the Listener is
// closed, when c should close instead.
func (l *Listener) track(c *conn, idle bool) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	select {
	case <-l.done:
		return false
	default:
	}
	if _, ok := l.conns[c]; !ok {
		l.wg.Add(1)
	}
	l.conns[c] = idle
	return true
}

func (l *Listener) untrack(c *conn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.conns[c]; ok {
		delete(l.conns, c)
		l.wg.Done()
	}
}

// conn is one connection while the fast path serves it.
type conn struct {
	l  *Listener
	nc net.Conn
	// ctx is the connection's context, each request's parent, as
	// net/http has one: a request's context registers with it rather
	// than with the Listener's, whose lock every connection would share.
	ctx    context.Context
	cancel context.CancelFunc
	br     *bufio.Reader
	remote string // the client's address, as net/http gives it in RemoteAddr
	body   []byte // the request body, kept for its capacity up to keptBuffer
	out    []byte // the answer, kept for its capacity up to keptBuffer
	// reqBody reads body to the handler, made anew for each request
	// (Reset) rather than allocated: a handler may not use a request's
	// body after it returns, as net/http's contract says.
	reqBody requestBody
	// w is each request's ResponseWriter, reset for it (writer.reset).
	w writer
}

// requestBody is a request's body as the handler reads it.
type requestBody struct{ bytes.Reader }

func (*requestBody) Close() error { return nil }

// bufferedConn is a connection handed to net/http: what the fast path
// read ahead comes first.
type bufferedConn struct {
	net.Conn
	br *bufio.Reader
}

func (c *bufferedConn) Read(p []byte) (int, error) {
	if c.br != nil {
		if c.br.Buffered() > 0 {
			return c.br.Read(p)
		}
		c.br = nil
	}
	return c.Conn.Read(p)
}

func (c *conn) serve() {
	handed := false
	c.ctx, c.cancel = context.WithCancel(context.WithValue(c.l.ctx, http.LocalAddrContextKey, c.nc.LocalAddr()))
	defer func() {
		c.cancel()
		c.l.untrack(c)
		if !handed {
			c.nc.Close()
		}
	}()
	for first := true; ; first = false {
		if !c.awaitRequest(first) {
			return
		}
		start := time.Now()
		h, n, route := c.readHead(start)
		switch route {
		case netHTTP:
			handed = c.handOff()
			return
		case hangUp:
			return
		}
		c.br.Discard(n)
		if !c.readBody(h, start) {
			return
		}
		keep, ok := c.answer(h)
		if !ok || !keep {
			return
		}
		c.shrinkBuffers()
	}
}

// awaitRequest waits for the first byte of the next request, the first
// on the connection or the next on a kept one, which is idle meanwhile.
// It reports false when the connection should close instead: it closed,
// stayed idle too long, or the Listener closed.
//
// One deadline a request when it arrives whole, as requests of agents do:
// the wait for it. The header and body bounds are set only when a read has
// to wait for more.
func (c *conn) awaitRequest(first bool) bool {
	cfg := &c.l.cfg
	if !first {
		if !c.l.track(c, true) {
			return false
		}
		if cfg.IdleTimeout > 0 {
			c.nc.SetReadDeadline(time.Now().Add(cfg.IdleTimeout))
		} else {
			c.nc.SetReadDeadline(time.Time{})
		}
	} else if cfg.ReadHeaderTimeout > 0 {
		c.nc.SetReadDeadline(time.Now().Add(cfg.ReadHeaderTimeout))
	}
	if _, err := c.br.Peek(1); err != nil {
		return false
	}
	return c.l.track(c, false)
}

// readBody reads the request's body of h.contentLength bytes into c.body,
// bounded by the read timeout from start when it has not all arrived. It
// reports false if the body did not arrive whole.
func (c *conn) readBody(h head, start time.Time) bool {
	if c.br.Buffered() < int(h.contentLength) && c.l.cfg.ReadTimeout > 0 {
		c.nc.SetReadDeadline(start.Add(c.l.cfg.ReadTimeout))
	}
	c.body = growTo(c.body, int(h.contentLength))
	_, err := io.ReadFull(c.br, c.body)
	return err == nil
}

// shrinkBuffers lets go of the body and answer buffers past keptBuffer:
// an idle connection keeps small buffers only, as a thousand connections
// that each once sent a body near the limit must not hold a quarter of a
// GiB.
func (c *conn) shrinkBuffers() {
	if cap(c.body) > keptBuffer {
		c.body = nil
	}
	if cap(c.out) > keptBuffer {
		c.out = nil
	}
	if cap(c.w.body) > keptBuffer {
		c.w.body = nil
	}
	if cap(c.w.out) > keptBuffer { // a streamed answer's chunks
		c.w.out = nil
	}
}

// keptBuffer is the most a connection keeps of its body and answer
// buffers between requests; an action and its receipt fit in far less.
const keptBuffer = 16 << 10

// route is where readHead sends a request.
type route int

const (
	fast    route = iota // the fast path serves it
	netHTTP              // not the fast route's: net/http reads it
	hangUp               // the head did not arrive whole in time: close, as net/http does
)

// readHead peeks until the buffer holds a whole head (up to an empty
// line) and parses it; nothing is consumed. A head that is not the fast
// route's, or longer than the buffer, goes to net/http, as soon as that is
// known. One that does not arrive whole before the header deadline, or
// before the client stops sending, closes the connection, as net/http
// closes it then, rather than giving the client net/http's header timeout
// over again.
func (c *conn) readHead(start time.Time) (h head, n int, to route) {
	cfg := &c.l.cfg
	waited := false
	for {
		buf, _ := c.br.Peek(c.br.Buffered())
		if !c.l.mayBeFast(buf) {
			return head{}, 0, netHTTP
		}
		if i := bytes.Index(buf, []byte("\r\n\r\n")); i >= 0 {
			n = i + 4
			h, ok := parseHead(buf[:n], cfg)
			if !ok {
				return head{}, 0, netHTTP
			}
			return h, n, fast
		}
		if len(buf) == c.br.Size() {
			return head{}, 0, netHTTP
		}
		if !waited && c.l.cfg.ReadHeaderTimeout > 0 {
			c.nc.SetReadDeadline(start.Add(c.l.cfg.ReadHeaderTimeout))
		}
		waited = true
		if _, err := c.br.Peek(len(buf) + 1); err != nil {
			return head{}, 0, hangUp
		}
	}
}

// mayBeFast reports whether buf, the start of a request, may begin a
// request the fast path serves: the POST route's request line, or with
// Buffered, a GET's, a POST's or a PUT's.
func (l *Listener) mayBeFast(buf []byte) bool {
	if l.cfg.Buffered != nil {
		return startsWith(buf, "POST /") || startsWith(buf, "GET /") || startsWith(buf, "PUT /")
	}
	return startsWith(buf, l.routePrefix)
}

// startsWith reports whether buf and prefix agree as far as both go.
func startsWith(buf []byte, prefix string) bool {
	m := min(len(buf), len(prefix))
	return string(buf[:m]) == prefix[:m]
}

// handOff gives the connection, with what was read ahead, to the
// http.Server, with no deadline of the fast path's left on it. It reports
// false if the Listener closed first.
func (c *conn) handOff() bool {
	c.nc.SetDeadline(time.Time{})
	// Counted before the http.Server has it, so that a request it then
	// answers (GET /metrics) counts its own connection.
	c.l.handedOff.Add(1)
	select {
	case c.l.handoff <- &bufferedConn{Conn: c.nc, br: c.br}:
		return true
	case <-c.l.done:
		c.l.handedOff.Add(^uint64(0)) // not handed after all
		return false
	}
}

func growTo(b []byte, n int) []byte {
	if cap(b) < n {
		return make([]byte, n)
	}
	return b[:n]
}

// answer calls the handler for the request of h and c.body and writes its
// answer. keep reports whether the connection may carry another request;
// ok is false if the answer could not be written whole.
func (c *conn) answer(h head) (keep, ok bool) {
	c.reqBody.Reset(c.body)
	ctx, cancel := context.WithCancel(c.ctx)
	defer cancel()
	// The request is made on the stack and given its context by
	// WithContext's copy, the one on the heap: a pointer to it, reassigned
	// to the copy, put both on the heap.
	base := http.Request{
		Method: h.method, URL: h.u, RequestURI: h.target,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: h.header, Host: h.host, ContentLength: h.contentLength, Close: h.close,
		Body:       &c.reqBody,
		RemoteAddr: c.remote,
	}
	if base.URL == nil {
		base.URL = c.l.urlCopy()
	}
	if h.contentLength == 0 {
		base.Body = http.NoBody // as net/http gives a request without a body
	}
	r := base.WithContext(ctx)
	w := &c.w
	w.reset(c.nc, h.close)
	if !c.call(w, r) {
		return false, false
	}
	var closeAfter bool
	c.out, closeAfter = w.appendAnswer(c.out[:0])
	if _, err := c.nc.Write(c.out); err != nil {
		return false, false
	}
	return !closeAfter, true
}

func (l *Listener) urlCopy() *url.URL {
	u := *l.url
	return &u
}

// call runs the handler; a panic is logged, as net/http logs it, and the
// connection closed without an answer.
func (c *conn) call(w *writer, r *http.Request) (ok bool) {
	defer func() {
		if p := recover(); p != nil {
			if p != http.ErrAbortHandler {
				buf := make([]byte, 64<<10)
				buf = buf[:runtime.Stack(buf, false)]
				c.l.cfg.Logger.Error("fastpost: panic serving "+r.RemoteAddr, "panic", p, "stack", string(buf))
			}
			ok = false
		}
	}()
	c.l.cfg.Handler.ServeHTTP(w, r)
	return !w.failed
}
