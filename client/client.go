// Package client is the thin Go client of an Annal kernel, for agents and
// the tools around them: submit an action, get its receipt, fetch proofs,
// wait for publication. It speaks only HTTP and imports no kernel code.
//
// A receipt returned by Submit is a promise kept by the kernel: the event is
// durably in the log at Receipt.Index. Proofs that it is there come from
// Proof, WaitProof or SubmitAndWait, and are checked offline with
// annal-verify (or the verifier package).
//
// A client from New writes a plain-HTTP request to the kernel and reads its
// answer on the calling goroutine, over a connection kept for the next
// request (callerTransport); most such requests it frames itself, without
// http.Client (plain.go). https, a proxy from the environment and protocol
// upgrades go through net/http's Transport. Each request of such a
// client ends after DefaultTimeout; WithHTTPClient hands the transport and
// the timeouts to the caller's http.Client. A Client is safe for
// concurrent use once its With methods have been called.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/annal-dev/annal/api"
	"github.com/annal-dev/annal/checkpoints"
	"github.com/annal-dev/annal/format/oid"
	"github.com/annal-dev/annal/format/vfspath"
	"go.opentelemetry.io/otel/propagation"
)

// MaxResponseBody bounds what the client reads from any answer but a
// blob's, which MaxBlobBody bounds.
const (
	MaxResponseBody = 1 << 20
	MaxBlobBody     = 64 << 20
)

// Client talks to one kernel as one actor.
type Client struct {
	base       *url.URL
	credential string
	http       *http.Client
	retry      RetryPolicy
	signer     *requestSigner // nil: requests are not signed
	// timeout bounds each request of doOnce, body included (0: none).
	// A default client's: its http.Client has no Timeout, whose
	// enforcement starts a goroutine for each request (net/http's
	// setRequestCancel), which on busy cores costs a sequential
	// client about 60 µs a request.
	timeout time.Duration
	// plain, if set, frames the requests it can itself (plain.go).
	plain *plainRoute
}

// RetryPolicy says how a client sends again a request the kernel refused
// without doing anything: 429 (rate limit), 503 (busy, stopping) and an
// answer marked retryable (a 409 whose decision met a state that changed
// under it) unless the answer says the write's outcome is unknown (the
// entry may be logged).
// Attempts is how many sends in all (0 or 1: no retry); the wait doubles
// from First, or is the answer's Retry-After if longer, at most Max.
// Notify, if set, is told of each retry before its wait.
type RetryPolicy struct {
	Attempts   int
	First, Max time.Duration
	Notify     func(err *Error, attempt int, wait time.Duration)
}

// DefaultRetry is the policy of the annal CLI.
var DefaultRetry = RetryPolicy{Attempts: 6, First: 250 * time.Millisecond, Max: 5 * time.Second}

// WithRetry sets the client's retry policy (the zero policy, the default,
// never retries).
func (c *Client) WithRetry(p RetryPolicy) *Client {
	c.retry = p
	return c
}

// New returns a client for the kernel at baseURL (e.g.
// "http://127.0.0.1:7420") acting with credential ("" for read-only use).
func New(baseURL, credential string) (*Client, error) {
	u, err := url.Parse(strings.TrimSuffix(baseURL, "/") + "/")
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("server URL %q is not an http(s) URL", baseURL)
	}
	return &Client{base: u, credential: credential, http: &http.Client{Transport: sharedTransport}, timeout: DefaultTimeout,
		plain: newPlainRoute(sharedTransport, u, credential)}, nil
}

// DefaultTimeout bounds each request of a client from New, its answer
// included; event streams and bundles are bounded only by their context.
const DefaultTimeout = 60 * time.Second

// sharedTransport is every default client's connection pool: plain HTTP
// straight to the kernel on the caller's goroutine (callerTransport),
// the rest through net/http's Transport. Go's default keeps two idle
// connections per host, so a process running many agents against one
// kernel would open and close a connection for most actions; both keep
// enough for hundreds of agents at once.
var sharedTransport = newCallerTransport(func() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = 2 * maxIdleConnsPerHost
	t.MaxIdleConnsPerHost = maxIdleConnsPerHost
	t.IdleConnTimeout = idleConnTimeout
	return t
}())

// WithHTTPClient replaces the HTTP client (timeouts, transport); h's own
// Timeout, if any, then bounds each request instead of DefaultTimeout.
func (c *Client) WithHTTPClient(h *http.Client) *Client {
	c.http = h
	c.timeout = 0
	c.plain = nil
	return c
}

