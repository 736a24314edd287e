// Package loadconn is a load generator's HTTP/1.1 client connection: one
// per simulated client, a request written and its answer read in turn, on
// a connection kept for the next request.
//
// http.Client does the same with a pool and two goroutines per connection
// between the caller and the socket, and even net/http's own framing
// (Request.Write, ReadResponse) builds a header map and a handful of
// readers for every answer: on these two-core machines the load generator
// then takes a third of a core that the server it measures would
// otherwise have. So a Conn writes each request from bytes made once (the
// request line and the header, then Content-Length and the body, in one
// write) and reads each answer with a small parser that accepts a strict
// subset of what net/http's ReadResponse accepts, and gives the same
// status, body and connection reuse for everything it accepts (a fuzz
// test compares them). What it does not accept is an error, not a guess:
// informational (1xx) answers, trailers, folded or malformed header lines,
// conflicting framing.
//
// The benchmarks drive every server they compare through a Conn, so that
// the cores go to the servers. A connection that fails, or that the server
// closes, is dialled again for the next request, and so is one left idle
// longer than MaxIdle: the server may have closed it meanwhile (its idle
// timeout), and a POST found unanswered on such a connection cannot be
// sent again safely. Only http:// is spoken.
package loadconn

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/annal-dev/annal/internal/httpsyntax"
)

// MaxAnswer bounds the answer body Post reads.
const MaxAnswer = 1 << 20

// MaxIdle is how long a kept connection may sit unused before the next
// request dials afresh instead of reusing it. Servers close idle
// connections after their own timeout (annald's --idle-timeout, 120 s by
// default; net/http's servers often less); a load loop never idles this
// long, while a benchmark's pause between phases may.
const MaxIdle = 5 * time.Second

// maxHeaderBytes bounds an answer's status line and header together; a
// line longer than the read buffer (4 KiB) is refused on its own.
const maxHeaderBytes = 64 << 10

// Conn is one client's connection. It is not safe for concurrent use: a
// client sends one request at a time.
type Conn struct {
	host    string
	head    []byte // the request line and header, up to "Content-Length: "
	timeout time.Duration
	maxIdle time.Duration
	conn    net.Conn
	br      *bufio.Reader
	used    time.Time // when the last answer on conn was read
	req     []byte    // the request being written, kept for its capacity
	answer  []byte    // the last answer's body, kept for its capacity
}

// New returns a Conn that posts to rawURL with header on every request
// (nil for none), each request and its answer within timeout. It dials
// on the first Post. Host, Content-Length, Transfer-Encoding and
// Connection are the Conn's own and may not be in header.
func New(rawURL string, header http.Header, timeout time.Duration) (*Conn, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, err
	}
	if u.Scheme != "http" || u.Host == "" || u.User != nil {
		return nil, fmt.Errorf("%s: only http://host URLs are supported", rawURL)
	}
	head := fmt.Appendf(nil, "POST %s HTTP/1.1\r\nHost: %s\r\n", u.RequestURI(), u.Host)
	names := make([]string, 0, len(header))
	for name := range header {
		names = append(names, name)
	}
	slices.Sort(names) // the same bytes on every run
	for _, name := range names {
		if !httpsyntax.IsToken(name) {
			return nil, fmt.Errorf("header name %q is not a token", name)
		}
		switch http.CanonicalHeaderKey(name) {
		case "Host", "Content-Length", "Transfer-Encoding", "Connection":
			return nil, fmt.Errorf("header %s is set by the connection", name)
		}
		for _, v := range header[name] {
			if !httpsyntax.IsFieldValue(v) {
				return nil, fmt.Errorf("header %s: value %q holds a control character", name, v)
			}
			head = fmt.Appendf(head, "%s: %s\r\n", name, v)
		}
	}
	head = append(head, "Content-Length: "...)
	return &Conn{host: u.Host, head: head, timeout: timeout, maxIdle: MaxIdle}, nil
}

// SetTimeout sets the bound on each later request and its answer.
func (c *Conn) SetTimeout(d time.Duration) { c.timeout = d }

