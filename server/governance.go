package server

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"

	"github.com/annal-dev/annal/api"
	"github.com/annal-dev/annal/kernel"
	"github.com/annal-dev/annal/kernel/event"
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
		Expires: v.Expires.String(), Revoked: v.Revoked, Index: v.IssuedAt,
	}
}

func actorOut(a *kernel.Actor) api.Actor {
	return api.Actor{
		ID: a.ID, Kind: string(a.Kind), Name: a.Name, Purpose: a.Purpose, Creator: a.Creator, Expires: a.Expires.String(),
		Status: a.Status, Grants: grantsOut(a.Grants), Share: a.Share, Balance: a.Balance, Reserved: a.Reserved, Consumed: a.Consumed,
		SigningKey: a.SigningKey, RequireSigned: a.RequireSigned, SealPayloads: a.SealPayloads,
	}
}

// governanceRoutes are the governance API's routes: actors, envelopes,
// holds.
func (s *Server) governanceRoutes() []route {
	const small = api.MaxSmallBody
	return []route{
		{"GET /v1/actors/{id}", handle(s, 0, http.StatusOK, s.viewActor)},
		{"GET /v1/actors", handle(s, 0, http.StatusOK, s.listActors)},
		{"GET /v1/whoami", handle(s, 0, http.StatusOK, s.whoami).whole()},
		{"POST /v1/actors/{id}/status", handle(s, small, http.StatusOK, s.setStatus).whole()},
		{"POST /v1/actors/{id}/key", handle(s, small, http.StatusOK, s.setSigningKey).whole()},
		{"POST /v1/subjects/{subject}/erase", handle(s, small, http.StatusOK, s.eraseSubject).whole()},
		{"POST /v1/envelopes", handle(s, api.MaxEnvelopeBody, http.StatusCreated, s.issueEnvelope).whole()},
		{"GET /v1/envelopes", handle(s, 0, http.StatusOK, s.listEnvelopes)},
		{"GET /v1/envelopes/{id}", handle(s, 0, http.StatusOK, s.viewEnvelope)},
		{"POST /v1/envelopes/{id}/revoke", handle(s, small, http.StatusOK, s.revokeEnvelope).whole()},
		{"POST /v1/actions/may-ever", handle(s, api.MaxMayEver*1200, http.StatusOK, s.mayEver)},
		{"GET /v1/holds", handle(s, 0, http.StatusOK, s.listHolds)},
		{"GET /v1/holds/{id}", handle(s, 0, http.StatusOK, s.viewHold).whole()},
		{"POST /v1/holds/{id}/{decision}", handle(s, small, http.StatusOK, s.answerHold).whole()},
	}
}

// viewActor answers with an actor's record and energy, to itself, its
// creator and root.
func (s *Server) viewActor(r *http.Request, viewer *kernel.Actor, _ *none) (any, error) {
	a, err := s.k.Actor(r.PathValue("id"))
	if err != nil {
		return nil, err
	}
	if viewer.ID != a.ID && viewer.ID != kernel.RootID && a.Creator != viewer.ID {
		return nil, fmt.Errorf("%w: %s may not see %s", kernel.ErrForbidden, viewer.ID, a.ID)
	}
	return actorOut(a), nil
}

// listActors answers with the actors the viewer may see: itself, those it
// created, all for root.
func (s *Server) listActors(r *http.Request, viewer *kernel.Actor, _ *none) (any, error) {
	out := []api.Actor{}
	for _, a := range s.k.Actors(viewer) {
		out = append(out, actorOut(a))
	}
	return pageOf(r, out, func(a api.Actor) string { return a.ID })
}

// whoami answers with who the credential presented belongs to.
func (s *Server) whoami(r *http.Request, viewer *kernel.Actor, _ *none) (any, error) {
	return actorOut(viewer), nil
}

func (s *Server) setStatus(r *http.Request, by *kernel.Actor, req *api.StatusRequest) (any, error) {
	return receiptOrErr(s.k.SetStatus(r.Context(), by, r.PathValue("id"), req.Status, req.Reason))
}

func (s *Server) setSigningKey(r *http.Request, by *kernel.Actor, req *api.SigningKeyRequest) (any, error) {
	return receiptOrErr(s.k.SetSigningKey(r.Context(), by, r.PathValue("id"), kernel.SigningKeyRequest{Key: req.Key, RequireSigned: req.RequireSigned, Reason: req.Reason}))
}

func (s *Server) eraseSubject(r *http.Request, by *kernel.Actor, req *api.EraseRequest) (any, error) {
	return receiptOrErr(s.k.EraseSubject(r.Context(), by, r.PathValue("subject"), kernel.EraseRequest{Reason: req.Reason}))
}