// Error is an error answer from the kernel.
type Error struct {
	Status int
	// Message is the kernel's explanation; Stage the pipeline stage and
	// Gate the check that denied the action, if any.
	Message, Stage, Gate string
	// DenialIndex is where the refusal was recorded in the log, if it was.
	DenialIndex *uint64
	// Reason is the spec's name of the refusal, where it has one (an
	// elevation's "insufficient_trust").
	Reason string
	// Signal is the signal the kernel sent the agent for this refusal
	// ("SIGKILL": the action broke a policy that ends the agent).
	Signal string
	// TraceID is the request's W3C trace id, when it had one.
	TraceID string
	// OutcomeUnknown: the write failed after the entry reached the log; it
	// may be logged, so the request is not retried.
	OutcomeUnknown bool
	// Retryable: the kernel wrote nothing and asks for the same request
	// again (a 409 whose decision met a state that changed under it).
	Retryable bool
	// Stopped: the kernel takes no writes until an operator acts; the
	// request is not sent again.
	Stopped bool
	// RetryAfter is the answer's Retry-After, if any.
	RetryAfter time.Duration
}

// retryable reports whether the kernel did nothing and asks to be asked
// again.
func (e *Error) retryable() bool {
	if e.OutcomeUnknown || e.Stopped {
		return false
	}
	return e.Retryable || e.Status == http.StatusTooManyRequests || e.Status == http.StatusServiceUnavailable
}

func (e *Error) Error() string {
	msg := fmt.Sprintf("annal: %d %s: %s", e.Status, http.StatusText(e.Status), e.Message)
	if e.Stage != "" {
		msg = fmt.Sprintf("annal: %d %s (stage %s): %s", e.Status, http.StatusText(e.Status), e.Stage, e.Message)
	}
	if e.DenialIndex != nil {
		msg += fmt.Sprintf(" (the denial is recorded in the log at index %d)", *e.DenialIndex)
	}
	if e.Signal != "" {
		msg += fmt.Sprintf("; the kernel sent the agent %s", e.Signal)
	}
	return msg
}

// IsStatus reports whether err is an *Error with this HTTP status.
func IsStatus(err error, status int) bool {
	var e *Error
	return errors.As(err, &e) && e.Status == status
}

func (c *Client) do(ctx context.Context, method, path string, body any) ([]byte, error) {
	if body == nil {
		return c.doRaw(ctx, method, path, nil)
	}
	raw, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	return c.doRaw(ctx, method, path, raw)
}

// doRaw sends body (JSON bytes, or nil for none) and returns the answer,
// sending it again under the client's RetryPolicy.
func (c *Client) doRaw(ctx context.Context, method, path string, body []byte) ([]byte, error) {
	out, _, err := c.doRawHeader(ctx, method, path, body)
	return out, err
}

// doRawHeader is doRaw that also returns the answer's header.
func (c *Client) doRawHeader(ctx context.Context, method, path string, body []byte) ([]byte, http.Header, error) {
	wait := c.retry.First
	for attempt := 1; ; attempt++ {
		out, header, err := c.doOnce(ctx, method, path, body)
		var e *Error
		if err == nil || attempt >= c.retry.Attempts || !errors.As(err, &e) || !e.retryable() {
			return out, header, err
		}
		d := max(wait, e.RetryAfter)
		if c.retry.Max > 0 {
			d = min(d, c.retry.Max)
		}
		if c.retry.Notify != nil {
			c.retry.Notify(e, attempt, d)
		}
		select {
		case <-ctx.Done():
			return nil, nil, err
		case <-time.After(d):
		}
		wait *= 2
	}
}

// doOnce sends one request.
func (c *Client) doOnce(ctx context.Context, method, path string, body []byte) ([]byte, http.Header, error) {
	var deadline time.Time
	if c.timeout > 0 {
		deadline = time.Now().Add(c.timeout)
	}
	u, err := c.base.Parse(strings.TrimPrefix(path, "/"))
	if err != nil {
		return nil, nil, err
	}
	resp, done, err := c.send(ctx, deadline, method, path, u, body)
	if err != nil {
		return nil, nil, err
	}
	defer done() // after the answer is read whole, below
	defer resp.Body.Close()
	limit := int64(MaxResponseBody)
	if (strings.HasPrefix(path, "v1/blobs/") || strings.HasPrefix(path, "v1/vfs/")) && method == http.MethodGet {
		limit = MaxBlobBody
	}
	raw, err := readBody(resp, limit)
	if errors.Is(err, errAnswerTooLarge) {
		return nil, nil, fmt.Errorf("annal: %s %s: answer is larger than %d bytes", method, path, limit)
	}
	if err != nil {
		return nil, nil, err
	}
	if resp.StatusCode >= 300 {
		return nil, nil, errorAnswer(resp, raw)
	}
	return raw, resp.Header, nil
}

