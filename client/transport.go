package client

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"sync"
	"time"
)

// callerTransport is a default client's transport. A plain-HTTP request
// that goes to the kernel directly (no proxy from the environment, no
// protocol upgrade) is written and its answer read on the caller's own
// goroutine, over an HTTP/1.1 connection kept for the next request; every
// other request (https, a proxy, an upgrade) goes to net/http's Transport.
//
// Why not net/http's for all: its Transport hands each request to the
// connection's writing goroutine and takes the answer from its reading
// one, and on a machine whose cores are busy each handoff waits for a
// thread to wake on another core. Against annald on 2 cores one
// sequential client's receipt took about 100 µs longer that way (p50
// 370 µs against 265, the disk's fdatasync being 135 µs).
//
// An http.Request is written by net/http itself (Request.Write); a
// request the client framed itself (plainRequest, plain.go) is written as
// it is. An answer in plainAnswer's strict subset of HTTP/1.1 (annald's)
// is read by plainAnswer, any other by net/http (ReadResponse), which
// reads the same answers the same way. What this adds is the keeping of
// connections. A kept connection is reused only after its answer was read
// to the end, and only while it is idle for less than idleConnTimeout and
// the server has not closed it (connAlive). A request whose kept
// connection turns out to be closed is sent again on a new one only when
// net/http's Transport would send it again: when nothing of it could be
// written and its body can be sent again, or when it is idempotent.
type callerTransport struct {
	fallback http.RoundTripper
	// proxy says whether a request goes through a proxy: the
	// environment's, as for net/http's default Transport.
	proxy  func(*http.Request) (*url.URL, error)
	dialer net.Dialer

	mu   sync.Mutex
	idle map[string][]*keptConn // by host:port, the most recent last
}

// Connection keeping, as net/http's default Transport and sharedTransport
// (the fallback) keep theirs.
const (
	maxIdleConnsPerHost = 512
	idleConnTimeout     = 90 * time.Second
)

func newCallerTransport(fallback http.RoundTripper) *callerTransport {
	return &callerTransport{
		fallback: fallback,
		proxy:    http.ProxyFromEnvironment,
		dialer:   net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second},
		idle:     map[string][]*keptConn{},
	}
}

// keptConn is one HTTP/1.1 connection and its buffers.
type keptConn struct {
	nc         net.Conn
	br         *bufio.Reader // reads through headBudget
	bw         *bufio.Writer
	headBudget readBudget // bounds an answer's header, not its body
	idleSince  time.Time
}

// errRequestNotWritten marks a failure to write a request on a kept
// connection: the server cannot have read all of it.
type errRequestNotWritten struct{ err error }

func (e errRequestNotWritten) Error() string { return e.err.Error() }
func (e errRequestNotWritten) Unwrap() error { return e.err }

func (t *callerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !t.direct(req) {
		return t.fallback.RoundTrip(req)
	}
	resp, err := t.sendOn(hostPort(req.URL), exchangeOf(req), rewindable(req), func() (exchange, error) {
		r, err := rewound(req)
		if err != nil {
			return exchange{}, err
		}
		req = r
		return exchangeOf(req), nil
	})
	if err != nil {
		closeRequestBody(req)
	}
	return resp, err
}

// sendOn writes x's request over a kept connection to addr and reads the
// head of its answer. A request whose kept connection died under it is
// sent again on a new one where sendAgain says so (rewindable: its body
// can be sent again), as again gives it (nil: as it was).
func (t *callerTransport) sendOn(addr string, x exchange, rewindable bool, again func() (exchange, error)) (*http.Response, error) {
	for {
		c, reused, err := t.conn(x.ctx, addr)
		if err != nil {
			return nil, err
		}
		resp, err := t.exchange(c, addr, x)
		if err == nil {
			return resp, nil
		}
		c.nc.Close()
		if !reused || !sendAgain(x.ctx, x.method, rewindable, err) {
			return nil, err
		}
		if again != nil {
			if x, err = again(); err != nil {
				return nil, err
			}
		}
	}
}

// plainRequest is a request the client framed itself: head, its request
// line and header through the empty line, then body. It is sent over a
// kept connection to addr, as RoundTrip sends an http.Request, and is
// sent again on a new connection under the same rule.
type plainRequest struct {
	ctx      context.Context
	deadline time.Time // besides the context's (zero: none)
	addr     string
	method   string
	head     []byte
	body     []byte
}

// send writes r and reads the head of its answer; the answer's body is
// read from the connection, which is kept once the body is read to its
// end.
func (t *callerTransport) send(r plainRequest) (*http.Response, error) {
	return t.sendOn(r.addr, exchange{ctx: r.ctx, deadline: r.deadline, method: r.method, write: r.write}, true, nil)
}

func (r plainRequest) write(w io.Writer) error {
	if _, err := w.Write(r.head); err != nil {
		return err
	}
	_, err := w.Write(r.body)
	return err
}

