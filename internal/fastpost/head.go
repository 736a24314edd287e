package fastpost

import (
	"bytes"
	"net/http"
	"net/url"
	"strings"

	"github.com/annal-dev/annal/internal/httpsyntax"
)

// head is a request head the fast path serves: HTTP/1.1, and either a
// POST or a PUT framed by a single Content-Length, or a GET without a
// body.
type head struct {
	method string
	// target is the request-target as sent; u is it parsed, as net/http
	// parses it, or nil for exactly the POST route's path, whose URL the
	// Listener keeps (the actions' path need not be parsed again).
	target        string
	u             *url.URL
	host          string
	header        http.Header // without Host, as net/http's
	contentLength int64
	maxBody       int64 // the longest body the route reads: cfg.MaxBody, or less (Buffered)
	close         bool  // the client sent Connection: close
	// text is the head being parsed, as one string, and src the bytes it
	// was made from: every value is a substring of text (stringOf), and
	// the values share vals, so that a head costs a few allocations, not
	// three a field.
	text string
	src  []byte
	vals []string
}

// parseHead parses b, a request head ending in an empty line, if it is one
// the fast path serves (cfg's route, or one cfg.Buffered takes), in this
// strict subset of HTTP/1.1: the request line "POST <path> HTTP/1.1" or,
// for the requests Buffered takes, "GET <target> HTTP/1.1", "POST
// <target> HTTP/1.1" or "PUT <target> HTTP/1.1"; header lines "Name:
// value" of visible ASCII; one Host of host characters; for a POST or a
// PUT one Content-Length of at most cfg.MaxBody (and of what Buffered
// allows its route), for a GET none; and none of the headers that change the
// framing or the connection (Transfer-Encoding, Expect, Upgrade, TE,
// Trailer, a Connection other than keep-alive or close) or that net/http
// rewrites (Pragma). Anything else, valid or not, is not the fast path's:
// ok is false and net/http reads the same bytes. For every head parseHead
// accepts, net/http's ReadRequest gives the same request (FuzzParseHead).
func parseHead(b []byte, cfg *Config) (h head, ok bool) {
	rest, ok := h.cutRequestLine(b, cfg)
	if !ok {
		return head{}, false
	}
	h.contentLength = -1
	h.text, h.src = string(b), b
	h.vals = make([]string, 0, 8)
	for {
		var line []byte
		line, rest, ok = cutLine(rest)
		if !ok {
			return head{}, false
		}
		if len(line) == 0 {
			break
		}
		if !h.addField(line, cfg.MaxBody) {
			return head{}, false
		}
	}
	if h.host == "" || len(rest) != 0 {
		return head{}, false
	}
	switch {
	case h.method == http.MethodGet && h.contentLength < 0:
		h.contentLength = 0 // as net/http reads a GET without a body
	case h.method == http.MethodGet || h.contentLength < 0 || h.contentLength > h.maxBody:
		return head{}, false
	}
	if h.header == nil {
		h.header = http.Header{}
	}
	h.text, h.src, h.vals = "", nil, nil
	return h, true
}

// stringOf is v, a part of the head being parsed, as a substring of its
// text: v's offset in h.src is where its capacity falls short of the
// head's. An empty v may be nil (bytes.TrimLeft's answer for a value of
// spaces), and is no part of the head.
func (h *head) stringOf(v []byte) string {
	off := cap(h.src) - cap(v)
	if len(v) == 0 || off < 0 || off+len(v) > len(h.text) {
		return string(v)
	}
	return h.text[off : off+len(v)]
}

// headerName is the canonical form of a field name: without allocating
// for the names clients send to the fast path, spelled canonically.
func headerName(b []byte) string {
	switch string(b) { // compared in place
	case "Host":
		return "Host"
	case "Content-Length":
		return "Content-Length"
	case "Content-Type":
		return "Content-Type"
	case "Authorization":
		return "Authorization"
	case "Connection":
		return "Connection"
	case "User-Agent":
		return "User-Agent"
	case "Accept":
		return "Accept"
	case "Accept-Encoding":
		return "Accept-Encoding"
	case "Traceparent":
		return "Traceparent"
	}
	return http.CanonicalHeaderKey(string(b))
}

// cutRequestLine cuts the request line off b if it is exactly
// "POST <cfg.Path> HTTP/1.1", or "GET <target> HTTP/1.1", "POST
// <target> HTTP/1.1" or "PUT <target> HTTP/1.1" for a target in origin
// form that cfg.Buffered takes; it sets h's method, target, URL and
// longest body.
func (h *head) cutRequestLine(b []byte, cfg *Config) (rest []byte, ok bool) {
	line, rest, ok := cutLine(b)
	if !ok {
		return nil, false
	}
	path := cfg.Path
	if len(line) == len("POST  HTTP/1.1")+len(path) &&
		string(line[:5]) == "POST " && string(line[5:5+len(path)]) == path && string(line[5+len(path):]) == " HTTP/1.1" {
		h.method, h.target, h.maxBody = http.MethodPost, path, cfg.MaxBody
		return rest, true
	}
	if cfg.Buffered == nil || !h.bufferedRequestLine(line, cfg) {
		return nil, false
	}
	return rest, true
}