// send sends the request for path, at u under the kernel's URL, with
// body (JSON, or nil for none), to be answered before deadline (zero:
// none) and ctx's end: framed by the client itself if it can (plain.go),
// else through its http.Client. done ends the request once its answer is
// read.
func (c *Client) send(ctx context.Context, deadline time.Time, method, path string, u *url.URL, body []byte) (resp *http.Response, done func(), err error) {
	if pr, ok := c.plainRequest(ctx, method, path, u, body); ok {
		pr.deadline = deadline
		resp, err := c.sendPlain(pr, u)
		if err != nil || !redirects(resp) {
			return resp, func() {}, err
		}
		// http.Client follows redirects; let it, from the start.
		io.Copy(io.Discard, io.LimitReader(resp.Body, MaxResponseBody))
		resp.Body.Close()
	}
	cancel := func() {}
	if !deadline.IsZero() {
		ctx, cancel = context.WithDeadline(ctx, deadline)
	}
	if resp, err = c.sendHTTP(ctx, method, path, u, body); err != nil {
		cancel()
		return nil, nil, err
	}
	return resp, cancel, nil
}

// errAnswerTooLarge is an answer longer than the client reads.
var errAnswerTooLarge = errors.New("annal: answer too large")

// readBody reads resp's body whole, at most limit bytes of it: in one
// buffer of its length when its length is known.
func readBody(resp *http.Response, limit int64) ([]byte, error) {
	n := resp.ContentLength
	if n < 0 || n > limit {
		raw, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
		if err == nil && int64(len(raw)) > limit {
			err = errAnswerTooLarge
		}
		return raw, err
	}
	raw := make([]byte, n, n+1)
	if _, err := io.ReadFull(resp.Body, raw); err != nil {
		return nil, err
	}
	// Read to the body's end, so that its connection is kept.
	for range 8 {
		switch m, err := resp.Body.Read(raw[n : n+1]); {
		case m > 0:
			return nil, fmt.Errorf("annal: the answer is longer than its Content-Length of %d", n)
		case err == io.EOF:
			return raw, nil
		case err != nil:
			return nil, err
		}
	}
	return nil, io.ErrNoProgress
}

// sendHTTP sends the request through the client's http.Client, with the
// client's credential, and its signature when the client signs and the
// request may lead to an event.
func (c *Client) sendHTTP(ctx context.Context, method, path string, u *url.URL, body []byte) (*http.Response, error) {
	req, err := c.newRequest(ctx, method, path, u, body)
	if err != nil {
		return nil, err
	}
	return c.http.Do(req)
}

func (c *Client) newRequest(ctx context.Context, method, path string, u *url.URL, body []byte) (*http.Request, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.credential != "" {
		req.Header.Set("Authorization", "Bearer "+c.credential)
	}
	// An OpenTelemetry span in ctx goes along as a W3C traceparent: the
	// kernel's spans join the caller's trace, and the event records its
	// trace id (Receipt.TraceID; History's trace_id filter finds it).
	propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(req.Header))
	if c.signs(method, path) {
		sm, sp, sb, err := signedForm(method, u, body)
		if err != nil {
			return nil, err
		}
		h, err := c.signatureHeader(ctx, sm, sp, sb)
		if err != nil {
			return nil, err
		}
		req.Header.Set(api.SignatureHeader, h)
	}
	return req, nil
}

// signs reports whether a request is signed: by a signing client, one
// that may change something. Blobs lead to no event: their uploads are
// not signed.
func (c *Client) signs(method, path string) bool {
	return c.signer != nil && method != http.MethodGet && method != http.MethodHead && !strings.HasPrefix(path, "v1/blobs")
}

// signedForm is the request a signature states for a request to u: the
// request itself, but for a write to the agent file system, whose body is
// the file's bytes, the action it is (vfspath.Path.WriteRequest: POST
// /v1/actions naming the content's OID), which annald states the same way.
func signedForm(method string, u *url.URL, body []byte) (string, string, []byte, error) {
	if method != http.MethodPut {
		return method, u.Path, body, nil
	}
	action, write, err := vfspath.SignedWrite(u.Path, u.Query().Get("envelope"), body)
	if !write {
		return method, u.Path, body, nil
	}
	return http.MethodPost, "/v1/actions", action, err
}

