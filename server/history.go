package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/annal-dev/annal/api"
	"github.com/annal-dev/annal/kernel"
	"github.com/annal-dev/annal/kernel/event"
)

// historyParams are the query parameters GET /v1/events takes; any other
// is refused, so a misspelt filter never silently selects everything.
var historyParams = map[string]bool{
	"actor": true, "envelope": true, "session": true, "kind": true, "type": true, "outcome": true,
	"target": true, "since": true, "until": true, "order": true, "cursor": true, "limit": true, "trace_id": true,
}

// parseHistoryQuery reads GET /v1/events's query string exactly: each
// parameter at most once, times as RFC 3339 instants, order newest (the
// default) or oldest, cursor and limit decimal.
func parseHistoryQuery(values url.Values) (kernel.HistoryQuery, error) {
	var q kernel.HistoryQuery
	if err := checkQueryParams(values, historyParams, "%w: unknown parameter %q", "%w: parameter %q given %d times"); err != nil {
		return q, err
	}
	get := values.Get
	q.Actor, q.Envelope, q.Session, q.Kind, q.Type, q.Outcome, q.TargetPrefix = get("actor"), get("envelope"), get("session"), get("kind"), get("type"), get("outcome"), get("target")
	q.TraceID = get("trace_id")
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
		out.Events[i] = s.historyItem(it.Index, it.LeafHash, it.Entry)
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, out)
}

// streamKeepAlive is how often an idle stream sends a comment, so that
// proxies keep it open and a gone client is noticed.
const streamKeepAlive = 15 * time.Second

// handleStream serves GET /v1/events/stream: the history as Server-Sent
// Events, oldest first and then live, with the filters of GET /v1/events.
// Each event is "id: <index>", "event: event" and one data line holding
// the history item as JSON. It starts after Last-Event-ID (a reconnect
// resumes where it left off), else at the cursor parameter, else with the
// next event logged. A query a page would refuse (kernel.CheckHistory) is
// refused as a page refuses it, before the stream starts; a refusal that
// comes later (the viewer's oversight changed) ends the stream with an
// "event: error".
func (s *Server) handleStream(w http.ResponseWriter, r *http.Request) {
	viewer, err := s.authenticate(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	q, err := parseStreamQuery(r.URL.Query())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	// What a page would refuse, the stream refuses before it starts.
	if err := s.k.CheckHistory(viewer, q); err != nil {
		s.fail(w, r, err)
		return
	}
	next, err := s.streamStart(r, q.Cursor)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	flusher, ok := w.(http.Flusher)
	if !ok {
		s.fail(w, r, errors.New("this connection cannot stream"))
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	flusher.Flush()
	q.Oldest, q.Limit = true, kernel.MaxHistoryPage
	keepAlive := time.NewTicker(streamKeepAlive)
	defer keepAlive.Stop()
	for {
		size, grown := s.k.Grown()
		if next < size {
			next, ok = s.sendEvents(w, r, viewer, q, next, size)
			flusher.Flush()
			if !ok {
				return
			}
			continue
		}
		select {
		case <-r.Context().Done():
			return
		case <-grown:
		case <-keepAlive.C:
			fmt.Fprint(w, ": keep-alive\n\n")
			flusher.Flush()
		}
	}
}

// parseStreamQuery reads GET /v1/events/stream's query: the filters of
// GET /v1/events, without order and limit.
func parseStreamQuery(values url.Values) (kernel.HistoryQuery, error) {
	for _, p := range []string{"order", "limit"} {
		if values.Has(p) {
			return kernel.HistoryQuery{}, fmt.Errorf("%w: a stream takes no %s", kernel.ErrInvalid, p)
		}
	}
	return parseHistoryQuery(values)
}

// streamStart is the index a stream starts at: after Last-Event-ID, else
// at cursor, else at the next event logged.
func (s *Server) streamStart(r *http.Request, cursor *uint64) (uint64, error) {
	next, _ := s.k.Grown()
	if cursor != nil {
		next = *cursor
	}
	if id := r.Header.Get("Last-Event-ID"); id != "" {
		last, err := strconv.ParseUint(id, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%w: Last-Event-ID %q is not an index", kernel.ErrInvalid, id)
		}
		next = last + 1
	}
	return next, nil
}

// sendEvents writes a page of the events from next on, below size, and
// returns where the next page starts. A refusal ends the stream: it is
// written as an "event: error", and ok is false.
func (s *Server) sendEvents(w io.Writer, r *http.Request, viewer *kernel.Actor, q kernel.HistoryQuery, next, size uint64) (_ uint64, ok bool) {
	q.Cursor = &next
	page, err := s.k.History(r.Context(), viewer, q)
	if err != nil {
		fmt.Fprintf(w, "event: error\ndata: %s\n\n", strconv.Quote(err.Error()))
		return next, false
	}
	for _, it := range page.Events {
		item, _ := json.Marshal(s.historyItem(it.Index, it.LeafHash, it.Entry))
		fmt.Fprintf(w, "id: %d\nevent: event\ndata: %s\n\n", it.Index, item)
		next = it.Index + 1
	}
	if page.NextCursor != nil {
		return max(next, *page.NextCursor), true
	}
	return max(next, size), true
}

// historyItem is one event as the history shows it: with its sealed
// payload opened while the kernel holds it (the viewer may see the event,
// so it may see what the event did), or marked erased.
func (s *Server) historyItem(index uint64, leafHash string, entry []byte) api.HistoryItem {
	it := api.HistoryItem{Index: index, LeafHash: leafHash, Event: entry}
	if sp := kernel.SealedOf(entry); sp != nil {
		if _, payload, err := s.k.OpenSealed(sp); err == nil {
			it.SealedPayload = payload
		} else {
			it.Erased = errors.Is(err, kernel.ErrErased)
		}
	}
	return it
}
