package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"

	"github.com/annal-dev/annal/api"
)

// The execution control calls. Changes answer with an api.Controlled (the
// receipt of their event and the record they made); views answer with the
// kernel's JSON records, handed back raw.

func (c *Client) raw(ctx context.Context, method, path string, body any) (json.RawMessage, error) {
	b, err := c.do(ctx, method, path, body)
	return json.RawMessage(b), err
}

func (c *Client) change(ctx context.Context, method, path string, body any) (*api.Controlled, error) {
	var out api.Controlled
	return &out, c.doJSON(ctx, method, path, body, &out)
}

func seg(s string) string { return url.PathEscape(s) }

// AssignRing records an agent's trust score and the ring it gives.
func (c *Client) AssignRing(ctx context.Context, agent string, req api.RingRequest) (*api.Controlled, error) {
	return c.change(ctx, http.MethodPost, "v1/agents/"+seg(agent)+"/ring", req)
}

// Rings lists the agents you oversee with their rings and elevations.
func (c *Client) Rings(ctx context.Context) (json.RawMessage, error) {
	return listAllRaw(ctx, c, "v1/rings")
}

// ConfigureRings sets Ring 2's network allowlist (root).
func (c *Client) ConfigureRings(ctx context.Context, allowlist []string) (*api.Controlled, error) {
	return c.change(ctx, http.MethodPut, "v1/rings/config", api.RingConfigRequest{NetworkAllowlist: allowlist})
}

// RegisterDescriptor registers an action descriptor (root).
func (c *Client) RegisterDescriptor(ctx context.Context, id string, req api.DescriptorRequest) (*api.Controlled, error) {
	return c.change(ctx, http.MethodPut, "v1/descriptors/"+seg(id), req)
}

// Descriptors lists the registered action descriptors.
func (c *Client) Descriptors(ctx context.Context) (json.RawMessage, error) {
	return c.raw(ctx, http.MethodGet, "v1/descriptors", nil)
}

// Elevate asks for a time-bounded elevation.
func (c *Client) Elevate(ctx context.Context, req api.ElevationRequest) (*api.Controlled, error) {
	return c.change(ctx, http.MethodPost, "v1/elevations", req)
}

// RevokeElevation ends an elevation.
func (c *Client) RevokeElevation(ctx context.Context, id, reason string) (*api.Controlled, error) {
	return c.change(ctx, http.MethodPost, "v1/elevations/"+seg(id)+"/revoke", api.ReasonRequest{Reason: reason})
}

// CreateSession opens a session.
func (c *Client) CreateSession(ctx context.Context, req api.SessionRequest) (*api.Controlled, error) {
	return c.change(ctx, http.MethodPost, "v1/sessions", req)
}

// ChangeSession changes a session's state, participants, grants or
// substitute.
func (c *Client) ChangeSession(ctx context.Context, id string, req api.SessionChangeRequest) (*api.Controlled, error) {
	return c.change(ctx, http.MethodPost, "v1/sessions/"+seg(id)+"/changes", req)
}

// Sessions lists your sessions; Session shows one.
func (c *Client) Sessions(ctx context.Context) (json.RawMessage, error) {
	return listAllRaw(ctx, c, "v1/sessions")
}

// Session shows one session.
func (c *Client) Session(ctx context.Context, id string) (json.RawMessage, error) {
	return c.raw(ctx, http.MethodGet, "v1/sessions/"+seg(id), nil)
}

// AppendDelta records one turn's file changes in a session.
func (c *Client) AppendDelta(ctx context.Context, session string, req api.DeltaRequest) (*api.Controlled, error) {
	return c.change(ctx, http.MethodPost, "v1/sessions/"+seg(session)+"/deltas", req)
}

// Deltas returns a session's delta chain with log indices.
func (c *Client) Deltas(ctx context.Context, session string) (json.RawMessage, error) {
	return c.raw(ctx, http.MethodGet, "v1/sessions/"+seg(session)+"/deltas", nil)
}

// Rollback reconstructs a session's files after a turn.
func (c *Client) Rollback(ctx context.Context, session, turn string) (json.RawMessage, error) {
	return c.raw(ctx, http.MethodGet, "v1/sessions/"+seg(session)+"/rollback?turn="+url.QueryEscape(turn), nil)
}