// bufferedRequestLine reads line if it is "GET <target> HTTP/1.1",
// "POST <target> HTTP/1.1" or "PUT <target> HTTP/1.1", the target in
// origin form, and cfg.Buffered takes it; it sets h's method, target, URL
// and longest body.
func (h *head) bufferedRequestLine(line []byte, cfg *Config) bool {
	method, target, ok := bytes.Cut(line, []byte(" "))
	if !ok || !bytes.HasSuffix(target, []byte(" HTTP/1.1")) {
		return false
	}
	target = target[:len(target)-len(" HTTP/1.1")]
	switch string(method) {
	case http.MethodGet:
		h.method = http.MethodGet
	case http.MethodPost:
		h.method = http.MethodPost
	case http.MethodPut:
		h.method = http.MethodPut
	default:
		return false
	}
	if !isOriginForm(target) {
		return false
	}
	h.target = string(target)
	u, err := url.ParseRequestURI(h.target)
	if err != nil {
		return false
	}
	maxBody, ok := cfg.Buffered(h.method, u)
	if !ok {
		return false
	}
	h.u, h.maxBody = u, min(maxBody, cfg.MaxBody)
	return true
}

// isOriginForm reports whether target is a request-target in origin form
// ("/path?query") of visible ASCII, without a fragment: a subset of the
// targets net/http reads, which it parses with url.ParseRequestURI.
func isOriginForm(target []byte) bool {
	if len(target) == 0 || target[0] != '/' {
		return false
	}
	for _, c := range target {
		if c <= ' ' || c >= 0x7f || c == '#' {
			return false
		}
	}
	return true
}

// addField adds the header line "Name: value" to h: Host to h.host (once;
// a Host is never empty), Content-Length to h.contentLength (once) and
// Connection to h.close, and every field but Host to h.header. It reports
// false for a line the fast path does not take.
func (h *head) addField(line []byte, maxBody int64) bool {
	colon := bytes.IndexByte(line, ':')
	if colon <= 0 || !httpsyntax.IsToken(line[:colon]) {
		return false
	}
	value := trimSpaceTab(line[colon+1:])
	if !isVisible(value) {
		return false
	}
	name := headerName(line[:colon])
	switch name {
	case "Host":
		if h.host != "" || !isHost(value) {
			return false
		}
		h.host = h.stringOf(value)
		return true
	case "Content-Length":
		n, ok := parseLength(value, maxBody)
		if !ok || h.contentLength >= 0 {
			return false
		}
		h.contentLength = n
	case "Connection":
		if !h.connection(value) {
			return false
		}
	case "Transfer-Encoding", "Expect", "Upgrade", "Te", "Trailer", "Http2-Settings", "Keep-Alive", "Proxy-Connection", "Pragma":
		return false
	}
	if h.header == nil {
		h.header = make(http.Header, 8)
	}
	v := h.stringOf(value)
	if had := h.header[name]; had != nil {
		h.header[name] = append(had, v)
		return true
	}
	// The first value of a name: one element of vals, capped so that a
	// second value of the name is appended to a copy, not over the next
	// name's.
	h.vals = append(h.vals, v)
	n := len(h.vals)
	h.header[name] = h.vals[n-1 : n : n]
	return true
}

// trimSpaceTab is b without its leading and trailing spaces and tabs, as
// bytes.TrimLeft and TrimRight with the cutset " \t" give it (an empty
// result is nil), without the set each of them builds a call: 1% of
// annald's CPU at five fields a request.
func trimSpaceTab(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t') {
		b = b[:len(b)-1]
	}
	if len(b) == 0 {
		return nil
	}
	return b
}

// connection reads a Connection value: close or keep-alive, in any case;
// anything else is not the fast path's.
func (h *head) connection(value []byte) bool {
	switch {
	case strings.EqualFold(string(value), "close"):
		h.close = true
	case strings.EqualFold(string(value), "keep-alive"):
	default:
		return false
	}
	return true
}

// cutLine cuts b at its first CRLF; a bare LF or CR is not a line end the
// fast path takes.
func cutLine(b []byte) (line, rest []byte, ok bool) {
	i := bytes.IndexByte(b, '\n')
	if i < 1 || b[i-1] != '\r' {
		return nil, nil, false
	}
	line = b[:i-1]
	if bytes.IndexByte(line, '\r') >= 0 {
		return nil, nil, false
	}
	return line, b[i+1:], true
}

// parseLength parses a Content-Length of 1 to 7 digits up to maxBody.
func parseLength(b []byte, maxBody int64) (int64, bool) {
	if len(b) == 0 || len(b) > 7 {
		return 0, false
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, n <= maxBody
}

// isVisible reports whether b is visible ASCII, spaces and tabs: a
// narrower set than the field values net/http takes, which also allow
// bytes above 0x7f.
func isVisible(b []byte) bool {
	for _, c := range b {
		if (c < 0x20 && c != '\t') || c >= 0x7f {
			return false
		}
	}
	return true
}

// isHost reports whether b is a host[:port] of letters, digits, '.', '-',
// ':' and the brackets of an IPv6 literal: a subset of what net/http's
// host check takes.
func isHost(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	for _, c := range b {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case c == '.', c == '-', c == ':', c == '[', c == ']':
		default:
			return false
		}
	}
	return true
}
