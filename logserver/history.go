package logserver

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/annal-dev/annal/kernel"
	"github.com/annal-dev/annal/kernel/event"
	"github.com/annal-dev/annal/logserver/api"
)

// historyParams are the query parameters GET /v1/events takes; any other
// is refused, so a misspelt filter never silently selects everything.
var historyParams = map[string]bool{
	"actor": true, "envelope": true, "session": true, "kind": true, "type": true, "outcome": true,
	"target": true, "since": true, "until": true, "order": true, "cursor": true, "limit": true,
}

// parseHistoryQuery reads GET /v1/events's query string exactly: each
// parameter at most once, times as RFC 3339 instants, order newest (the
// default) or oldest, cursor and limit decimal.
func parseHistoryQuery(values url.Values) (kernel.HistoryQuery, error) {
	var q kernel.HistoryQuery
	for name, vs := range values {
		if !historyParams[name] {
			return q, fmt.Errorf("%w: unknown parameter %q", kernel.ErrInvalid, name)
		}
		if len(vs) != 1 {
			return q, fmt.Errorf("%w: parameter %q given %d times", kernel.ErrInvalid, name, len(vs))
		}
	}
	get := values.Get
	q.Actor, q.Envelope, q.Session, q.Kind, q.Type, q.Outcome, q.TargetPrefix = get("actor"), get("envelope"), get("session"), get("kind"), get("type"), get("outcome"), get("target")
	for name, into := range map[string]*event.Instant{"since": &q.Since, "until": &q.Until} {
		if v := get(name); v != "" {
			t, err := event.ParseInstant(v)
			if err != nil {
				return q, fmt.Errorf("%w: %s: %v", kernel.ErrInvalid, name, err)
			}
			*into = t
		}
	}
	switch get("order") {
	case "", "newest":
	case "oldest":
		q.Oldest = true
	default:
		return q, fmt.Errorf("%w: order must be newest or oldest", kernel.ErrInvalid)
	}
	if v := get("cursor"); v != "" {
		c, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return q, fmt.Errorf("%w: cursor %q is not an index", kernel.ErrInvalid, v)
		}
		q.Cursor = &c
	}
	if v := get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > kernel.MaxHistoryPage {
			return q, fmt.Errorf("%w: limit must be 1 to %d", kernel.ErrInvalid, kernel.MaxHistoryPage)
		}
		q.Limit = n
	}
	return q, nil
}

// handleHistory serves GET /v1/events: a page of the history within the
// caller's oversight (kernel.History).
func (s *Server) handleHistory(w http.ResponseWriter, r *http.Request) {
	viewer, err := s.authenticate(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	q, err := parseHistoryQuery(r.URL.Query())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	page, err := s.k.History(r.Context(), viewer, q)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := api.HistoryPage{Events: make([]api.HistoryItem, len(page.Events)), NextCursor: page.NextCursor}
	for i, it := range page.Events {
		out.Events[i] = api.HistoryItem{Index: it.Index, LeafHash: it.LeafHash, Event: it.Entry}
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, out)
}
