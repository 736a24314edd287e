package server

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/annal-dev/annal/kernel"
)

// bundleParams are the query parameters GET /v1/bundle takes; any other is
// refused.
var bundleParams = map[string]bool{
	"from": true, "to": true, "actor": true, "session": true, "kind": true,
	"since": true, "until": true, "old_size": true, "sealed": true,
}

// handleBundle streams an audit bundle (annal.dev/audit-bundle/v1) of the
// selected events. Exporting is an auditor's act on the whole history, so
// it needs a human's credential (root or another human), although the
// entries and tiles it draws on are public: a bundle of one actor's or one
// session's events is a query over the log that agents are not given.
func (s *Server) handleBundle(w http.ResponseWriter, r *http.Request) {
	actor, err := s.authenticate(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if !actor.IsHuman() {
		s.fail(w, r, fmt.Errorf("%w: only a human exports audit bundles", kernel.ErrForbidden))
		return
	}
	sel, err := parseBundleQuery(r.URL.Query())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	sw := &startedWriter{w: w}
	res, err := s.k.Export(r.Context(), sel, sw, nil)
	if err != nil {
		if !sw.started {
			s.fail(w, r, err)
			return
		}
		// The status is sent: the bundle stays without its trailer, which
		// any verifier reports as truncated.
		s.logger.Error("bundle export failed mid-stream", "err", err)
		return
	}
	s.logger.Info("bundle exported", "by", actor.ID, "events", res.Events, "bytes", res.Bytes, "size", res.Size)
}

// startedWriter sets the headers on the first write of the bundle.
type startedWriter struct {
	w       http.ResponseWriter
	started bool
}

func (s *startedWriter) Write(p []byte) (int, error) {
	if !s.started {
		s.started = true
		s.w.Header().Set("Content-Type", "application/jsonl; charset=utf-8")
		s.w.Header().Set("Cache-Control", "no-store")
		s.w.WriteHeader(http.StatusOK)
	}
	return s.w.Write(p)
}

var _ io.Writer = (*startedWriter)(nil)

// parseBundleQuery reads GET /v1/bundle's query string exactly: each
// parameter at most once, indices decimal, times RFC 3339, sealed open
// (the default) or withhold, and old_size, when given, not 0.
func parseBundleQuery(q url.Values) (kernel.ExportSelection, error) {
	var sel kernel.ExportSelection
	if err := checkQueryParams(q, bundleParams,
		"%w: unknown parameter %q (from, to, actor, session, kind, since, until, old_size, sealed)",
		"%w: parameter %q is given %d times"); err != nil {
		return sel, err
	}
	var err error
	if sel.From, err = optionalIndex(q, "from"); err != nil {
		return sel, err
	}
	if sel.To, err = optionalIndex(q, "to"); err != nil {
		return sel, err
	}
	old, err := optionalIndex(q, "old_size")
	if err != nil {
		return sel, err
	}
	if old != nil {
		sel.OldSize = *old
	}
	sel.Actor, sel.Session, sel.Kind = q.Get("actor"), q.Get("session"), q.Get("kind")
	if sel.WithholdSealed, err = parseSealed(q.Get("sealed")); err != nil {
		return sel, err
	}
	if err := parseTimes(q, map[string]*time.Time{"since": &sel.Since, "until": &sel.Until}); err != nil {
		return sel, err
	}
	if sel.OldSize == 0 && old != nil {
		return sel, errors.Join(kernel.ErrInvalid, errors.New("old_size 0 proves nothing"))
	}
	return sel, nil
}

// checkQueryParams refuses a query with a parameter not in known, or one
// given more than once: unknown and repeated word the refusals, with
// kernel.ErrInvalid and the parameter's name, and for repeated the times
// it is given.
func checkQueryParams(q url.Values, known map[string]bool, unknown, repeated string) error {
	for name, values := range q {
		if !known[name] {
			return fmt.Errorf(unknown, kernel.ErrInvalid, name)
		}
		if len(values) != 1 {
			return fmt.Errorf(repeated, kernel.ErrInvalid, name, len(values))
		}
	}
	return nil
}

// optionalIndex reads the index parameter name: nil when it is absent.
func optionalIndex(q url.Values, name string) (*uint64, error) {
	v := q.Get(name)
	if v == "" {
		return nil, nil
	}
	n, err := parseIndex(v)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return &n, nil
}

// parseSealed reads the sealed parameter: whether the bundle withholds
// sealed payloads.
func parseSealed(v string) (withhold bool, err error) {
	switch v {
	case "", "open":
		return false, nil
	case "withhold":
		return true, nil
	}
	return false, fmt.Errorf("%w: sealed=%q: open (the default: sealed payloads the kernel holds, opened) or withhold (commitments only)", kernel.ErrInvalid, v)
}

// parseTimes reads each time parameter given, named by into's keys, as
// RFC 3339, into the time it names.
func parseTimes(q url.Values, into map[string]*time.Time) error {
	for name, dst := range into {
		if v := q.Get(name); v != "" {
			t, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				return fmt.Errorf("%w: %s %q is not an RFC 3339 time", kernel.ErrInvalid, name, v)
			}
			*dst = t
		}
	}
	return nil
}
