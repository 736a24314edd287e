package client

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"

	"github.com/annal-dev/annal/internal/httpsyntax"
)

// plainAnswer reads the head of an answer from br if the head is in a
// strict subset of HTTP/1.1, the one annald sends on a kept connection:
// an HTTP/1.1 status line with a final status that has a body, header
// fields of token names and plain values on lines ended by CRLF, one
// Content-Length and no Transfer-Encoding, Trailer or Connection. For
// such a head, http.ReadResponse gives the same answer; the fuzz test
// FuzzCallerTransportAnswer compares them. For any other (or a head longer
// than br's buffer), it consumes nothing and returns false, and the
// caller reads the answer with http.ReadResponse, as before.
//
// Why: ReadResponse's general reader (textproto, the transfer-encoding
// logic) was a sizeable part of what a sequential agent's client spent
// on each receipt.
//
// An error is what reading the first bytes of the head failed with: EOF
// before any byte is io.ErrUnexpectedEOF, as ReadResponse reports it.
func plainAnswer(br *bufio.Reader, method string) (*http.Response, bool, error) {
	if method == http.MethodHead {
		return nil, false, nil
	}
	head, err := peekHead(br)
	if err != nil || head == nil {
		return nil, false, err
	}
	resp, ok := parsePlainHead(head)
	if !ok {
		return nil, false, nil
	}
	br.Discard(len(head))
	if resp.ContentLength == 0 {
		resp.Body = http.NoBody
	} else {
		resp.Body = &fixedBody{r: br, left: resp.ContentLength}
	}
	return resp, true, nil
}

// peekHead returns the answer's head, through the empty line that ends
// it, as buffered in br without consuming it; nil if a line ends in a
// bare LF, the head does not fit in br's buffer, or the connection fails
// after the head began (ReadResponse then reads it, and says what is
// wrong). It waits for the head's bytes to come.
func peekHead(br *bufio.Reader) ([]byte, error) {
	lineStart, looked := 0, 0 // the line being read; the bytes scanned
	for {
		n := br.Buffered()
		if n <= looked {
			n = looked + 1 // wait for more
		}
		if n > br.Size() {
			return nil, nil
		}
		buf, err := br.Peek(n)
		if len(buf) <= looked {
			if len(buf) == 0 && err != nil {
				if err == io.EOF {
					err = io.ErrUnexpectedEOF
				}
				return nil, err
			}
			return nil, nil
		}
		looked = len(buf)
		for {
			nl := bytes.IndexByte(buf[lineStart:], '\n')
			if nl < 0 {
				break
			}
			end := lineStart + nl
			if end == 0 || buf[end-1] != '\r' {
				return nil, nil
			}
			if end == lineStart+1 && lineStart > 0 { // the empty line
				return buf[:end+1], nil
			}
			lineStart = end + 1
		}
	}
}

// parsePlainHead parses a head peekHead found: the answer without its
// body, or false if it is not in plainAnswer's subset. Its header's values
// share one string and one slice, as Header.Clone's do, and the names
// annald sends are not allocated again.
func parsePlainHead(head []byte) (*http.Response, bool) {
	line, rest, _ := bytes.Cut(head, []byte("\r\n"))
	status, ok := plainStatus(line)
	if !ok {
		return nil, false
	}
	resp := &http.Response{
		Status: string(line[len("HTTP/1.1 "):]), StatusCode: status,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		ContentLength: -1,
	}
	type field struct {
		key   string
		value []byte
	}
	var kept [16]field
	fields, size := kept[:0], 0
	for {
		line, rest, _ = bytes.Cut(rest, []byte("\r\n"))
		if len(line) == 0 {
			break
		}
		name, value, ok := plainField(line)
		if !ok {
			return nil, false
		}
		key := headerKey(name)
		switch key {
		case "Transfer-Encoding", "Trailer", "Connection":
			return nil, false
		case "Content-Length":
			n, ok := plainLength(value)
			if !ok || resp.ContentLength >= 0 {
				return nil, false
			}
			resp.ContentLength = n
		}
		fields = append(fields, field{key, value})
		size += len(value)
	}
	var all strings.Builder
	all.Grow(size)
	for _, f := range fields {
		all.Write(f.value)
	}
	joined := all.String()
	values := make([]string, len(fields))
	resp.Header = make(http.Header, len(fields))
	for i, f := range fields {
		values[i], joined = joined[:len(f.value)], joined[len(f.value):]
		if vv, twice := resp.Header[f.key]; twice {
			resp.Header[f.key] = append(vv, values[i])
		} else {
			resp.Header[f.key] = values[i : i+1 : i+1]
		}
	}
	return resp, resp.ContentLength >= 0
}

// headerKey is the canonical form of a header field's name, without
// allocating for the names annald sends.
func headerKey(name []byte) string {
	switch string(name) {
	case "Content-Type":
		return "Content-Type"
	case "Content-Length":
		return "Content-Length"
	case "Date":
		return "Date"
	case "Cache-Control":
		return "Cache-Control"
	case "X-Content-Type-Options":
		return "X-Content-Type-Options"
	case "Retry-After":
		return "Retry-After"
	}
	return textproto.CanonicalMIMEHeaderKey(string(name))
}

// plainStatus is the code of an HTTP/1.1 status line whose answer has a
// body framed by its Content-Length: a final status, not 204 or 304.
func plainStatus(line []byte) (int, bool) {
	const proto = "HTTP/1.1 "
	if len(line) < len(proto)+4 || string(line[:len(proto)]) != proto || line[len(proto)+3] != ' ' {
		return 0, false
	}
	code := line[len(proto) : len(proto)+3]
	if !httpsyntax.IsDigits(code) || !httpsyntax.IsFieldValue(line[len(proto)+4:]) {
		return 0, false
	}
	status, _ := strconv.Atoi(string(code))
	if status < 200 || status > 599 || status == http.StatusNoContent || status == http.StatusNotModified {
		return 0, false
	}
	return status, true
}

// plainField splits a header line "name: value": a token name right
// before the colon, and the value without the spaces and tabs around it.
func plainField(line []byte) (name, value []byte, ok bool) {
	name, value, ok = bytes.Cut(line, []byte(":"))
	if !ok || !httpsyntax.IsToken(name) {
		return nil, nil, false
	}
	value = bytes.Trim(value, " \t")
	return name, value, httpsyntax.IsFieldValue(value)
}

// plainLength parses a Content-Length of at most 18 digits.
func plainLength(b []byte) (int64, bool) {
	if len(b) > 18 || !httpsyntax.IsDigits(b) {
		return 0, false
	}
	n, err := strconv.ParseInt(string(b), 10, 64)
	return n, err == nil
}

// fixedBody is a body of a known length: io.ErrUnexpectedEOF if the
// connection ends before it, io.EOF after it, as net/http's body reader.
type fixedBody struct {
	r    io.Reader
	left int64
}

func (b *fixedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.r.Read(p)
	b.left -= int64(n)
	switch {
	case b.left == 0:
		return n, io.EOF
	case err == io.EOF:
		return n, io.ErrUnexpectedEOF
	}
	return n, err
}

func (b *fixedBody) Close() error { return nil }
