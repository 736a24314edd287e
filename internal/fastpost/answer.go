package fastpost

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/annal-dev/annal/internal/httpsyntax"
)

// writer is the fast path's http.ResponseWriter: it buffers the answer
// whole, so that it goes out in one write with its Content-Length. An
// answer that outgrows MaxAnswer goes out as it is written instead,
// chunked, as net/http writes a long answer (stream).
//
// A connection keeps one writer and resets it for each request (reset):
// its header map, body and copy of the sent header keep their storage. A
// handler may not use its ResponseWriter, nor so the header map it got
// from it, once it has returned (net/http's contract), so the next request
// may take them over. It spared five allocations an answer.
type writer struct {
	header http.Header
	sent   sentHeader // the header when WriteHeader was called, as net/http keeps it
	// sentValues holds the values of sent, one block for all its fields.
	sentValues []string
	status     int
	body       []byte
	// conn, clientClose: where a streamed answer goes, and whether the
	// client asked to close after it; set for each request (reset).
	conn        io.Writer
	clientClose bool
	// streaming: the head and the answer's start are written, the rest
	// goes out in chunks; failed: a write to conn failed, and the
	// connection must close.
	streaming, failed bool
	out               []byte // a streamed chunk's framing, kept for its capacity
}

// reset readies w for the connection's next request, whose streamed
// answer, if any, goes to conn.
func (w *writer) reset(conn io.Writer, clientClose bool) {
	if w.header == nil {
		w.header = make(http.Header, 4)
	} else {
		clear(w.header)
	}
	clear(w.sent)
	clear(w.sentValues)
	w.sent, w.sentValues = w.sent[:0], w.sentValues[:0]
	w.status, w.body = 0, w.body[:0]
	w.conn, w.clientClose, w.streaming, w.failed = conn, clientClose, false, false
}

// sentHeader is a copy of a header, as Header.Clone copies it, held as its
// fields sorted by name: the order they are written in. Why not a Clone:
// every answer took one, then a map iteration and a sorted copy of its
// keys to write it; a handler's header has a handful of fields, which a
// scan finds as fast as a map.
type sentHeader []sentField

type sentField struct {
	name   string
	values []string
}

// snapshot copies h into fs[:0], its values into values[:0] (one block,
// as Header.Clone copies them), and returns both.
func snapshot(h http.Header, fs sentHeader, values []string) (sentHeader, []string) {
	n := 0
	for _, vv := range h {
		n += len(vv)
	}
	values = slices.Grow(values[:0], n)[:n]
	block := values
	fs = fs[:0]
	for k, vv := range h {
		n := copy(block, vv)
		fs = append(fs, sentField{name: k, values: block[:n:n]})
		block = block[n:]
	}
	slices.SortFunc(fs, func(a, b sentField) int { return strings.Compare(a.name, b.name) })
	return fs, values
}

// lookup is the values of name (canonical, as the handler's header keys
// it), and whether the header has the name at all.
func (h sentHeader) lookup(name string) ([]string, bool) {
	for _, f := range h {
		if f.name == name {
			return f.values, true
		}
	}
	return nil, false
}

// get is the first value of name, as Header.Get gives it.
func (h sentHeader) get(name string) string {
	if vv, _ := h.lookup(name); len(vv) > 0 {
		return vv[0]
	}
	return ""
}

func (w *writer) Header() http.Header { return w.header }

func (w *writer) WriteHeader(code int) {
	if w.status != 0 {
		return // net/http logs a superfluous call and ignores it
	}
	if code < 100 || code > 999 {
		panic(fmt.Sprintf("invalid WriteHeader code %v", code)) // as net/http
	}
	if code < 200 {
		return // no informational answers on the fast path; the final one follows
	}
	w.status = code
	w.sent, w.sentValues = snapshot(w.header, w.sent, w.sentValues)
}

func (w *writer) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if !bodyAllowed(w.status) {
		return 0, http.ErrBodyNotAllowed
	}
	if w.failed {
		return 0, errConnWrite
	}
	if !w.streaming && len(w.body)+len(p) <= MaxAnswer {
		w.body = append(w.body, p...)
		return len(p), nil
	}
	out := w.out[:0]
	if !w.streaming {
		// The head, and what was buffered as the first chunk.
		w.streaming = true
		out, _ = w.appendHead(out)
		out = appendChunk(out, w.body)
		w.body = w.body[:0]
	}
	out = appendChunk(out, p)
	w.out = out[:0]
	if len(out) == 0 {
		return 0, nil // an empty Write, streaming: nothing to send
	}
	if _, err := w.conn.Write(out); err != nil {
		w.failed = true
		return 0, errConnWrite
	}
	return len(p), nil
}

// errConnWrite: a streamed answer could not be written; the connection
// closes.
var errConnWrite = errors.New("fastpost: writing the answer failed")

// appendChunk appends p, if not empty, as one chunk of a chunked body.
func appendChunk(dst, p []byte) []byte {
	if len(p) == 0 {
		return dst
	}
	dst = strconv.AppendInt(dst, int64(len(p)), 16)
	dst = append(dst, "\r\n"...)
	dst = append(dst, p...)
	return append(dst, "\r\n"...)
}

