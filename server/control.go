package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/annal-dev/annal/api"
	"github.com/annal-dev/annal/kernel"
	"github.com/annal-dev/annal/kernel/delta"
	"github.com/annal-dev/annal/kernel/event"
	"github.com/annal-dev/annal/kernel/policy"
	"github.com/annal-dev/annal/kernel/ring"
	"github.com/annal-dev/annal/kernel/saga"
	"github.com/annal-dev/annal/kernel/session"
)

// handle adapts a kernel call to an authenticated JSON endpoint: it
// authenticates the caller, reads a JSON body of at most limit bytes into
// Req (no body when limit is 0; an empty body leaves Req zero, and the
// kernel then names what is missing), calls, and writes the answer as JSON
// with status, or the error with its status.
func handle[Req any](s *Server, limit int64, status int, call func(r *http.Request, by *kernel.Actor, req *Req) (any, error)) endpoint {
	return serve(func(w http.ResponseWriter, r *http.Request) {
		by, err := s.authenticate(r)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		var req Req
		if limit > 0 {
			if err := readOptionalJSON(w, r, limit, &req); err != nil {
				s.fail(w, r, err)
				return
			}
		}
		out, err := call(r, by, &req)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		if page, ok := out.(*listPage); ok {
			writeList(w, r, status, page)
			return
		}
		writeJSON(w, status, out)
	}, limit)
}

type none struct{}

// controlled is the answer to a change: its receipt and the record.
func controlled(rc *kernel.Receipt, record any) (any, error) {
	out := api.Controlled{Receipt: receiptOf(rc)}
	if record != nil {
		raw, err := json.Marshal(record)
		if err != nil {
			return nil, err
		}
		out.Record = raw
	}
	return out, nil
}

func receiptOnly(rc *kernel.Receipt, err error) (any, error) {
	if err != nil {
		return nil, err
	}
	return controlled(rc, nil)
}

func resourcesIn(r *api.Resources) *event.Resources {
	if r == nil {
		return nil
	}
	return &event.Resources{Network: r.Network, FilesystemRead: r.FilesystemRead, FilesystemWrite: r.FilesystemWrite, Subprocess: r.Subprocess, Tools: r.Tools}
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", kernel.ErrInvalid, fmt.Sprintf(format, args...))
}

// controlRoutes are the execution control API's routes.
func (s *Server) controlRoutes() []route {
	const body, small = api.MaxControlBody, api.MaxSmallBody
	return []route{
		{"POST /v1/agents/{id}/ring", handle(s, small, http.StatusOK, s.assignRing).whole()},
		{"GET /v1/rings", handle(s, 0, http.StatusOK, s.listRings)},
		{"PUT /v1/rings/config", handle(s, body, http.StatusOK, s.configureRings)},
		{"GET /v1/descriptors", handle(s, 0, http.StatusOK, s.listDescriptors)},
		{"PUT /v1/descriptors/{id}", handle(s, body, http.StatusOK, s.registerDescriptor)},
		{"POST /v1/elevations", handle(s, small, http.StatusCreated, s.requestElevation).whole()},
		{"POST /v1/elevations/{id}/revoke", handle(s, small, http.StatusOK, s.revokeElevation).whole()},
		{"POST /v1/sessions", handle(s, body, http.StatusCreated, s.createSession).whole()},
		{"GET /v1/sessions", handle(s, 0, http.StatusOK, s.listSessions)},
		{"GET /v1/sessions/{id}", handle(s, 0, http.StatusOK, s.viewSession)},
		{"POST /v1/sessions/{id}/changes", handle(s, small, http.StatusOK, s.changeSession).whole()},
		{"POST /v1/sessions/{id}/deltas", handle(s, body, http.StatusCreated, s.appendDelta).whole()},
		{"GET /v1/sessions/{id}/deltas", handle(s, 0, http.StatusOK, s.listDeltas)},
		{"GET /v1/sessions/{id}/rollback", handle(s, 0, http.StatusOK, s.rollback)},
		{"POST /v1/agents/{id}/kill", handle(s, small, http.StatusOK, s.kill).whole()},
		{"POST /v1/agents/{id}/quarantine", handle(s, small, http.StatusOK, s.quarantine).whole()},
		{"POST /v1/agents/{id}/release", handle(s, small, http.StatusOK, s.release).whole()},
		{"GET /v1/quarantines", handle(s, 0, http.StatusOK, s.listQuarantines)},
		{"POST /v1/agents/{id}/signal", handle(s, small, http.StatusOK, s.signal).whole()},
		{"PUT /v1/signals/mask", handle(s, small, http.StatusOK, s.setSignalMask)},
		{"GET /v1/signals", handle(s, 0, http.StatusOK, s.listSignals)},
		{"POST /v1/sagas", handle(s, body, http.StatusCreated, s.startSaga).whole()},
		{"GET /v1/sagas", handle(s, 0, http.StatusOK, s.listSagas)},
		{"GET /v1/sagas/{id}", handle(s, 0, http.StatusOK, s.viewSaga)},
		{"POST /v1/sagas/{id}/steps/{step}", handle(s, small, http.StatusOK, s.reportSagaStep).whole()},
		{"PUT /v1/policies/{name}", serve(s.putPolicy, 0)},
		{"GET /v1/policies", handle(s, 0, http.StatusOK, s.listPolicies)},
		{"POST /v1/policies/{name}/attach", handle(s, small, http.StatusOK, s.attachPolicy).whole()},
	}
}