// exchange is what exchange needs of a request: its context, deadline and
// method, whether it asks to close the connection, how to write it, and,
// if it is an http.Request, the request (for ReadResponse).
type exchange struct {
	ctx      context.Context
	deadline time.Time // besides the context's (zero: none)
	method   string
	close    bool
	write    func(io.Writer) error
	req      *http.Request
}

func exchangeOf(req *http.Request) exchange {
	return exchange{ctx: req.Context(), method: req.Method, close: req.Close, write: req.Write, req: req}
}

// direct reports whether req goes over a kept connection of this
// transport: plain HTTP/1.1 to the server itself.
func (t *callerTransport) direct(req *http.Request) bool {
	if req.URL == nil || req.URL.Scheme != "http" || req.URL.Host == "" || req.Header.Get("Upgrade") != "" {
		return false
	}
	p, err := t.proxy(req)
	return err == nil && p == nil
}

// hostPort is the address to dial for a plain-HTTP URL.
func hostPort(u *url.URL) string {
	if u.Port() != "" {
		return u.Host
	}
	return net.JoinHostPort(u.Hostname(), "80")
}

// conn takes the most recently kept live connection to addr, or dials one.
func (t *callerTransport) conn(ctx context.Context, addr string) (*keptConn, bool, error) {
	for {
		t.mu.Lock()
		stack := t.idle[addr]
		if len(stack) == 0 {
			t.mu.Unlock()
			break
		}
		c := stack[len(stack)-1]
		stack[len(stack)-1] = nil
		t.idle[addr] = stack[:len(stack)-1]
		t.mu.Unlock()
		if time.Since(c.idleSince) < idleConnTimeout && c.br.Buffered() == 0 && connAlive(c.nc) {
			return c, true, nil
		}
		c.nc.Close()
	}
	nc, err := t.dialer.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, false, err
	}
	c := &keptConn{nc: nc, bw: bufio.NewWriterSize(nc, 4096)}
	c.headBudget.r = nc
	c.headBudget.left = -1
	c.br = bufio.NewReaderSize(&c.headBudget, 4096)
	return c, false, nil
}

// maxAnswerHeaderBytes bounds what is read of an answer before its body
// (its status line, header, and any informational answers before it), as
// net/http's Transport bounds it (MaxResponseHeaderBytes), so that a
// server cannot make the client read a header without end.
const maxAnswerHeaderBytes = 1 << 20

// errAnswerHeaderTooLarge is the error of an answer whose header is longer
// than maxAnswerHeaderBytes.
var errAnswerHeaderTooLarge = errors.New("annal: the server's answer header is larger than 1 MiB")

// readBudget reads from r at most left bytes before failing (left < 0:
// without a bound).
type readBudget struct {
	r    io.Reader
	left int64
}

