package fastpost

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/annal-dev/annal/internal/httpsyntax"
)

// writer is the fast path's http.ResponseWriter: it buffers the answer
// whole, so that it goes out in one write with its Content-Length.
type writer struct {
	header  http.Header
	sent    http.Header // the header when WriteHeader was called, as net/http keeps it
	status  int
	body    []byte
	tooLong bool
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
	w.sent = w.header.Clone()
}

func (w *writer) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if !bodyAllowed(w.status) {
		return 0, http.ErrBodyNotAllowed
	}
	if len(w.body)+len(p) > MaxAnswer {
		w.tooLong = true
		return 0, errAnswerTooLong
	}
	w.body = append(w.body, p...)
	return len(p), nil
}

var errAnswerTooLong = errors.New("fastpost: answer longer than MaxAnswer")

func bodyAllowed(status int) bool {
	return status != http.StatusNoContent && status != http.StatusNotModified && status >= 200
}

// appendAnswer appends the answer to dst as net/http writes it for a
// handler that is done: the status line, the handler's header without the
// framing it may have set, then Content-Length (except where no body is
// allowed), a sniffed Content-Type if none was set, Date, and Connection:
// close when the connection closes after it (closeAfter): the client
// asked, or the handler's header says so.
func (w *writer) appendAnswer(dst []byte, clientClose bool) (_ []byte, closeAfter bool) {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	h := w.sent
	closeAfter = clientClose || hasToken(h.Get("Connection"), "close")
	dst = appendStatusLine(dst, w.status)
	keys := make([]string, 0, len(h))
	for k := range h {
		if fieldKept(k, w.status, closeAfter) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		for _, v := range h[k] {
			dst = append(dst, k...)
			dst = append(dst, ": "...)
			dst = appendFieldValue(dst, v)
			dst = append(dst, "\r\n"...)
		}
	}
	dst = w.appendAddedFields(dst, closeAfter)
	dst = append(dst, "\r\n"...)
	if bodyAllowed(w.status) {
		dst = append(dst, w.body...)
	}
	return dst, closeAfter
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
	if _, haveDate := h["Date"]; !haveDate {
		dst = append(dst, "Date: "...)
		dst = time.Now().UTC().AppendFormat(dst, http.TimeFormat)
		dst = append(dst, "\r\n"...)
	}
	if bodyAllowed(w.status) {
		dst = append(dst, "Content-Length: "...)
		dst = strconv.AppendInt(dst, int64(len(w.body)), 10)
		dst = append(dst, "\r\n"...)
		_, haveType := h["Content-Type"]
		if !haveType && h.Get("Content-Encoding") == "" && len(w.body) > 0 {
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
