package server

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/annal-dev/annal/api"
)

// Cross-origin requests (CORS) let a web page on another origin — an
// agent or a dashboard running in a browser with Annal's TypeScript client
// — call the API with its bearer credential. Only the origins the operator
// names are answered (none by default: a page must then come from annald's
// own origin, as the console does). Credentials travel in the
// Authorization header, never as cookies: the answers never allow
// credentials, so a browser does not send the console's session cookie
// across origins, and a page of an allowed origin acts only with a
// credential it holds.

// corsMaxAge is how long (seconds) a browser may keep a preflight's answer.
const corsMaxAge = "600"

// corsRequestHeaders are the headers a cross-origin request may send: the
// credential, the body's type, a signed request's signature and a trace's
// parent.
var corsRequestHeaders = strings.Join([]string{"Authorization", "Content-Type", api.SignatureHeader, "Traceparent", "Tracestate"}, ", ")

// corsResponseHeaders are the headers a page may read beyond the safe
// ones: when to try again, and what a blob and a stream say.
var corsResponseHeaders = strings.Join([]string{"Retry-After", "Annal-Index", "Annal-OID", "Traceparent", "Link"}, ", ")

// AllowOrigins answers cross-origin requests from each origin
// ("https://app.example.com", "http://127.0.0.1:5173": a scheme, a host
// and a port, no path). It is set before the server serves.
func (s *Server) AllowOrigins(origins ...string) error {
	allowed := map[string]bool{}
	for _, o := range origins {
		u, err := url.Parse(o)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Path != "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
			return fmt.Errorf("origin %q is not a scheme and a host, as https://app.example.com", o)
		}
		allowed[u.Scheme+"://"+u.Host] = true
	}
	s.origins = allowed
	return nil
}

// cors sets the answer's CORS headers for an allowed origin, and answers a
// preflight itself: it reports whether the request was answered.
func (s *Server) cors(w http.ResponseWriter, r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" || !s.origins[origin] {
		return false // same origin, no browser, or not allowed: no CORS headers, so the browser keeps the answer from the page
	}
	h := w.Header()
	h.Set("Access-Control-Allow-Origin", origin)
	h.Add("Vary", "Origin")
	h.Set("Access-Control-Expose-Headers", corsResponseHeaders)
	if r.Method != http.MethodOptions || r.Header.Get("Access-Control-Request-Method") == "" {
		return false
	}
	h.Set("Access-Control-Allow-Methods", "GET, POST, PUT, DELETE")
	h.Set("Access-Control-Allow-Headers", corsRequestHeaders)
	h.Set("Access-Control-Max-Age", corsMaxAge)
	w.WriteHeader(http.StatusNoContent)
	return true
}