// errorAnswer is the Error of an answer of status 300 or more whose body
// is raw: the kernel's JSON error where it is one, and its Retry-After.
func errorAnswer(resp *http.Response, raw []byte) *Error {
	e := &Error{Status: resp.StatusCode, Message: strings.TrimSpace(string(raw))}
	var body api.Error
	if json.Unmarshal(raw, &body) == nil && body.Error != "" {
		e.Message, e.Stage, e.Gate, e.DenialIndex, e.Reason, e.Signal = body.Error, body.Stage, body.Gate, body.DenialIndex, body.Reason, body.Signal
		e.TraceID = body.TraceID
		e.OutcomeUnknown, e.Retryable, e.Stopped = body.OutcomeUnknown, body.Retryable, body.Stopped
	}
	if secs, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && secs >= 0 {
		e.RetryAfter = time.Duration(secs) * time.Second
	}
	return e
}

func (c *Client) doJSON(ctx context.Context, method, path string, body, out any) error {
	raw, err := c.do(ctx, method, path, body)
	if err != nil {
		return err
	}
	if r, ok := out.(*api.Receipt); ok {
		err = decodeReceipt(raw, r)
	} else {
		err = json.Unmarshal(raw, out)
	}
	if err != nil {
		return fmt.Errorf("annal: %s %s: answer is not the expected JSON: %w", method, path, err)
	}
	return nil
}

// Submit sends an action and returns its receipt once the kernel has
// durably logged it.
//
// A signing client that seals a payload (Seal or Subject set) draws the
// commitment's salt itself and names the subject (its own actor id when
// the request names none), so that it signs the commitment the event
// will carry (testvectors/FORMATS.md, "Sealed payloads").
func (c *Client) Submit(ctx context.Context, req api.ActionRequest) (*api.Receipt, error) {
	if err := c.prepareSeal(ctx, &req); err != nil {
		return nil, err
	}
	var r api.Receipt
	return &r, c.doJSON(ctx, http.MethodPost, "v1/actions", req, &r)
}

// SubmitAndWait sends an action and waits until a signed checkpoint covers
// it; the receipt then carries the checkpoint and the tlog-proof. If the
// wait fails the action is still committed and the receipt says why the
// proof is missing (ProofError).
func (c *Client) SubmitAndWait(ctx context.Context, req api.ActionRequest) (*api.Receipt, error) {
	if err := c.prepareSeal(ctx, &req); err != nil {
		return nil, err
	}
	var r api.Receipt
	return &r, c.doJSON(ctx, http.MethodPost, "v1/actions?wait=published", req, &r)
}

// CreateAgent creates an agent; the client's actor must be a human.
func (c *Client) CreateAgent(ctx context.Context, req api.AgentRequest) (*api.Agent, error) {
	var a api.Agent
	return &a, c.doJSON(ctx, http.MethodPost, "v1/agents", req, &a)
}

// History reads a page of GET /v1/events; query holds its filters
// (actor, envelope, session, kind, type, outcome, target, since, until,
// trace_id),
// order (newest or oldest), cursor and limit.
func (c *Client) History(ctx context.Context, query url.Values) (*api.HistoryPage, error) {
	var out api.HistoryPage
	return &out, c.doJSON(ctx, http.MethodGet, "v1/events?"+query.Encode(), nil, &out)
}

// Actors lists the actors the caller may see: itself, those it created,
// and for root everyone.
func (c *Client) Actors(ctx context.Context) ([]api.Actor, error) {
	return listAll[api.Actor](ctx, c, "v1/actors")
}

// WhoAmI returns the actor whose credential the client presents.
func (c *Client) WhoAmI(ctx context.Context) (*api.Actor, error) {
	var out api.Actor
	return &out, c.doJSON(ctx, http.MethodGet, "v1/whoami", nil, &out)
}

// Actor returns an actor's record and energy (its own, its creator's or
// root's view).
func (c *Client) Actor(ctx context.Context, id string) (*api.Actor, error) {
	var a api.Actor
	return &a, c.doJSON(ctx, http.MethodGet, "v1/actors/"+url.PathEscape(id), nil, &a)
}