// Post sends body and reads the answer (at most MaxAnswer bytes of it),
// within the timeout; ctx's end stops it too. answer is valid until the
// next call on c.
func (c *Conn) Post(ctx context.Context, body []byte) (code int, answer []byte, err error) {
	if err := ctx.Err(); err != nil {
		return 0, nil, err
	}
	if c.conn != nil && time.Since(c.used) > c.maxIdle {
		c.Close()
	}
	if c.conn == nil {
		d := net.Dialer{Timeout: c.timeout}
		if c.conn, err = d.DialContext(ctx, "tcp", c.host); err != nil {
			c.conn = nil
			return 0, nil, err
		}
		c.br = bufio.NewReader(c.conn)
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
	c.req = append(c.req[:0], c.head...)
	c.req = strconv.AppendInt(c.req, int64(len(body)), 10)
	c.req = append(c.req, "\r\n\r\n"...)
	c.req = append(c.req, body...)
	if _, err := conn.Write(c.req); err != nil {
		return 0, nil, err
	}
	code, c.answer, keep, err = readAnswer(c.br, c.answer[:0])
	if err != nil {
		return 0, nil, err
	}
	c.used = time.Now()
	return code, c.answer, nil
}

// Close closes the connection, if one is open; the next Post dials again.
func (c *Conn) Close() {
	if c.conn != nil {
		c.conn.Close()
		c.conn, c.br = nil, nil
	}
}

var (
	errInformational = errors.New("informational (1xx) answers are not supported")
	errTrailer       = errors.New("chunked answer with a trailer: not supported")
)

// readAnswer reads one answer to a POST from br: its status code and its
// body, appended to buf, at most MaxAnswer bytes of it. keep reports
// whether the connection may carry the next request: the server did not
// ask to close it, and the body was framed and read whole.
func readAnswer(br *bufio.Reader, buf []byte) (code int, body []byte, keep bool, err error) {
	h := answerHead{br: br, contentLength: -1}
	if err := h.read(); err != nil {
		return 0, nil, false, err
	}
	keep = h.keep()
	switch {
	case h.code == http.StatusNoContent || h.code == http.StatusNotModified:
		return h.code, buf, keep, nil
	case h.chunked:
		buf, whole, err := readChunked(br, buf)
		if err != nil {
			return 0, nil, false, err
		}
		return h.code, buf, keep && whole, nil
	case h.contentLength >= 0:
		buf, whole, err := readLength(br, buf, h.contentLength)
		if err != nil {
			return 0, nil, false, err
		}
		return h.code, buf, keep && whole, nil
	default:
		// No framing: the body runs to the connection's end.
		buf, _, err := readUpTo(br, buf)
		if err != nil {
			return 0, nil, false, err
		}
		return h.code, buf, false, nil
	}
}

// answerHead reads an answer's status line and header, and keeps what
// they say about the body's framing and the connection's reuse.
type answerHead struct {
	br          *bufio.Reader
	headerBytes int // read so far, bounded by maxHeaderBytes

	code                   int
	http10                 bool
	contentLength          int64  // -1 when the header has none
	lengthText             []byte // as written: two must be the same text, as net/http wants
	chunked                bool
	sawClose, sawKeepAlive bool
}

// read reads the status line and the header up to the empty line that
// ends it.
func (h *answerHead) read() error {
	status, err := h.line()
	if err != nil {
		return err
	}
	if err := h.status(status); err != nil {
		return err
	}
	for {
		l, err := h.line()
		if err != nil {
			return err
		}
		if len(l) == 0 {
			break
		}
		name, value, ok := bytes.Cut(l, []byte(":"))
		if !ok || !httpsyntax.IsToken(name) {
			return fmt.Errorf("malformed answer header line %q", l)
		}
		value = bytes.Trim(value, " \t")
		if !httpsyntax.IsFieldValue(value) {
			return fmt.Errorf("answer header %s holds a control character", name)
		}
		if err := h.field(name, value); err != nil {
			return err
		}
	}
	if h.chunked && h.contentLength >= 0 {
		return errors.New("answer has both Content-Length and Transfer-Encoding")
	}
	return nil
}

// line reads one line of the status line and header, without its CRLF.
func (h *answerHead) line() ([]byte, error) {
	l, err := h.br.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		return nil, errors.New("answer header line too long")
	}
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	if err != nil {
		return nil, err
	}
	if h.headerBytes += len(l); h.headerBytes > maxHeaderBytes {
		return nil, errors.New("answer header too long")
	}
	l, ok := bytes.CutSuffix(l, []byte("\r\n"))
	if !ok {
		return nil, fmt.Errorf("answer line %q does not end in CRLF", l)
	}
	return l, nil
}