func (s *Server) issueEnvelope(r *http.Request, issuer *kernel.Actor, req *api.EnvelopeRequest) (any, error) {
	v, _, err := s.k.IssueEnvelope(r.Context(), issuer, kernel.EnvelopeRequest{
		Holder: req.Holder, Parent: req.Parent, Budget: req.Budget, Grants: grantsIn(req.Grants),
		HoldOn: grantsIn(req.HoldOn), HoldTimeoutSecs: req.HoldTimeoutSecs, Expires: req.Expires, RequireSigned: req.RequireSigned,
		SealPayloads: req.SealPayloads,
	})
	if err != nil {
		return nil, err
	}
	return envelopeOut(v), nil
}

func (s *Server) listEnvelopes(r *http.Request, viewer *kernel.Actor, _ *none) (any, error) {
	out := []api.Envelope{}
	for _, v := range s.k.Envelopes(viewer) {
		out = append(out, envelopeOut(&v))
	}
	return pageOf(r, out, func(v api.Envelope) string { return v.ID })
}

func (s *Server) viewEnvelope(r *http.Request, viewer *kernel.Actor, _ *none) (any, error) {
	v, err := s.k.Envelope(r.PathValue("id"))
	if err != nil {
		return nil, err
	}
	if viewer.ID != kernel.RootID && viewer.ID != v.Holder && viewer.ID != v.Issuer {
		return nil, fmt.Errorf("%w: %s may not see envelope %s", kernel.ErrForbidden, viewer.ID, v.ID)
	}
	return envelopeOut(v), nil
}

func (s *Server) revokeEnvelope(r *http.Request, by *kernel.Actor, req *api.HoldAnswer) (any, error) {
	return receiptOrErr(s.k.RevokeEnvelope(r.Context(), by, r.PathValue("id"), req.Reason))
}

func (s *Server) mayEver(r *http.Request, by *kernel.Actor, req *api.MayEverRequest) (any, error) {
	if len(req.Actions) > api.MaxMayEver {
		return nil, errors.Join(kernel.ErrInvalid, fmt.Errorf("at most %d actions", api.MaxMayEver))
	}
	out := make([]api.MayEver, len(req.Actions))
	for i, a := range req.Actions {
		t := event.ActionType(a.Type)
		if err := (&event.Action{Type: t, Target: a.Target}).Validate(); err != nil {
			out[i] = api.MayEver{Gate: "form", Reason: err.Error()} // never: no such action can be submitted
			continue
		}
		out[i].Allowed = true
		var d *kernel.Denial
		if err := s.k.MayEver(by, t, a.Target, req.ObserveNeedsGrant); errors.As(err, &d) {
			out[i] = api.MayEver{Gate: d.Gate, Reason: d.Reason}
		} else if err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (s *Server) listHolds(r *http.Request, viewer *kernel.Actor, _ *none) (any, error) {
	out := []api.Hold{}
	for _, h := range s.k.Holds(viewer, r.URL.Query().Get("status")) {
		out = append(out, s.holdOut(h))
	}
	return out, nil
}

func (s *Server) viewHold(r *http.Request, viewer *kernel.Actor, _ *none) (any, error) {
	for _, h := range s.k.Holds(viewer, "") {
		if h.ID == r.PathValue("id") {
			return s.holdOut(h), nil
		}
	}
	return nil, errors.Join(kernel.ErrNotFound, fmt.Errorf("no hold %q is visible to you", r.PathValue("id")))
}

func (s *Server) answerHold(r *http.Request, by *kernel.Actor, req *api.HoldAnswer) (any, error) {
	decision := r.PathValue("decision")
	if decision != event.HoldApprove && decision != event.HoldReject {
		return nil, errors.Join(kernel.ErrNotFound, fmt.Errorf("POST /v1/holds/<id>/approve or /reject"))
	}
	return receiptOrErr(s.k.AnswerHold(r.Context(), by, r.PathValue("id"), decision, req.Reason))
}

func (s *Server) holdOut(h kernel.Hold) api.Hold {
	c := s.k.HoldContextOf(h)
	payload, subject := h.Action.Payload, ""
	if sp := h.Action.Sealed; sp != nil {
		subject = sp.Subject
		if _, plain, err := s.k.OpenSealed(sp); err == nil {
			payload = plain
		}
	}
	return api.Hold{
		ID: h.ID, Actor: h.Actor, Envelope: h.Envelope, Type: string(h.Action.Type), Target: h.Action.Target,
		Reserved: h.Reserved, Deadline: h.Deadline.String(), Status: h.Status, RequestedAt: h.RequestedAt,
		AnsweredBy: h.AnsweredBy, AnsweredAt: h.AnsweredAt, Settled: h.Settled, Reason: h.Reason, Session: h.Session, Payload: payload,
		SealedSubject: subject, RuleEnvelope: c.RuleEnvelope, RulePattern: c.RulePattern, Remaining: c.Remaining,
	}
}

func receiptOrErr(rc *kernel.Receipt, err error) (any, error) {
	if err != nil {
		return nil, err
	}
	return receiptOf(rc), nil
}

// readOptionalJSON is readJSON for bodies that may be left empty.
func readOptionalJSON(w http.ResponseWriter, r *http.Request, limit int64, v any) error {
	body, err := readBody(w, r, limit)
	if err != nil {
		return err
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	return decodeJSON(body, v)
}