// SetStatus freezes ("frozen"), unfreezes ("active") or terminates
// ("terminated") an agent; the client's actor must be root or its creator.
func (c *Client) SetStatus(ctx context.Context, id, status, reason string) (*api.Receipt, error) {
	var r api.Receipt
	return &r, c.doJSON(ctx, http.MethodPost, "v1/actors/"+url.PathEscape(id)+"/status", api.StatusRequest{Status: status, Reason: reason}, &r)
}

// SetSigningKey registers, rotates (Key set) or revokes (Key empty) the
// signing key of actor id: the actor itself, with a request signed by its
// current key if it has one, or root or its creator.
func (c *Client) SetSigningKey(ctx context.Context, id string, req api.SigningKeyRequest) (*api.Receipt, error) {
	var r api.Receipt
	return &r, c.doJSON(ctx, http.MethodPost, "v1/actors/"+url.PathEscape(id)+"/key", req, &r)
}

// IssueEnvelope issues (a human) or delegates (an agent, naming Parent) an
// envelope.
func (c *Client) IssueEnvelope(ctx context.Context, req api.EnvelopeRequest) (*api.Envelope, error) {
	var v api.Envelope
	return &v, c.doJSON(ctx, http.MethodPost, "v1/envelopes", req, &v)
}

// Envelopes lists the envelopes the client's actor holds or issued.
func (c *Client) Envelopes(ctx context.Context) ([]api.Envelope, error) {
	return listAll[api.Envelope](ctx, c, "v1/envelopes")
}

// RevokeEnvelope revokes an envelope and, with it, its sub-envelopes.
func (c *Client) RevokeEnvelope(ctx context.Context, id, reason string) (*api.Receipt, error) {
	var r api.Receipt
	return &r, c.doJSON(ctx, http.MethodPost, "v1/envelopes/"+url.PathEscape(id)+"/revoke", api.HoldAnswer{Reason: reason}, &r)
}

// Holds lists holds the client's actor may see; status filters ("pending").
func (c *Client) Holds(ctx context.Context, status string) ([]api.Hold, error) {
	var hs []api.Hold
	path := "v1/holds"
	if status != "" {
		path += "?status=" + url.QueryEscape(status)
	}
	return hs, c.doJSON(ctx, http.MethodGet, path, nil, &hs)
}

// MayEver asks which of actions the client's actor could ever be allowed
// (its writable targets and its own policies' blocked actions), in order;
// with observeNeedsGrant, observes need a grant too.
func (c *Client) MayEver(ctx context.Context, actions []api.ActionName, observeNeedsGrant bool) ([]api.MayEver, error) {
	var out []api.MayEver
	return out, c.doJSON(ctx, http.MethodPost, "v1/actions/may-ever", api.MayEverRequest{Actions: actions, ObserveNeedsGrant: observeNeedsGrant}, &out)
}

// Hold returns one hold the client's actor may see.
func (c *Client) Hold(ctx context.Context, id string) (*api.Hold, error) {
	var h api.Hold
	return &h, c.doJSON(ctx, http.MethodGet, "v1/holds/"+url.PathEscape(id), nil, &h)
}

// WaitHold polls a hold every poll until it is no longer pending, and
// returns it answered (approved, rejected, timed_out or failed); it gives
// up with ctx.
func (c *Client) WaitHold(ctx context.Context, id string, poll time.Duration) (*api.Hold, error) {
	for {
		h, err := c.Hold(ctx, id)
		if err != nil {
			return nil, err
		}
		if h.Status != "pending" {
			return h, nil
		}
		select {
		case <-ctx.Done():
			return h, fmt.Errorf("hold %s is still waiting for a human: %w", id, ctx.Err())
		case <-time.After(poll):
		}
	}
}

// AnswerHold approves or rejects a hold ("approve" or "reject"); the
// client's actor must be a human allowed to answer it.
func (c *Client) AnswerHold(ctx context.Context, id, decision, reason string) (*api.Receipt, error) {
	var r api.Receipt
	return &r, c.doJSON(ctx, http.MethodPost, "v1/holds/"+url.PathEscape(id)+"/"+url.PathEscape(decision), api.HoldAnswer{Reason: reason}, &r)
}

// Info returns the log's origin, verifier key and size.
func (c *Client) Info(ctx context.Context) (*api.Info, error) {
	var i api.Info
	return &i, c.doJSON(ctx, http.MethodGet, "v1/info", nil, &i)
}