func (s *Server) assignRing(r *http.Request, by *kernel.Actor, req *api.RingRequest) (any, error) {
	return receiptOnly(s.k.AssignRing(r.Context(), by, r.PathValue("id"), kernel.RingAssignment{Trust: req.Trust, Consensus: req.Consensus, Ring: req.Ring, Reason: req.Reason}))
}

func (s *Server) listRings(r *http.Request, by *kernel.Actor, _ *none) (any, error) {
	return pageOf(r, s.k.Rings(by), func(v kernel.RingView) string { return v.Agent })
}

func (s *Server) configureRings(r *http.Request, by *kernel.Actor, req *api.RingConfigRequest) (any, error) {
	return receiptOnly(s.k.ConfigureRings(r.Context(), by, req.NetworkAllowlist))
}

func (s *Server) listDescriptors(r *http.Request, by *kernel.Actor, _ *none) (any, error) {
	return s.k.Descriptors(), nil
}

func (s *Server) registerDescriptor(r *http.Request, by *kernel.Actor, req *api.DescriptorRequest) (any, error) {
	d, err := ring.ParseDescriptor(req.Descriptor)
	if err != nil {
		return nil, invalid("descriptor: %v", err)
	}
	if d.ActionID != r.PathValue("id") {
		return nil, invalid("descriptor action_id %q is not the %q of the path", d.ActionID, r.PathValue("id"))
	}
	return receiptOnly(s.k.RegisterAction(r.Context(), by, d, grantsIn(req.AppliesTo)))
}

func (s *Server) requestElevation(r *http.Request, by *kernel.Actor, req *api.ElevationRequest) (any, error) {
	if req.TTLSeconds < 0 || req.TTLSeconds > 1<<31 {
		return nil, invalid("ttl_seconds %d is out of range", req.TTLSeconds)
	}
	rc, v, err := s.k.RequestElevation(r.Context(), by, kernel.ElevationRequest{Agent: req.Agent, Session: req.Session, Ring: req.Ring,
		TTL: time.Duration(req.TTLSeconds) * time.Second, Reason: req.Reason})
	if err != nil {
		return nil, err
	}
	return controlled(rc, v)
}

func (s *Server) revokeElevation(r *http.Request, by *kernel.Actor, req *api.ReasonRequest) (any, error) {
	return receiptOnly(s.k.RevokeElevation(r.Context(), by, r.PathValue("id"), req.Reason))
}

func (s *Server) createSession(r *http.Request, by *kernel.Actor, req *api.SessionRequest) (any, error) {
	cfg := session.DefaultConfig()
	if len(req.Config) > 0 {
		var err error
		if cfg, err = session.ParseConfig(req.Config); err != nil {
			return nil, invalid("config: %v", err)
		}
	}
	rc, se, err := s.k.CreateSession(r.Context(), by, req.ID, cfg)
	if err != nil {
		return nil, err
	}
	return controlled(rc, se)
}

func (s *Server) listSessions(r *http.Request, by *kernel.Actor, _ *none) (any, error) {
	return pageOf(r, s.k.Sessions(by), func(se kernel.Session) string { return se.ID })
}