func (b *readBudget) Read(p []byte) (int, error) {
	if b.left < 0 {
		return b.r.Read(p)
	}
	if b.left == 0 {
		return 0, errAnswerHeaderTooLarge
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.r.Read(p)
	b.left -= int64(n)
	return n, err
}

// keep puts c back for the next request, or closes it if addr already
// has as many idle as are kept.
func (t *callerTransport) keep(addr string, c *keptConn) {
	c.idleSince = time.Now()
	t.mu.Lock()
	if len(t.idle[addr]) < maxIdleConnsPerHost {
		t.idle[addr] = append(t.idle[addr], c)
		c = nil
	}
	t.mu.Unlock()
	if c != nil {
		c.nc.Close()
	}
}

// CloseIdleConnections closes the kept connections that carry no request
// (http.Client.CloseIdleConnections calls it), and the fallback's.
func (t *callerTransport) CloseIdleConnections() {
	t.mu.Lock()
	idle := t.idle
	t.idle = map[string][]*keptConn{}
	t.mu.Unlock()
	for _, stack := range idle {
		for _, c := range stack {
			c.nc.Close()
		}
	}
	if f, ok := t.fallback.(interface{ CloseIdleConnections() }); ok {
		f.CloseIdleConnections()
	}
}

// unheld is the hold on a connection of a request whose context cannot
// end before its deadline, which is the connection's: none to end.
func unheld() bool { return true }

// aLongTimeAgo is a deadline that has passed: setting it ends a blocked
// read or write at once.
var aLongTimeAgo = time.Unix(1, 0)

// exchange writes x's request on c, a connection to addr, and reads the
// head of its answer. The request's context and deadline bound both, and
// the reading of the body after: the earlier deadline is the
// connection's, and the context's end sets a past deadline.
func (t *callerTransport) exchange(c *keptConn, addr string, x exchange) (*http.Response, error) {
	deadline := x.deadline // zero: none
	if d, ok := x.ctx.Deadline(); ok && (deadline.IsZero() || d.Before(deadline)) {
		deadline = d
	}
	if err := c.nc.SetDeadline(deadline); err != nil {
		return nil, err
	}
	stop := unheld // a context that ends only at its deadline: the connection's
	if x.ctx.Done() != nil {
		stop = context.AfterFunc(x.ctx, func() { c.nc.SetDeadline(aLongTimeAgo) })
	}
	fail := func(err error) (*http.Response, error) {
		stop()
		if ctxErr := x.ctx.Err(); ctxErr != nil {
			return nil, ctxErr
		}
		if !deadline.IsZero() && errors.Is(err, os.ErrDeadlineExceeded) {
			return nil, context.DeadlineExceeded // the connection's deadline, the context's, came first
		}
		return nil, err
	}
	if err := x.write(c.bw); err != nil {
		return fail(errRequestNotWritten{err})
	}
	if err := c.bw.Flush(); err != nil {
		return fail(errRequestNotWritten{err})
	}
	c.headBudget.left = maxAnswerHeaderBytes - int64(c.br.Buffered())
	defer func() { c.headBudget.left = -1 }() // the body's reader bounds the body
	resp, err := readAnswer(c.br, x)
	if err != nil {
		return fail(err)
	}
	b := &keptBody{body: resp.Body, ctx: x.ctx, c: c, t: t, addr: addr, stop: stop, reusable: !resp.Close && !x.close}
	if x.method == http.MethodHead || resp.ContentLength == 0 {
		b.done = io.EOF
		b.release(true)
		resp.Body = http.NoBody
		return resp, nil
	}
	resp.Body = b
	return resp, nil
}

// readAnswer reads the head of the answer to x's request: plainAnswer's
// reading if it is in its subset, else http.ReadResponse's, past any
// informational answer (100 Continue, 103 Early Hints); 101 switches
// protocols, which direct excludes.
func readAnswer(br *bufio.Reader, x exchange) (*http.Response, error) {
	resp, ok, err := plainAnswer(br, x.method)
	if err != nil || ok {
		if ok {
			resp.Request = x.req
		}
		return resp, err
	}
	req := x.req
	if req == nil {
		req = &http.Request{Method: x.method}
	}
	for {
		if resp, err = http.ReadResponse(br, req); err != nil {
			return nil, err
		}
		if resp.StatusCode >= 200 || resp.StatusCode == http.StatusSwitchingProtocols {
			return resp, nil
		}
		resp.Body.Close()
	}
}

// sendAgain reports whether a request that failed on a kept connection
// is sent again on a new one, as net/http's Transport decides: when none
// of it could be written and its body can be sent again (rewindable), or
// when it is idempotent and no answer came.
func sendAgain(ctx context.Context, method string, rewindable bool, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	var notWritten errRequestNotWritten
	if errors.As(err, &notWritten) {
		return rewindable
	}
	if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) && !isConnReset(err) {
		return false
	}
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return rewindable
	}
	return false
}

// rewindable reports whether req's body can be sent again.
func rewindable(req *http.Request) bool {
	return req.Body == nil || req.Body == http.NoBody || req.GetBody != nil
}

// rewound is req with its body from the start, to send again.
func rewound(req *http.Request) (*http.Request, error) {
	if req.Body == nil || req.Body == http.NoBody {
		return req, nil
	}
	body, err := req.GetBody()
	if err != nil {
		return nil, err
	}
	r := req.Clone(req.Context())
	r.Body = body
	return r, nil
}

func closeRequestBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}

// keptBody is an answer's body on a kept connection: read to its end, it
// gives the connection back; closed before, it closes the connection,
// whose rest of the answer would otherwise be read as the next one's.
type keptBody struct {
	body     io.ReadCloser
	ctx      context.Context // the request's, whose end or deadline ends the reading
	c        *keptConn
	t        *callerTransport
	addr     string
	stop     func() bool // ends the request context's hold on the connection
	reusable bool        // neither side asked to close the connection

	mu   sync.Mutex
	done error // once the connection is released: what every later Read returns
}

var errReadOnClosedBody = errors.New("http: read on closed response body")

func (b *keptBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.done != nil {
		return 0, b.done
	}
	n, err := b.body.Read(p)
	if err != nil {
		if ctxErr := b.ctx.Err(); ctxErr != nil && err != io.EOF {
			err = ctxErr
		} else if errors.Is(err, os.ErrDeadlineExceeded) {
			err = context.DeadlineExceeded // the connection's deadline is the request's
		}
		b.done = err
		b.release(err == io.EOF)
	}
	return n, err
}

func (b *keptBody) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.done == nil {
		b.done = errReadOnClosedBody
		b.release(false)
	} else if b.done == io.EOF {
		b.done = errReadOnClosedBody
	}
	return nil
}

// release ends the request's use of the connection: kept if the answer
// was read to its end, neither side asked to close, and the request's
// context did not end under it; closed otherwise.
func (b *keptBody) release(readToEnd bool) {
	unheld := b.stop() // false: the context ended and set a past deadline
	if readToEnd && b.reusable && unheld && b.c.nc.SetDeadline(time.Time{}) == nil {
		b.t.keep(b.addr, b.c)
		return
	}
	b.c.nc.Close()
}
