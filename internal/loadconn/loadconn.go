// Package loadconn is a load generator's HTTP/1.1 client connection: one
// per simulated client, a request written and its answer read in turn,
// with net/http's own framing (Request.Write, ReadResponse), on a
// connection kept for the next request.
//
// http.Client does the same with a pool and two goroutines per connection
// between the caller and the socket, which on these two-core machines cost
// the load generator about as much CPU again as the server it measures.
// The benchmarks drive every server they compare through a Conn, so that
// the cores go to the servers. A connection that fails, or that the server
// closes, is dialled again for the next request. Only http:// is spoken.
package loadconn

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"time"
)

// MaxAnswer bounds the answer body Post reads.
const MaxAnswer = 1 << 20

// Conn is one client's connection. It is not safe for concurrent use: a
// client sends one request at a time.
type Conn struct {
	url     *url.URL
	header  http.Header
	timeout time.Duration
	conn    net.Conn
	br      *bufio.Reader
	bw      *bufio.Writer
}

// New returns a Conn that posts to rawURL with header on every request
// (nil for none), each request and its answer within timeout. It dials
// on the first Post.
func New(rawURL string, header http.Header, timeout time.Duration) (*Conn, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, err
	}
	if u.Scheme != "http" || u.Host == "" {
		return nil, fmt.Errorf("%s: only http://host URLs are supported", rawURL)
	}
	if header == nil {
		header = http.Header{}
	}
	return &Conn{url: u, header: header, timeout: timeout}, nil
}

// SetTimeout sets the bound on each later request and its answer.
func (c *Conn) SetTimeout(d time.Duration) { c.timeout = d }

// Post sends body and reads the answer (at most MaxAnswer bytes of it),
// within the timeout; ctx's end stops it too.
func (c *Conn) Post(ctx context.Context, body []byte) (code int, answer []byte, err error) {
	if err := ctx.Err(); err != nil {
		return 0, nil, err
	}
	if c.conn == nil {
		d := net.Dialer{Timeout: c.timeout}
		if c.conn, err = d.DialContext(ctx, "tcp", c.url.Host); err != nil {
			c.conn = nil
			return 0, nil, err
		}
		c.br, c.bw = bufio.NewReader(c.conn), bufio.NewWriter(c.conn)
	}
	keep := false
	defer func() {
		if !keep {
			c.Close()
		}
	}()
	conn := c.conn
	if err := conn.SetDeadline(time.Now().Add(c.timeout)); err != nil {
		return 0, nil, err
	}
	// After the timeout's deadline is set, so that ctx's end, even one
	// already past, always overrides it.
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	req := &http.Request{
		Method: http.MethodPost, URL: c.url, Host: c.url.Host,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: c.header, ContentLength: int64(len(body)), Body: io.NopCloser(bytes.NewReader(body)),
	}
	if err := req.Write(c.bw); err != nil {
		return 0, nil, err
	}
	if err := c.bw.Flush(); err != nil {
		return 0, nil, err
	}
	resp, err := http.ReadResponse(c.br, req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	if answer, err = io.ReadAll(io.LimitReader(resp.Body, MaxAnswer)); err != nil {
		return 0, nil, err
	}
	// The connection is kept only when the whole answer was read and the
	// server did not ask to close it.
	var rest [1]byte
	n, _ := resp.Body.Read(rest[:])
	keep = n == 0 && !resp.Close
	return resp.StatusCode, answer, nil
}

// Close closes the connection, if one is open; the next Post dials again.
func (c *Conn) Close() {
	if c.conn != nil {
		c.conn.Close()
		c.conn, c.br, c.bw = nil, nil, nil
	}
}
