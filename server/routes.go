package server

import (
	"net/http"
	"net/url"
	"sync"

	"github.com/annal-dev/annal/api"
)

// route is one endpoint of the API: its method and path pattern, and what
// serves it.
type route struct {
	pattern string
	endpoint
}

// endpoint is a route's handler and what a front may know of it.
type endpoint struct {
	handler http.Handler
	// maxBody is the longest body the handler reads; stated for the
	// routes answered whole, whose bodies a front may buffer. A handler
	// whose limit the operator sets (an agent's file, at most --max-blob)
	// states the most it may be.
	maxBody int64
	// answeredWhole: the handler writes one answer and returns, with no
	// Flush, no Hijack, no stream, and no long wait that needs to end
	// when the client goes away, and its answers are small: a receipt, a
	// record, a proof, an agent's file (at most api.MaxVFSContent). A
	// front may then buffer the request and its answer (Buffered).
	answeredWhole bool
}

// serve is an endpoint of h, which reads a body of at most maxBody bytes.
func serve(h http.HandlerFunc, maxBody int64) endpoint {
	return endpoint{handler: h, maxBody: maxBody}
}

// whole marks e as answered whole.
func (e endpoint) whole() endpoint {
	e.answeredWhole = true
	return e
}

// routes is every route a Server serves. Its handlers are method values
// and closures of s, called only when a request comes: routing builds its
// copy of the patterns from a Server that serves nothing.
func (s *Server) routes() []route {
	rs := []route{
		{"GET /checkpoint", serve(s.handleCheckpoint, 0).whole()},
		{"GET /tile/", serve(s.handleTile, 0)},
		{"GET /v1/info", serve(s.handleInfo, 0).whole()},
		{"GET /v1/healthz", serve(s.handleHealth, 0).whole()},
		{"GET /v1/readyz", serve(s.handleReady, 0).whole()},
		{actionsPattern, serve(s.handleSubmit, api.MaxActionBody).whole()},
		{"POST /v1/agents", serve(s.handleCreateAgent, api.MaxAgentBody).whole()},
		{"GET /v1/events", serve(s.handleHistory, 0)},
		{"GET /v1/events/stream", serve(s.handleStream, 0)},
		{"GET /v1/events/{index}", serve(s.handleEvent, 0).whole()},
		{"GET /v1/proof/consistency", serve(s.handleConsistency, 0).whole()},
		{"GET /v1/proof/{index}", serve(s.handleProof, 0).whole()},
		{"GET /v1/bundle", serve(s.handleBundle, 0)},
		{"GET /metrics", serve(s.serveMetrics, 0)},
		{"GET /v1/health", serve(s.handleLogHealth, 0)},
		{"POST /v1/blobs", serve(s.handlePutBlob, 0)},
		{"GET /v1/blobs/{oid}", serve(s.handleGetBlob, 0)},
	}
	rs = append(rs, s.governanceRoutes()...)
	rs = append(rs, s.controlRoutes()...)
	rs = append(rs, s.vfsRoutes()...)
	return append(rs, s.consoleRoutes()...)
}

func (s *Server) serveMetrics(w http.ResponseWriter, r *http.Request) {
	s.metrics.serve.ServeHTTP(w, r)
}

// Buffered reports whether a front may buffer a request of method (a
// GET, a POST or a PUT) to u and its answer: whether the server's mux
// routes it to a route answered whole (endpoint.answeredWhole: a receipt,
// a proof, one log entry, the log's state, an actor, a hold, a session's
// or a saga's record, an agent's file), and the longest body that route
// reads (maxBody). A front then serves it on the same connection as
// agents' actions (annald's fast path: fastpost's Config.Buffered), so
// that an agent that reads a proof, records a session's delta or writes
// its memory between its actions keeps that path for them.
//
// The route is the one the server's own mux would choose, found by a mux
// of the same patterns: a request it would redirect, refuse (404, 405) or
// route elsewhere is not taken.
func Buffered(method string, u *url.URL) (maxBody int64, ok bool) {
	if method != http.MethodGet && method != http.MethodPost && method != http.MethodPut {
		return 0, false // a HEAD's answer, for one, is the GET's without its body
	}
	rt := theRouting()
	h, pattern := rt.mux.Handler(&http.Request{Method: method, URL: u})
	if mark, routed := h.(routeMark); !routed || string(mark) != pattern {
		return 0, false // a redirect, a 404 or a 405: not a route's own handler
	}
	maxBody, ok = rt.whole[pattern]
	return maxBody, ok
}

// routing is how every Server's mux routes, and which routes are answered
// whole.
type routing struct {
	mux   *http.ServeMux   // every route's pattern, served by its routeMark
	whole map[string]int64 // by pattern, the routes answered whole: their maxBody
}

// routeMark stands for a route's handler in routing's mux: its pattern.
type routeMark string

func (routeMark) ServeHTTP(http.ResponseWriter, *http.Request) {}

var theRouting = sync.OnceValue(func() *routing {
	rt := &routing{mux: http.NewServeMux(), whole: map[string]int64{}}
	for _, r := range (&Server{}).routes() {
		rt.mux.Handle(r.pattern, routeMark(r.pattern))
		if r.answeredWhole {
			rt.whole[r.pattern] = r.maxBody
		}
	}
	return rt
})
