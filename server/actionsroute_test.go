package server

import (
	"net/http/httptest"
	"testing"
)

// serve takes a request straight to handleSubmit only where the mux would
// route it to the same route: for requests of many methods and paths, some
// that only look like the route, isActionsRoute holds only when the mux
// names actionsPattern, and it holds for the form agents send.
func TestActionsRouteIsTheMuxs(t *testing.T) {
	ts := newTestServer(t)
	s := ts.srv.Config.Handler.(*Server)
	targets := []string{"/v1/actions", "/v1/actions/", "/v1//actions", "/v1/./actions", "/v1/%61ctions",
		"/v1%2Factions", "/V1/actions", "/v1/actions?x=1", "//v1/actions", "/v1/actions/..",
		"http://other.example/v1/actions", "/v1/actions%20"}
	taken := 0
	for _, method := range []string{"POST", "GET", "HEAD", "PUT", "OPTIONS", "post"} {
		for _, target := range targets {
			r := httptest.NewRequest(method, target, nil)
			_, pattern := s.mux.Handler(r)
			if !isActionsRoute(r) {
				continue
			}
			taken++
			if pattern != actionsPattern {
				t.Errorf("%s %s is taken to %s, but the mux routes it to %q", method, target, actionsPattern, pattern)
			}
		}
	}
	if !isActionsRoute(httptest.NewRequest("POST", "/v1/actions", nil)) {
		t.Fatal("an agent's POST /v1/actions is not taken straight to its handler")
	}
	t.Logf("%d of %d requests taken straight to the handler", taken, 6*len(targets))
}