// status parses the status line: HTTP/1.1 or HTTP/1.0, a three-digit
// code of 200 or more, and an optional reason.
func (h *answerHead) status(status []byte) error {
	switch {
	case bytes.HasPrefix(status, []byte("HTTP/1.1 ")):
	case bytes.HasPrefix(status, []byte("HTTP/1.0 ")):
		h.http10 = true
	default:
		return fmt.Errorf("malformed status line %q", status)
	}
	rest := status[len("HTTP/1.1 "):]
	if len(rest) < 3 || !httpsyntax.IsDigits(rest[:3]) || (len(rest) > 3 && rest[3] != ' ') || !httpsyntax.IsFieldValue(rest) {
		return fmt.Errorf("malformed status line %q", status)
	}
	h.code = int(rest[0]-'0')*100 + int(rest[1]-'0')*10 + int(rest[2]-'0')
	if h.code < 200 {
		return fmt.Errorf("status %d: %w", h.code, errInformational)
	}
	return nil
}

// field takes one header field; the fields that frame the body or decide
// the connection's reuse are the only ones that matter.
func (h *answerHead) field(name, value []byte) error {
	switch {
	case bytes.EqualFold(name, []byte("Content-Length")):
		return h.setContentLength(value)
	case bytes.EqualFold(name, []byte("Transfer-Encoding")):
		return h.setTransferEncoding(value)
	case bytes.EqualFold(name, []byte("Connection")):
		h.addConnection(value)
	}
	return nil
}

// setContentLength takes a Content-Length; a second one must be the same
// text.
func (h *answerHead) setContentLength(value []byte) error {
	if !httpsyntax.IsDigits(value) || len(value) > 18 {
		return fmt.Errorf("bad Content-Length %q", value)
	}
	if h.contentLength >= 0 && !bytes.Equal(value, h.lengthText) {
		return errors.New("answer has different Content-Lengths")
	}
	h.contentLength, _ = strconv.ParseInt(string(value), 10, 64)
	h.lengthText = append(h.lengthText[:0], value...)
	return nil
}

// setTransferEncoding takes a Transfer-Encoding: only one, only chunked,
// and not in HTTP/1.0.
func (h *answerHead) setTransferEncoding(value []byte) error {
	if h.chunked || h.http10 || !bytes.EqualFold(value, []byte("chunked")) {
		return fmt.Errorf("unsupported Transfer-Encoding %q", value)
	}
	h.chunked = true
	return nil
}

// addConnection takes a Connection field's close and keep-alive tokens.
func (h *answerHead) addConnection(value []byte) {
	for tok := range bytes.SplitSeq(value, []byte(",")) {
		tok = bytes.Trim(tok, " \t")
		h.sawClose = h.sawClose || bytes.EqualFold(tok, []byte("close"))
		h.sawKeepAlive = h.sawKeepAlive || bytes.EqualFold(tok, []byte("keep-alive"))
	}
}

// keep reports whether the server lets the connection carry the next
// request: it did not ask to close it, and an HTTP/1.0 server asked to
// keep it.
func (h *answerHead) keep() bool {
	return !h.sawClose && (!h.http10 || h.sawKeepAlive)
}

// readChunked appends a chunked body to buf, at most MaxAnswer bytes of
// it; whole reports that the body ended within them, and then the final
// CRLF is read too (a trailer is refused).
func readChunked(br *bufio.Reader, buf []byte) (_ []byte, whole bool, err error) {
	buf, whole, err = readUpTo(httputil.NewChunkedReader(br), buf)
	if err != nil || !whole {
		return buf, whole, err
	}
	end, err := br.Peek(2)
	if err != nil {
		return nil, false, io.ErrUnexpectedEOF
	}
	if string(end) != "\r\n" {
		return nil, false, errTrailer
	}
	br.Discard(2)
	return buf, true, nil
}

// readLength appends a body of length bytes to buf, at most MaxAnswer of
// them; whole reports that it was read whole.
func readLength(br *bufio.Reader, buf []byte, length int64) (_ []byte, whole bool, err error) {
	n := min(length, MaxAnswer)
	buf = slices.Grow(buf, int(n))[:n]
	if _, err := io.ReadFull(br, buf); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, false, err
	}
	return buf, n == length, nil
}

// readUpTo appends r's bytes to buf until r ends or MaxAnswer bytes are
// read; whole reports that r ended within them.
func readUpTo(r io.Reader, buf []byte) (_ []byte, whole bool, err error) {
	for {
		if len(buf) == MaxAnswer {
			var one [1]byte
			n, err := io.ReadFull(r, one[:])
			if err == io.EOF {
				return buf, true, nil
			}
			if err != nil && n == 0 {
				return nil, false, err
			}
			return buf, false, nil
		}
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, min(max(512, cap(buf)), MaxAnswer-len(buf)))
		}
		n, err := r.Read(buf[len(buf):min(cap(buf), MaxAnswer)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, true, nil
		}
		if err != nil {
			return nil, false, err
		}
	}
}
