package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/annal-dev/annal/internal/httpsyntax"
	"go.opentelemetry.io/otel/trace"
)

// plainRoute is how a default client frames its requests itself when
// the kernel is reached by plain HTTP without a proxy: the address to
// dial, the Host header, and the Authorization line of its credential.
// Such a request skips http.Client and http.Request: it is written in
// one piece (request line, header, body) and its answer read by
// plainAnswer, over callerTransport's kept connections and under its rule
// for sending again. It carries the same request line and header fields
// as http.Request.Write would write for the client's request.
//
// Why: for a sequential agent, http.Client, the building of an
// http.Request and net/http's reading of the answer were most of what
// the client added to a receipt over a bare socket (about 45 µs a
// request of CPU on 2 busy cores, so as much latency).
//
// Requests a default client frames otherwise, through http.Client: signed
// ones, those whose context carries an OpenTelemetry span (their header
// gets a traceparent), and any whose URL leaves the kernel's host.
type plainRoute struct {
	addr, host string
	auth       string // "Authorization: Bearer <credential>\r\n", or ""
}

// newPlainRoute is base's plain route, or nil if a request to base needs
// net/http: https, a proxy from the environment, user information or a
// zone in the URL, or a credential that does not fit in a header line.
func newPlainRoute(t *callerTransport, base *url.URL, credential string) *plainRoute {
	if base.Scheme != "http" || base.User != nil || base.Host == "" || !plainHost(base.Host) {
		return nil
	}
	if p, err := t.proxy(&http.Request{URL: base, Header: http.Header{}}); err != nil || p != nil {
		return nil
	}
	r := &plainRoute{addr: hostPort(base), host: base.Host}
	if credential != "" {
		if !httpsyntax.IsFieldValue(credential) || strings.TrimSpace(credential) != credential {
			return nil
		}
		r.auth = "Authorization: Bearer " + credential + "\r\n"
	}
	return r
}

// plainHost reports whether host is written in a Host header as it is:
// ASCII letters, digits, dots, hyphens, and the colons and brackets of a
// port or an IPv6 address (no zone, no non-ASCII name to encode).
func plainHost(host string) bool {
	for i := 0; i < len(host); i++ {
		c := host[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '.', c == '-', c == ':', c == '[', c == ']':
		default:
			return false
		}
	}
	return true
}

// plainRequest is the request of c for method and path (at u), with body
// (JSON, or nil for none), if the client frames it itself (plainRoute).
func (c *Client) plainRequest(ctx context.Context, method, path string, u *url.URL, body []byte) (plainRequest, bool) {
	r := c.plain
	if r == nil || u.Scheme != "http" || u.Host != r.host || u.User != nil || c.signs(method, path) ||
		trace.SpanContextFromContext(ctx).IsValid() {
		return plainRequest{}, false
	}
	switch method {
	case http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete:
	default:
		return plainRequest{}, false
	}
	head := make([]byte, 0, 192+len(r.auth))
	head = append(head, method...)
	head = append(head, ' ')
	head = append(head, u.RequestURI()...)
	head = append(head, " HTTP/1.1\r\nHost: "...)
	head = append(head, r.host...)
	head = append(head, "\r\nUser-Agent: Go-http-client/1.1\r\n"...)
	switch {
	case body != nil:
		head = append(head, "Content-Length: "...)
		head = strconv.AppendInt(head, int64(len(body)), 10)
		head = append(head, "\r\nContent-Type: application/json\r\n"...)
	case method == http.MethodPost || method == http.MethodPut:
		head = append(head, "Content-Length: 0\r\n"...) // as Request.Write frames a bodiless POST
	}
	head = append(head, r.auth...)
	head = append(head, "\r\n"...)
	return plainRequest{ctx: ctx, addr: r.addr, method: method, head: head, body: body}, true
}

// sendPlain sends r, a plain request for u, and fails as http.Client
// fails: with a *url.Error naming the method and the URL.
func (c *Client) sendPlain(r plainRequest, u *url.URL) (*http.Response, error) {
	resp, err := sharedTransport.send(r)
	if err != nil {
		if ctxErr := r.ctx.Err(); ctxErr != nil {
			err = ctxErr
		}
		return nil, &url.Error{Op: r.method[:1] + strings.ToLower(r.method[1:]), URL: u.String(), Err: err}
	}
	return resp, nil
}

// redirects reports whether http.Client would follow resp to another
// URL: a redirecting status with a Location.
func redirects(resp *http.Response) bool {
	switch resp.StatusCode {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther, http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		return resp.Header.Get("Location") != ""
	}
	return false
}