// Kill kills an agent.
func (c *Client) Kill(ctx context.Context, agent string, req api.KillRequest) (*api.Controlled, error) {
	return c.change(ctx, http.MethodPost, "v1/agents/"+seg(agent)+"/kill", req)
}

// Quarantine quarantines an agent; Release ends it.
func (c *Client) Quarantine(ctx context.Context, agent string, req api.QuarantineRequest) (*api.Controlled, error) {
	return c.change(ctx, http.MethodPost, "v1/agents/"+seg(agent)+"/quarantine", req)
}

// Release ends an agent's quarantine.
func (c *Client) Release(ctx context.Context, agent string, req api.ReleaseRequest) (*api.Controlled, error) {
	return c.change(ctx, http.MethodPost, "v1/agents/"+seg(agent)+"/release", req)
}

// Quarantines lists quarantine records.
func (c *Client) Quarantines(ctx context.Context) (json.RawMessage, error) {
	return c.raw(ctx, http.MethodGet, "v1/quarantines", nil)
}

// Signal sends a signal to an agent.
func (c *Client) Signal(ctx context.Context, agent string, req api.SignalRequest) (*api.Controlled, error) {
	return c.change(ctx, http.MethodPost, "v1/agents/"+seg(agent)+"/signal", req)
}

// SetSignalMask sets the maskable signals the calling agent handles.
func (c *Client) SetSignalMask(ctx context.Context, mask []string) (*api.Controlled, error) {
	return c.change(ctx, http.MethodPut, "v1/signals/mask", api.MaskRequest{Mask: mask})
}

// Signals returns the signals queued for the calling agent.
func (c *Client) Signals(ctx context.Context) (json.RawMessage, error) {
	return c.raw(ctx, http.MethodGet, "v1/signals", nil)
}

// StartSaga records a saga the calling agent runs.
func (c *Client) StartSaga(ctx context.Context, req api.SagaRequest) (*api.Controlled, error) {
	return c.change(ctx, http.MethodPost, "v1/sagas", req)
}

// ReportStep records one transition of a saga step.
func (c *Client) ReportStep(ctx context.Context, sagaID, step string, req api.StepReport) (*api.Controlled, error) {
	return c.change(ctx, http.MethodPost, "v1/sagas/"+seg(sagaID)+"/steps/"+seg(step), req)
}

// Sagas lists sagas; Saga shows one with its next move.
func (c *Client) Sagas(ctx context.Context) (json.RawMessage, error) {
	return c.raw(ctx, http.MethodGet, "v1/sagas", nil)
}

// Saga shows one saga with its next move.
func (c *Client) Saga(ctx context.Context, id string) (json.RawMessage, error) {
	return c.raw(ctx, http.MethodGet, "v1/sagas/"+seg(id), nil)
}

// SetPolicy defines or changes a policy (its JSON).
func (c *Client) SetPolicy(ctx context.Context, name string, policy json.RawMessage) (*api.Controlled, error) {
	var out api.Controlled
	raw, err := c.doRaw(ctx, http.MethodPut, "v1/policies/"+seg(name), policy)
	if err != nil {
		return nil, err
	}
	return &out, json.Unmarshal(raw, &out)
}

// SetDefaultPolicy defines one of the Agent OS default policies.
func (c *Client) SetDefaultPolicy(ctx context.Context, name string) (*api.Controlled, error) {
	return c.change(ctx, http.MethodPut, "v1/policies/"+seg(name)+"?default=true", nil)
}

// Policies lists the defined policies.
func (c *Client) Policies(ctx context.Context) (json.RawMessage, error) {
	return c.raw(ctx, http.MethodGet, "v1/policies", nil)
}

// BindingPolicies returns the policies that bind the caller's actions:
// attached to it or to an envelope of its chains.
func (c *Client) BindingPolicies(ctx context.Context) (json.RawMessage, error) {
	return c.raw(ctx, http.MethodGet, "v1/policies?binding=me", nil)
}

// AttachPolicy attaches (or detaches) a policy to an agent or envelope.
func (c *Client) AttachPolicy(ctx context.Context, name string, req api.AttachRequest) (*api.Controlled, error) {
	return c.change(ctx, http.MethodPost, "v1/policies/"+seg(name)+"/attach", req)
}