// Event returns the raw log entry at index (canonical JSON).
func (c *Client) Event(ctx context.Context, index uint64) ([]byte, error) {
	return c.do(ctx, http.MethodGet, "v1/events/"+strconv.FormatUint(index, 10), nil)
}

// Checkpoint returns the latest signed checkpoint.
func (c *Client) Checkpoint(ctx context.Context) ([]byte, error) {
	return c.do(ctx, http.MethodGet, "checkpoint", nil)
}

// Proof returns the c2sp.org/tlog-proof text for index against the latest
// checkpoint. It fails with status 409 if no checkpoint covers index yet.
func (c *Client) Proof(ctx context.Context, index uint64) ([]byte, error) {
	return c.do(ctx, http.MethodGet, "v1/proof/"+strconv.FormatUint(index, 10), nil)
}

// WaitProof polls Proof until a checkpoint covers index or ctx ends. It
// ends early with the kernel's error (502) when the log's witnesses refuse
// its checkpoints, since no checkpoint can then be published.
func (c *Client) WaitProof(ctx context.Context, index uint64) ([]byte, error) {
	return c.WaitProofReporting(ctx, index, nil)
}

// waitReportEvery is how often WaitProofReporting says it still waits.
const waitReportEvery = 10 * time.Second

// WaitProofReporting is WaitProof that tells report (if not nil) what it
// waits for: once when the wait starts, then every 10 seconds.
func (c *Client) WaitProofReporting(ctx context.Context, index uint64, report func(status string)) ([]byte, error) {
	start := time.Now()
	var reported time.Time
	for {
		p, err := c.Proof(ctx, index)
		if !IsStatus(err, http.StatusConflict) {
			if err != nil && ctx.Err() != nil {
				return nil, fmt.Errorf("no signed checkpoint covered entry %d within %v: %w", index, time.Since(start).Round(time.Second), ctx.Err())
			}
			return p, err
		}
		if report != nil && time.Since(reported) >= waitReportEvery {
			var e *Error
			errors.As(err, &e)
			if reported.IsZero() {
				report(fmt.Sprintf("waiting for a signed checkpoint that covers entry %d (%s)", index, e.Message))
			} else {
				report(fmt.Sprintf("still waiting for a checkpoint that covers entry %d after %v (%s)", index, time.Since(start).Round(time.Second), e.Message))
			}
			reported = time.Now()
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("no signed checkpoint covered entry %d within %v: %w", index, time.Since(start).Round(time.Second), ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Consistency returns the consistency proof between two tree sizes.
func (c *Client) Consistency(ctx context.Context, old, size uint64) ([][32]byte, error) {
	raw, err := c.do(ctx, http.MethodGet, fmt.Sprintf("v1/proof/consistency?old=%d&new=%d", old, size), nil)
	if err != nil {
		return nil, err
	}
	return checkpoints.ParseHashes(raw)
}

// PutBlob stores data in annald's blob store (annald --keep-blobs) and
// returns its OID, which the client checks is the hash of what it sent.
func (c *Client) PutBlob(ctx context.Context, data []byte) (string, error) {
	raw, err := c.doRaw(ctx, http.MethodPost, "v1/blobs", data)
	if err != nil {
		return "", err
	}
	var b api.Blob
	if err := json.Unmarshal(raw, &b); err != nil {
		return "", err
	}
	if want := oid.Of(data); b.OID != want || b.Size != int64(len(data)) {
		return "", fmt.Errorf("annal: the blob store answered %s (%d bytes) for %s (%d bytes)", b.OID, b.Size, want, len(data))
	}
	return b.OID, nil
}

// Blob returns the bytes of a blob (a human's credential), after checking
// that they hash to oid: the client trusts the store no more than the
// store trusts its disk.
func (c *Client) Blob(ctx context.Context, id string) ([]byte, error) {
	data, err := c.doRaw(ctx, http.MethodGet, "v1/blobs/"+url.PathEscape(id), nil)
	if err != nil {
		return nil, err
	}
	if got := oid.Of(data); got != id {
		return nil, fmt.Errorf("annal: blob %s: the bytes served hash to %s", id, got)
	}
	return data, nil
}

// EraseSubject erases a data subject's sealed payloads (a human): the log
// records it, and the kernel destroys the subject's key.
func (c *Client) EraseSubject(ctx context.Context, subject string, req api.EraseRequest) (*api.Receipt, error) {
	var r api.Receipt
	return &r, c.doJSON(ctx, http.MethodPost, "v1/subjects/"+url.PathEscape(subject)+"/erase", req, &r)
}
