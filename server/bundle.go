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

func parseBundleQuery(q url.Values) (kernel.ExportSelection, error) {
	var sel kernel.ExportSelection
	for name, values := range q {
		if !bundleParams[name] {
			return sel, fmt.Errorf("%w: unknown parameter %q (from, to, actor, session, kind, since, until, old_size, sealed)", kernel.ErrInvalid, name)
		}
		if len(values) != 1 {
			return sel, fmt.Errorf("%w: parameter %q is given %d times", kernel.ErrInvalid, name, len(values))
		}
	}
	index := func(name string) (*uint64, error) {
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
	var err error
	if sel.From, err = index("from"); err != nil {
		return sel, err
	}
	if sel.To, err = index("to"); err != nil {
		return sel, err
	}
	old, err := index("old_size")
	if err != nil {
		return sel, err
	}
	if old != nil {
		sel.OldSize = *old
	}
	sel.Actor, sel.Session, sel.Kind = q.Get("actor"), q.Get("session"), q.Get("kind")
	switch q.Get("sealed") {
	case "", "open":
	case "withhold":
		sel.WithholdSealed = true
	default:
		return sel, fmt.Errorf("%w: sealed=%q: open (the default: sealed payloads the kernel holds, opened) or withhold (commitments only)", kernel.ErrInvalid, q.Get("sealed"))
	}
	for name, dst := range map[string]*time.Time{"since": &sel.Since, "until": &sel.Until} {
		if v := q.Get(name); v != "" {
			t, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				return sel, fmt.Errorf("%w: %s %q is not an RFC 3339 time", kernel.ErrInvalid, name, v)
			}
			*dst = t
		}
	}
	if sel.OldSize == 0 && old != nil {
		return sel, errors.Join(kernel.ErrInvalid, errors.New("old_size 0 proves nothing"))
	}
	return sel, nil
}