// lastChunk ends a chunked body, without trailers.
const lastChunk = "0\r\n\r\n"

func bodyAllowed(status int) bool {
	return status != http.StatusNoContent && status != http.StatusNotModified && status >= 200
}

// appendAnswer appends what is left of the answer to dst, as net/http
// writes it for a handler that is done: the head (appendHead) and the
// body, or for a streamed answer its last chunk. closeAfter: the
// connection closes after it.
func (w *writer) appendAnswer(dst []byte) (_ []byte, closeAfter bool) {
	if w.streaming {
		return append(dst, lastChunk...), w.closeAfter()
	}
	dst, closeAfter = w.appendHead(dst)
	if bodyAllowed(w.status) {
		dst = append(dst, w.body...)
	}
	return dst, closeAfter
}

// closeAfter reports whether the connection closes after the answer: the
// client asked, or the handler's header (as sent) says so.
func (w *writer) closeAfter() bool {
	return w.clientClose || hasToken(w.sent.get("Connection"), "close")
}

// appendHead appends the answer's head to dst as net/http writes it: the
// status line, the handler's header without the framing it may have set,
// then Content-Length (except where no body is allowed) or, for a
// streamed answer, Transfer-Encoding: chunked, a sniffed Content-Type if
// none was set, Date, and Connection: close when the connection closes
// after it (closeAfter).
func (w *writer) appendHead(dst []byte) (_ []byte, closeAfter bool) {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	closeAfter = w.closeAfter()
	dst = appendStatusLine(dst, w.status)
	for _, f := range w.sent {
		if !fieldKept(f.name, w.status, closeAfter) {
			continue
		}
		for _, v := range f.values {
			dst = append(dst, f.name...)
			dst = append(dst, ": "...)
			dst = appendFieldValue(dst, v)
			dst = append(dst, "\r\n"...)
		}
	}
	dst = w.appendAddedFields(dst, closeAfter)
	return append(dst, "\r\n"...), closeAfter
}

// appendStatusLine appends "HTTP/1.1 <code> <text>", as net/http writes
// it for a code it has no text for too.
func appendStatusLine(dst []byte, status int) []byte {
	dst = append(dst, "HTTP/1.1 "...)
	dst = strconv.AppendInt(dst, int64(status), 10)
	dst = append(dst, ' ')
	if text := http.StatusText(status); text != "" {
		dst = append(dst, text...)
	} else {
		dst = append(dst, "status code "...)
		dst = strconv.AppendInt(dst, int64(status), 10)
	}
	return append(dst, "\r\n"...)
}

// fieldKept reports whether the handler's header field k goes out as the
// handler set it: not the framing, which is the fast path's, not a
// Connection that Connection: close replaces, and not what net/http drops.
func fieldKept(k string, status int, closeAfter bool) bool {
	switch {
	case k == "Content-Length", k == "Transfer-Encoding", k == "Trailer", strings.HasPrefix(k, http.TrailerPrefix):
		return false // the framing is the fast path's
	case k == "Connection" && closeAfter:
		return false // replaced by close below
	case k == "Content-Type" && status == http.StatusNotModified:
		return false
	case !httpsyntax.IsToken(k):
		return false // net/http drops what it cannot write
	}
	return true
}

// appendAddedFields appends the fields net/http adds to a handler's, in
// its order: Date, Content-Length, Content-Type, Connection.
func (w *writer) appendAddedFields(dst []byte, closeAfter bool) []byte {
	h := w.sent
	if _, haveDate := h.lookup("Date"); !haveDate {
		dst = append(dst, "Date: "...)
		dst = time.Now().UTC().AppendFormat(dst, http.TimeFormat)
		dst = append(dst, "\r\n"...)
	}
	if bodyAllowed(w.status) {
		if w.streaming {
			dst = append(dst, "Transfer-Encoding: chunked\r\n"...)
		} else {
			dst = append(dst, "Content-Length: "...)
			dst = strconv.AppendInt(dst, int64(len(w.body)), 10)
			dst = append(dst, "\r\n"...)
		}
		_, haveType := h.lookup("Content-Type")
		if !haveType && h.get("Content-Encoding") == "" && len(w.body) > 0 {
			dst = append(dst, "Content-Type: "...)
			dst = append(dst, http.DetectContentType(w.body)...)
			dst = append(dst, "\r\n"...)
		}
	}
	if closeAfter {
		dst = append(dst, "Connection: close\r\n"...)
	}
	return dst
}

// appendFieldValue appends v as net/http writes a header value: CR and
// LF replaced by spaces, then leading and trailing spaces and tabs cut.
func appendFieldValue(dst []byte, v string) []byte {
	isSpace := func(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }
	for len(v) > 0 && isSpace(v[0]) {
		v = v[1:]
	}
	for len(v) > 0 && isSpace(v[len(v)-1]) {
		v = v[:len(v)-1]
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c == '\r' || c == '\n' {
			c = ' '
		}
		dst = append(dst, c)
	}
	return dst
}

// hasToken reports whether the comma-separated list v holds token,
// compared without case, as net/http reads Connection.
func hasToken(v, token string) bool {
	for part := range strings.SplitSeq(v, ",") {
		if strings.EqualFold(strings.TrimSpace(part), token) {
			return true
		}
	}
	return false
}