func (s *Server) viewSession(r *http.Request, by *kernel.Actor, _ *none) (any, error) {
	return s.k.ViewSessionFiles(r.Context(), by, r.PathValue("id"))
}

func (s *Server) changeSession(r *http.Request, by *kernel.Actor, req *api.SessionChangeRequest) (any, error) {
	rc, err := s.k.ChangeSession(r.Context(), by, r.PathValue("id"), kernel.SessionChange{Op: req.Op, State: req.State, Agent: req.Agent, Granted: req.Granted, Path: req.Path, Head: req.Head, Reason: req.Reason})
	if err != nil {
		return nil, err
	}
	se, err := s.k.SessionByID(r.PathValue("id"))
	if err != nil {
		return nil, err
	}
	return controlled(rc, se)
}

func (s *Server) appendDelta(r *http.Request, by *kernel.Actor, req *api.DeltaRequest) (any, error) {
	changes := make([]delta.Change, len(req.Changes))
	for i, c := range req.Changes {
		changes[i] = delta.Change{Path: c.Path, Operation: c.Operation, ContentHash: c.ContentHash}
	}
	rc, d, err := s.k.AppendDelta(r.Context(), by, r.PathValue("id"), kernel.DeltaRequest{TurnID: req.TurnID, Changes: changes})
	if err != nil {
		return nil, err
	}
	return controlled(rc, d)
}

func (s *Server) listDeltas(r *http.Request, by *kernel.Actor, _ *none) (any, error) {
	if _, err := s.k.ViewSession(by, r.PathValue("id")); err != nil {
		return nil, err
	}
	deltas, indices, err := s.k.SessionChain(r.Context(), r.PathValue("id"))
	if err != nil {
		return nil, err
	}
	type indexed struct {
		Index uint64      `json:"index"`
		Delta delta.Delta `json:"delta"`
	}
	out := make([]indexed, len(deltas))
	for i := range deltas {
		out[i] = indexed{indices[i], deltas[i]}
	}
	return out, nil
}

func (s *Server) rollback(r *http.Request, by *kernel.Actor, _ *none) (any, error) {
	if _, err := s.k.ViewSession(by, r.PathValue("id")); err != nil {
		return nil, err
	}
	return s.k.Rollback(r.Context(), r.PathValue("id"), r.URL.Query().Get("turn"))
}

func (s *Server) kill(r *http.Request, by *kernel.Actor, req *api.KillRequest) (any, error) {
	rc, kill, err := s.k.Kill(r.Context(), by, r.PathValue("id"), kernel.KillRequest{Reason: req.Reason, Session: req.Session, Details: req.Details})
	if err != nil {
		return nil, err
	}
	return controlled(rc, kill)
}

func (s *Server) quarantine(r *http.Request, by *kernel.Actor, req *api.QuarantineRequest) (any, error) {
	if req.DurationSeconds < 0 || req.DurationSeconds > 1<<31 {
		return nil, invalid("duration_seconds %d is out of range", req.DurationSeconds)
	}
	rc, q, err := s.k.Quarantine(r.Context(), by, r.PathValue("id"), kernel.QuarantineRequest{Session: req.Session, Reason: req.Reason, Duration: time.Duration(req.DurationSeconds) * time.Second})
	if err != nil {
		return nil, err
	}
	return controlled(rc, q)
}

func (s *Server) release(r *http.Request, by *kernel.Actor, req *api.ReleaseRequest) (any, error) {
	return receiptOnly(s.k.Release(r.Context(), by, r.PathValue("id"), req.Session, req.Reason))
}

func (s *Server) listQuarantines(r *http.Request, by *kernel.Actor, _ *none) (any, error) {
	return s.k.Quarantines(by), nil
}

func (s *Server) signal(r *http.Request, by *kernel.Actor, req *api.SignalRequest) (any, error) {
	rc, effect, err := s.k.Signal(r.Context(), by, r.PathValue("id"), req.Signal, req.Reason)
	if err != nil {
		return nil, err
	}
	return controlled(rc, map[string]string{"effect": effect})
}

func (s *Server) setSignalMask(r *http.Request, by *kernel.Actor, req *api.MaskRequest) (any, error) {
	return receiptOnly(s.k.SetSignalMask(r.Context(), by, req.Mask))
}

