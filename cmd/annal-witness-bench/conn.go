package main

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

// maxAnswer bounds the answer body read from a witness.
const maxAnswer = 64 << 10

// logConn is one log client's HTTP/1.1 connection to the witness: a
// request written, its answer read, in turn, with net/http's own framing
// (Request.Write, ReadResponse) on a connection kept for the next one.
// http.Client would do the same with a pool and two goroutines per
// connection between the caller and the socket, which cost the client
// about as much CPU again on the cores the witness is measured on. A
// connection that fails, or that the witness closes, is dialled again for
// the next request.
type logConn struct {
	url     *url.URL
	timeout time.Duration
	conn    net.Conn
	br      *bufio.Reader
	bw      *bufio.Writer
}

func newLogConn(rawURL string, timeout time.Duration) (*logConn, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, err
	}
	if u.Scheme != "http" {
		return nil, fmt.Errorf("%s: only http:// is supported", rawURL)
	}
	return &logConn{url: u, timeout: timeout}, nil
}

// post sends one add-checkpoint request and reads the answer (at most
// maxAnswer bytes of it), within the timeout; ctx's end stops it too.
func (c *logConn) post(ctx context.Context, body []byte) (code int, answer []byte, err error) {
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
			c.close()
		}
	}()
	conn := c.conn
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if err := conn.SetDeadline(time.Now().Add(c.timeout)); err != nil {
		return 0, nil, err
	}
	req := &http.Request{
		Method: http.MethodPost, URL: c.url, Host: c.url.Host,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{}, ContentLength: int64(len(body)), Body: io.NopCloser(bytes.NewReader(body)),
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
	if answer, err = io.ReadAll(io.LimitReader(resp.Body, maxAnswer)); err != nil {
		return 0, nil, err
	}
	// The connection is kept only when the whole answer was read and the
	// witness did not ask to close it.
	var rest [1]byte
	n, _ := resp.Body.Read(rest[:])
	keep = n == 0 && !resp.Close
	return resp.StatusCode, answer, nil
}

func (c *logConn) close() {
	if c.conn != nil {
		c.conn.Close()
		c.conn, c.br, c.bw = nil, nil, nil
	}
}
