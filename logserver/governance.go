package logserver

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/annal-dev/annal/kernel"
	"github.com/annal-dev/annal/kernel/event"
	"github.com/annal-dev/annal/logserver/api"
)

func grantsIn(in []api.Grant) []event.Grant {
	out := make([]event.Grant, len(in))
	for i, g := range in {
		out[i].Pattern = g.Pattern
		for _, a := range g.Actions {
			out[i].Actions = append(out[i].Actions, event.ActionType(a))
		}
	}
	return out
}

func grantsOut(in []event.Grant) []api.Grant {
	out := make([]api.Grant, len(in))
	for i, g := range in {
		out[i].Pattern = g.Pattern
		for _, a := range g.Actions {
			out[i].Actions = append(out[i].Actions, string(a))
		}
	}
	return out
}

func envelopeOut(v *kernel.Envelope) api.Envelope {
	return api.Envelope{
		ID: v.ID, Holder: v.Holder, Issuer: v.Issuer, Parent: v.Parent, Budget: v.Budget, Consumed: v.Consumed,
		Reserved: v.Reserved, Grants: grantsOut(v.Grants), HoldOn: grantsOut(v.HoldOn), HoldTimeoutSecs: v.HoldTimeoutSecs,
		Expires: v.Expires, Revoked: v.Revoked, Index: v.IssuedAt,
	}
}

// handleActor shows an actor's record and energy to itself, its creator
// and root.
func (s *Server) handleActor(w http.ResponseWriter, r *http.Request) {
	viewer, err := s.authenticate(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	a, err := s.k.Actor(r.PathValue("id"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if viewer.ID != a.ID && viewer.ID != kernel.RootID && a.Creator != viewer.ID {
		s.fail(w, r, fmt.Errorf("%w: %s may not see %s", kernel.ErrForbidden, viewer.ID, a.ID))
		return
	}
	writeJSON(w, http.StatusOK, api.Actor{
		ID: a.ID, Kind: string(a.Kind), Name: a.Name, Purpose: a.Purpose, Creator: a.Creator, Expires: a.Expires,
		Status: a.Status, Grants: grantsOut(a.Grants), Share: a.Share, Balance: a.Balance, Reserved: a.Reserved, Consumed: a.Consumed,
	})
}

func (s *Server) handleStatus(w http.ResponseWriter, r *http.Request) {
	by, err := s.authenticate(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var req api.StatusRequest
	if err := readJSON(w, r, api.MaxSmallBody, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	rc, err := s.k.SetStatus(r.Context(), by, r.PathValue("id"), req.Status, req.Reason)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, receiptOf(rc))
}

func (s *Server) handleIssueEnvelope(w http.ResponseWriter, r *http.Request) {
	issuer, err := s.authenticate(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var req api.EnvelopeRequest
	if err := readJSON(w, r, api.MaxEnvelopeBody, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	v, _, err := s.k.IssueEnvelope(r.Context(), issuer, kernel.EnvelopeRequest{
		Holder: req.Holder, Parent: req.Parent, Budget: req.Budget, Grants: grantsIn(req.Grants),
		HoldOn: grantsIn(req.HoldOn), HoldTimeoutSecs: req.HoldTimeoutSecs, Expires: req.Expires,
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, envelopeOut(v))
}

func (s *Server) handleEnvelopes(w http.ResponseWriter, r *http.Request) {
	viewer, err := s.authenticate(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := []api.Envelope{}
	for _, v := range s.k.Envelopes(viewer) {
		out = append(out, envelopeOut(&v))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) handleEnvelope(w http.ResponseWriter, r *http.Request) {
	viewer, err := s.authenticate(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	v, err := s.k.Envelope(r.PathValue("id"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if viewer.ID != kernel.RootID && viewer.ID != v.Holder && viewer.ID != v.Issuer {
		s.fail(w, r, fmt.Errorf("%w: %s may not see envelope %s", kernel.ErrForbidden, viewer.ID, v.ID))
		return
	}
	writeJSON(w, http.StatusOK, envelopeOut(v))
}

func (s *Server) handleRevoke(w http.ResponseWriter, r *http.Request) {
	by, err := s.authenticate(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var req api.HoldAnswer
	if err := readOptionalJSON(w, r, api.MaxSmallBody, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	rc, err := s.k.RevokeEnvelope(r.Context(), by, r.PathValue("id"), req.Reason)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, receiptOf(rc))
}

func (s *Server) handleHolds(w http.ResponseWriter, r *http.Request) {
	viewer, err := s.authenticate(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := []api.Hold{}
	for _, h := range s.k.Holds(viewer, r.URL.Query().Get("status")) {
		out = append(out, api.Hold{
			ID: h.ID, Actor: h.Actor, Envelope: h.Envelope, Type: string(h.Action.Type), Target: h.Action.Target,
			Reserved: h.Reserved, Deadline: h.Deadline, Status: h.Status, RequestedAt: h.RequestedAt,
			AnsweredBy: h.AnsweredBy, Settled: h.Settled,
		})
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) handleAnswerHold(w http.ResponseWriter, r *http.Request) {
	by, err := s.authenticate(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	decision := r.PathValue("decision")
	if decision != event.HoldApprove && decision != event.HoldReject {
		s.fail(w, r, errors.Join(kernel.ErrNotFound, fmt.Errorf("POST /v1/holds/<id>/approve or /reject")))
		return
	}
	var req api.HoldAnswer
	if err := readOptionalJSON(w, r, api.MaxSmallBody, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	rc, err := s.k.AnswerHold(r.Context(), by, r.PathValue("id"), decision, req.Reason)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, receiptOf(rc))
}

// readOptionalJSON is readJSON for bodies that may be left empty.
func readOptionalJSON(w http.ResponseWriter, r *http.Request, limit int64, v any) error {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return fmt.Errorf("%w: request body is larger than %d bytes", kernel.ErrTooLarge, limit)
	} else if err != nil {
		return fmt.Errorf("%w: reading body: %v", kernel.ErrInvalid, err)
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	return readJSON(w, r, limit, v)
}