func (s *Server) listSignals(r *http.Request, by *kernel.Actor, _ *none) (any, error) {
	return s.k.QueuedSignals(by), nil
}

func (s *Server) startSaga(r *http.Request, by *kernel.Actor, req *api.SagaRequest) (any, error) {
	steps := make([]saga.StepSpec, len(req.Steps))
	for i, st := range req.Steps {
		steps[i] = saga.NewStepSpec(st.ID, st.Action, st.Compensation)
		if c := st.Compensate; c != nil {
			steps[i].Compensate = &saga.Compensate{Argv: c.Argv, Server: c.Server, Tool: c.Tool, Arguments: c.Arguments}
		}
		if st.MaxRetries != nil {
			steps[i].MaxRetries = *st.MaxRetries
		}
		if st.TimeoutSeconds != nil {
			steps[i].TimeoutSeconds = *st.TimeoutSeconds
		}
	}
	rc, id, err := s.k.StartSaga(r.Context(), by, req.ID, req.Session, steps)
	if err != nil {
		return nil, err
	}
	return s.sagaView(rc, id)
}

func (s *Server) listSagas(r *http.Request, by *kernel.Actor, _ *none) (any, error) {
	return s.k.Sagas(by), nil
}

func (s *Server) viewSaga(r *http.Request, by *kernel.Actor, _ *none) (any, error) {
	return s.k.ViewSaga(by, r.PathValue("id"))
}

func (s *Server) reportSagaStep(r *http.Request, by *kernel.Actor, req *api.StepReport) (any, error) {
	rc, err := s.k.ReportSagaStep(r.Context(), by, r.PathValue("id"), kernel.SagaReport{Step: r.PathValue("step"), Transition: req.Transition, Reason: req.Reason})
	if err != nil {
		return nil, err
	}
	return s.sagaView(rc, r.PathValue("id"))
}

func (s *Server) putPolicy(w http.ResponseWriter, r *http.Request) {
	by, err := s.authenticate(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	raw, err := readBody(w, r, policy.MaxPolicySize)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	p, err := policyFrom(r, raw)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	rc, err := s.k.SetPolicy(r.Context(), by, p)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out, _ := controlled(rc, p)
	writeJSON(w, http.StatusOK, out)
}

// listPolicies answers with every policy or, with ?binding=me, only the
// policies that bind the caller's actions.
func (s *Server) listPolicies(r *http.Request, by *kernel.Actor, _ *none) (any, error) {
	switch r.URL.Query().Get("binding") {
	case "":
		return s.k.Policies(), nil
	case "me":
		return s.k.PoliciesBinding(by), nil
	default:
		return nil, invalid("binding must be \"me\"")
	}
}

func (s *Server) attachPolicy(r *http.Request, by *kernel.Actor, req *api.AttachRequest) (any, error) {
	return receiptOnly(s.k.AttachPolicy(r.Context(), by, kernel.PolicyAttachment{Policy: r.PathValue("name"), Agent: req.Agent, Envelope: req.Envelope, Detach: req.Detach}))
}

// policyFrom reads a policy from a PUT: the body is the policy's JSON, or,
// with ?default=true and no body, one of the Agent OS default policies
// (read_only, no_pii, strict, audit).
func policyFrom(r *http.Request, raw []byte) (policy.Policy, error) {
	name := r.PathValue("name")
	if def, _ := strconv.ParseBool(r.URL.Query().Get("default")); def {
		if len(raw) > 0 {
			return policy.Policy{}, invalid("?default=true takes no body")
		}
		for _, p := range policy.Defaults() {
			if p.Name == name {
				return p, nil
			}
		}
		return policy.Policy{}, invalid("%q is not a default policy (read_only, no_pii, strict, audit)", name)
	}
	p, err := policy.Parse(raw)
	if err != nil {
		return policy.Policy{}, invalid("%v", err)
	}
	if p.Name != name {
		return policy.Policy{}, invalid("policy name %q is not the %q of the path", p.Name, name)
	}
	return p, nil
}

func (s *Server) sagaView(rc *kernel.Receipt, id string) (any, error) {
	v, err := s.k.SagaStatus(id)
	if err != nil {
		return nil, err
	}
	return controlled(rc, v)
}
