package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/annal-dev/annal/blobstore"

	"github.com/annal-dev/annal/api"
	"github.com/annal-dev/annal/checkpoints"
	"github.com/annal-dev/annal/internal/strictjson"
	"github.com/annal-dev/annal/kernel"
	"github.com/annal-dev/annal/kernel/event"
	"go.opentelemetry.io/otel/trace"
)

// DefaultPublishWait bounds how long ?wait=published waits for a checkpoint.
const DefaultPublishWait = 30 * time.Second

// Server serves one kernel over HTTP.
type Server struct {
	k           *kernel.Kernel
	logger      *slog.Logger
	metrics     *metrics
	mux         *http.ServeMux
	publishWait time.Duration
	console     *consoleSessions
	// secureCookies: see SecureCookies.
	secureCookies bool
	// blobs: see KeepBlobs (nil: none kept); files: the agent file
	// system's (KeepFiles; nil: none kept).
	blobs, files *blobstore.Store
	health       *healthWatch
	// tracer: see Trace (nil: requests are not traced).
	tracer trace.Tracer
	// origins: see AllowOrigins (none: no cross-origin answers).
	origins map[string]bool
}

// New returns a server for k.
func New(k *kernel.Kernel, logger *slog.Logger) *Server {
	s := &Server{k: k, logger: logger, metrics: newMetrics(k), mux: http.NewServeMux(), publishWait: DefaultPublishWait,
		console: newConsoleSessions(), health: newHealthWatch(k, logger)}
	if shared := k.Shared(); shared != nil {
		// Sign-ins hold on every instance of a log on shared storage.
		s.console.store = &sharedSessions{s: shared}
	}
	for _, rt := range s.routes() {
		s.mux.Handle(rt.pattern, rt.handler)
	}
	return s
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header()["X-Content-Type-Options"] = nosniffValue
	if s.cors(w, r) {
		return // a preflight, answered
	}
	if s.tracer != nil || r.Header[traceparentHeader] != nil {
		s.serveTraced(w, r) // tracing.go
		return
	}
	s.serve(w, r)
}

// serve routes a request, signed or not. It returns the request the mux
// routed (its Pattern says which route took it), or nil.
func (s *Server) serve(w http.ResponseWriter, r *http.Request) *http.Request {
	if r.Header.Get(api.SignatureHeader) != "" {
		var err error
		if r, err = s.signedRequest(w, r); err != nil {
			s.fail(w, r, err)
			return nil
		}
	}
	if isActionsRoute(r) {
		r.Pattern = actionsPattern // as the mux sets it
		s.handleSubmit(w, r)
		return r
	}
	s.mux.ServeHTTP(w, r)
	return r
}

// actionsPattern is the mux's route for agents' actions. serve takes a
// request the route matches straight to its handler: agents' actions are
// nearly all of a kernel's requests under load, and the mux's search,
// which finds the same handler, was 1% of annald's CPU.
const actionsPattern = "POST /v1/actions"

// isActionsRoute reports whether r is one the mux would route to
// actionsPattern for certain: POST to exactly /v1/actions, the path not
// escaped (the mux matches an escaped one by its escaped form).
func isActionsRoute(r *http.Request) bool {
	return r.Method == http.MethodPost && r.URL.Path == "/v1/actions" && r.URL.RawPath == ""
}

// authenticate returns the actor of a request's bearer credential or, for
// the console, of its session cookie (see cookieSession for the CSRF rules).
func (s *Server) authenticate(r *http.Request) (*kernel.Actor, error) {
	return s.authenticateBy(r, s.k.Authenticate)
}

// identify is authenticate for a handler that needs only the actor's id
// (kernel.Identify: no lock of the kernel's on the way to a decision).
func (s *Server) identify(r *http.Request) (*kernel.Actor, error) {
	return s.authenticateBy(r, s.k.Identify)
}

// authenticateBy finds the actor of a request's credential with lookup.
func (s *Server) authenticateBy(r *http.Request, lookup func(credential string) (*kernel.Actor, error)) (*kernel.Actor, error) {
	// A signed request's actor was authenticated once (signing.go).
	a, signed := r.Context().Value(authenticatedKey{}).(*kernel.Actor)
	var err error
	if !signed {
		a, err = s.lookupCredential(r, lookup)
	}
	if err == nil {
		s.annotate(r, kernel.AttrActor.String(a.ID))
	}
	return a, err
}

// lookupCredential finds the actor of a request's bearer credential or
// console session cookie with lookup.
func (s *Server) lookupCredential(r *http.Request, lookup func(credential string) (*kernel.Actor, error)) (*kernel.Actor, error) {
	h := r.Header.Get("Authorization")
	if h == "" {
		sess, _, err := s.cookieSession(r)
		if err != nil {
			return nil, err
		}
		if sess != nil {
			return lookup(sess.credential)
		}
	}
	cred, ok := bearerCredential(h)
	if !ok {
		return nil, fmt.Errorf("%w: send \"Authorization: Bearer <credential>\"", kernel.ErrUnauthenticated)
	}
	return lookup(cred)
}

// bearerCredential returns the credential of an Authorization header value
// of the Bearer scheme. RFC 9110 §11.1: the scheme is case-insensitive
// ("bearer", "BEARER"), and one or more spaces separate it from the
// credential. The scheme is compared in ASCII only, since it is a token.
func bearerCredential(h string) (string, bool) {
	scheme, cred, ok := strings.Cut(h, " ")
	if !ok || !asciiEqualFold(scheme, "bearer") {
		return "", false
	}
	cred = strings.TrimRight(strings.TrimLeft(cred, " "), " \t")
	return cred, cred != ""
}

// asciiEqualFold reports whether s equals the lower-case ASCII word lower,
// ignoring the case of ASCII letters only (strings.EqualFold would also
// fold non-ASCII letters onto ASCII ones).
func asciiEqualFold(s, lower string) bool {
	if len(s) != len(lower) {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}

// readBody reads a request body of at most limit bytes.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	if n := r.ContentLength; n >= 0 && n <= limit {
		// The length is known and within the limit (net/http's body then
		// ends after it): one buffer of that size, rather than a limit
		// reader and a buffer grown from 512 bytes.
		body := make([]byte, n)
		if _, err := io.ReadFull(r.Body, body); err != nil {
			return nil, fmt.Errorf("%w: reading body: %v", kernel.ErrInvalid, err)
		}
		return body, nil
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return nil, fmt.Errorf("%w: request body is larger than %d bytes", kernel.ErrTooLarge, limit)
	} else if err != nil {
		return nil, fmt.Errorf("%w: reading body: %v", kernel.ErrInvalid, err)
	}
	return body, nil
}

// readJSON reads a body of at most limit bytes and decodes it strictly into
// v (see decodeJSON).
func readJSON(w http.ResponseWriter, r *http.Request, limit int64, v any) error {
	body, err := readBody(w, r, limit)
	if err != nil {
		return err
	}
	return decodeJSON(body, v)
}

// decodeJSON decodes a request body strictly (strictjson.Decode): JSON
// that canonicalisation would not change the meaning of, member names
// exactly those of v's fields, no unknown or duplicate member. Every request
// body goes through it; on error v is unchanged.
func decodeJSON(body []byte, v any) error {
	if err := strictjson.Decode(body, v); err != nil {
		return fmt.Errorf("%w: body: %v", kernel.ErrInvalid, err)
	}
	return nil
}

func (s *Server) handleSubmit(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	var wait string
	if r.URL.RawQuery != "" { // most actions have none: no map to parse it into
		wait = r.URL.Query().Get("wait")
	}
	if wait != "" && wait != "published" {
		s.fail(w, r, fmt.Errorf("%w: wait=%q; the only value is \"published\"", kernel.ErrInvalid, wait))
		return
	}
	actor, err := s.identify(r)
	if err != nil {
		s.metrics.denied("authenticate", err)
		s.fail(w, r, err)
		return
	}
	var req api.ActionRequest
	body, err := readBody(w, r, api.MaxActionBody)
	if err == nil {
		err = decodeAction(body, &req)
	}
	if err != nil {
		s.metrics.denied("request", err)
		s.fail(w, r, err)
		return
	}
	rc, err := s.k.Submit(r.Context(), actor, kernel.ActionRequest{
		Type: event.ActionType(req.Type), Target: req.Target, Payload: req.Payload, PayloadHash: req.PayloadHash,
		Envelope: req.Envelope, Session: req.Session, ActionID: req.ActionID, Resources: resourcesIn(req.Resources),
		Seal: req.Seal, Subject: req.Subject, Salt: req.Salt,
	})
	s.annotateSubmit(r, rc, err)
	if err != nil {
		var d *kernel.Denial
		stage := "submit"
		if errors.As(err, &d) {
			stage = d.Stage
		}
		s.metrics.denied(stage, err)
		s.fail(w, r, err)
		return
	}
	s.metrics.committed(time.Since(start))
	out := receiptOf(rc)
	if wait == "published" {
		ctx, cancel := context.WithTimeout(r.Context(), s.publishWait)
		p, err := s.k.AwaitInclusionProof(ctx, rc.Index)
		cancel()
		if err != nil {
			out.ProofError = err.Error()
		} else {
			out.Checkpoint = string(p.Checkpoint)
			out.Proof = string(p.Marshal())
		}
	}
	status := http.StatusOK
	if rc.Status == kernel.StatusHeld {
		status = http.StatusAccepted
	}
	writeReceipt(w, status, &out)
}

// writeReceipt answers with a receipt as writeJSON would, byte for byte,
// writing it by hand when every string in it is printable ASCII with
// nothing to escape (every receipt of the load benchmarks, and most in
// use), else through writeJSON. Why: the answer to every action is a
// receipt, and encoding/json's reflection cost about 2 µs of each.
func writeReceipt(w http.ResponseWriter, status int, r *api.Receipt) {
	buf := receiptBuffers.Get().(*[]byte)
	body, ok := appendReceipt((*buf)[:0], r)
	defer func() {
		if cap(body) <= 16<<10 {
			*buf = body[:0]
			receiptBuffers.Put(buf)
		}
	}()
	if !ok {
		// A copy for encoding/json, which puts what it encodes on the
		// heap, made only on this path: the caller's receipt stays on its
		// stack.
		general := *r
		writeJSON(w, status, &general)
		return
	}
	h := w.Header()
	h["Content-Type"], h["Cache-Control"] = jsonValue, noStoreValue
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// receiptBuffers hold receipts while they are appended; Write copies
// them out.
var receiptBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// Header values set on every answer, or on every receipt, each one slice
// that all answers share: a header's values are replaced (Set) or
// appended to (Add, which copies a full slice), never written in place,
// by net/http and by this server alike. Why not Set: it canonicalized the
// name and allocated the slice, three times a receipt.
var (
	nosniffValue = []string{"nosniff"}
	jsonValue    = []string{"application/json"}
	noStoreValue = []string{"no-store"}
)

// receiptVerbatim are the bytes appendReceipt copies as they are:
// printable ASCII but '"', '\\', '<', '>' and '&'. A table, since a
// receipt's strings (hashes, IDs, the target) are scanned byte by byte.
var receiptVerbatim = func() (t [256]bool) {
	for c := 0x20; c <= 0x7e; c++ {
		t[c] = !strings.ContainsRune(`"\<>&`, rune(c))
	}
	return t
}()

// appendReceipt writes r as encoding/json does (fields in struct order,
// the omitempty ones left out when empty, a newline after), or answers
// false when a string in it holds anything but printable ASCII other than
// '"', '\\', '<', '>' and '&', whose escaping writeJSON knows.
func appendReceipt(dst []byte, r *api.Receipt) ([]byte, bool) {
	ok := true
	field := func(name, v string, omitEmpty bool) {
		if omitEmpty && v == "" {
			return
		}
		for i := 0; i < len(v); i++ {
			if !receiptVerbatim[v[i]] {
				ok = false
				return
			}
		}
		if len(dst) > 1 {
			dst = append(dst, ',')
		}
		dst = append(dst, '"')
		dst = append(dst, name...)
		dst = append(dst, `":"`...)
		dst = append(dst, v...)
		dst = append(dst, '"')
	}
	number := func(name string, v uint64) {
		dst = append(dst, `,"`...)
		dst = append(dst, name...)
		dst = append(dst, `":`...)
		dst = strconv.AppendUint(dst, v, 10)
	}
	dst = append(dst, '{')
	field("status", r.Status, false)
	field("hold_id", r.HoldID, true)
	field("event_id", r.EventID, false)
	number("index", r.Index)
	field("leaf_hash", r.LeafHash, false)
	field("time", r.Time, false)
	field("actor", r.Actor, false)
	field("type", r.Type, false)
	field("target", r.Target, false)
	field("envelope", r.Envelope, true)
	number("cost", r.Cost)
	field("reason", r.Reason, true)
	field("checkpoint", r.Checkpoint, true)
	field("proof", r.Proof, true)
	field("proof_error", r.ProofError, true)
	field("trace_id", r.TraceID, true)
	dst = append(dst, '}', '\n')
	return dst, ok
}

func receiptOf(rc *kernel.Receipt) api.Receipt {
	return api.Receipt{
		Status: rc.Status, HoldID: rc.HoldID, EventID: rc.EventID, Index: rc.Index, LeafHash: rc.LeafHash,
		Time: rc.Time, Actor: rc.Actor, Type: string(rc.Type), Target: rc.Target, Envelope: rc.Envelope, Cost: rc.Cost, Reason: rc.Reason,
		TraceID: rc.TraceID,
	}
}

func (s *Server) handleCreateAgent(w http.ResponseWriter, r *http.Request) {
	actor, err := s.authenticate(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var req api.AgentRequest
	if err := readJSON(w, r, api.MaxAgentBody, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	na, err := s.k.CreateAgent(r.Context(), actor, kernel.ActorRequest{
		Kind: event.ActorKind(req.Kind), Name: req.Name, Purpose: req.Purpose, Expires: req.Expires,
		Grants: grantsIn(req.Grants), Energy: req.Energy, Share: req.Share, Trust: req.Trust, Consensus: req.Consensus,
		SigningKey: req.SigningKey, RequireSigned: req.RequireSigned, SealPayloads: req.SealPayloads,
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, api.Agent{
		ID: na.Actor.ID, Name: na.Actor.Name, Purpose: na.Actor.Purpose, Creator: na.Actor.Creator,
		Expires: na.Actor.Expires.String(), Kind: string(na.Actor.Kind), Grants: grantsOut(na.Actor.Grants),
		Energy: na.Actor.Balance, Credential: na.Credential, Index: na.Index,
	})
}

func (s *Server) handleInfo(w http.ResponseWriter, r *http.Request) {
	info, err := s.k.Info(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := api.Info{Origin: info.Origin, VerifierKey: info.VerifierKey, Size: info.Size, CheckpointSize: info.Checkpoint, Ready: info.NotReady == nil,
		WitnessProblems: s.k.WitnessProblems()}
	if info.NotReady != nil {
		out.NotReady = info.NotReady.Error()
	}
	writeJSON(w, http.StatusOK, out)
}

// handleHealth answers while the process serves: liveness, not readiness.
func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, api.Readiness{Ready: s.k.Ready() == nil})
}

// handleReady answers 200 while the kernel takes writes, else 503 and why
// (a failed append it will resume from by itself, or a damaged log).
func (s *Server) handleReady(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	if err := s.k.Ready(); err != nil {
		writeJSON(w, http.StatusServiceUnavailable, api.Readiness{Reason: err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, api.Readiness{Ready: true})
}

func (s *Server) handleEvent(w http.ResponseWriter, r *http.Request) {
	index, err := parseIndex(r.PathValue("index"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	entry, err := s.k.Entry(r.Context(), index)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
	w.Write(entry)
}

func (s *Server) handleProof(w http.ResponseWriter, r *http.Request) {
	index, err := parseIndex(r.PathValue("index"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	p, err := s.k.InclusionProof(r.Context(), index)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.Write(p.Marshal())
}

// handleConsistency answers with one standard base64 hash per line.
func (s *Server) handleConsistency(w http.ResponseWriter, r *http.Request) {
	old, err := parseIndex(r.URL.Query().Get("old"))
	if err != nil {
		s.fail(w, r, fmt.Errorf("old: %w", err))
		return
	}
	size, err := parseIndex(r.URL.Query().Get("new"))
	if err != nil {
		s.fail(w, r, fmt.Errorf("new: %w", err))
		return
	}
	hashes, err := s.k.ConsistencyProof(r.Context(), old, size)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
	w.Write(checkpoints.MarshalHashes(hashes))
}

func parseIndex(s string) (uint64, error) {
	if s == "" || (len(s) > 1 && s[0] == '0') {
		return 0, fmt.Errorf("%w: %q is not a decimal index without leading zeros", kernel.ErrInvalid, s)
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: %q is not a decimal index", kernel.ErrInvalid, s)
	}
	return n, nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

// fail answers with the status that the error's class calls for.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	status := http.StatusInternalServerError
	if c := errorAnswerOf(err); c != nil {
		status = c.status
		if c.header != nil {
			c.header(w.Header(), err)
		}
	}
	body := errorBody(err, w.Header().Get("Retry-After") != "")
	if sc := trace.SpanContextFromContext(r.Context()); sc.TraceID().IsValid() {
		body.TraceID = sc.TraceID().String()
	}
	if status >= 500 {
		s.logger.Error("request failed", "method", r.Method, "path", r.URL.Path, "status", status, "err", err)
	}
	writeJSON(w, status, body)
}

// errorAnswer is the answer a class of kernel errors calls for: its
// status, and the headers that go with it (nil: none).
type errorAnswer struct {
	is     []error // the error is of the class when it is any of these
	status int
	header func(h http.Header, err error)
}

// errorAnswers are the answers fail knows, in the order they are tried:
// the first whose class the error is of decides. An error of none is a 500.
var errorAnswers = []errorAnswer{
	{is: []error{kernel.ErrUnauthenticated}, status: http.StatusUnauthorized, header: func(h http.Header, _ error) {
		h.Set("WWW-Authenticate", `Bearer realm="annal"`)
	}},
	{is: []error{kernel.ErrForbidden, kernel.ErrInsufficientEnergy}, status: http.StatusForbidden},
	{is: []error{kernel.ErrConflict}, status: http.StatusConflict, header: func(h http.Header, err error) {
		if errors.Is(err, kernel.ErrRetryable) {
			h.Set("Retry-After", "0")
		}
	}},
	{is: []error{kernel.ErrInvalid}, status: http.StatusBadRequest},
	{is: []error{kernel.ErrTooLarge}, status: http.StatusRequestEntityTooLarge},
	{is: []error{kernel.ErrNotFound}, status: http.StatusNotFound},
	{is: []error{kernel.ErrNotPublished}, status: http.StatusConflict},
	{is: []error{kernel.ErrRateLimited}, status: http.StatusTooManyRequests, header: func(h http.Header, _ error) {
		h.Set("Retry-After", "1")
	}},
	{is: []error{kernel.ErrWitnessRefused}, status: http.StatusBadGateway},
	{is: []error{kernel.ErrUnavailable, context.DeadlineExceeded}, status: http.StatusServiceUnavailable, header: func(h http.Header, err error) {
		// Retry-After invites a retry: not when the entry may be logged,
		// nor when the kernel waits for an operator.
		if !errors.Is(err, kernel.ErrOutcomeUnknown) && !errors.Is(err, kernel.ErrStopped) {
			h.Set("Retry-After", "1")
		}
	}},
}

// errorAnswerOf returns the first of errorAnswers whose class err is of,
// or nil.
func errorAnswerOf(err error) *errorAnswer {
	for i := range errorAnswers {
		for _, target := range errorAnswers[i].is {
			if errors.Is(err, target) {
				return &errorAnswers[i]
			}
		}
	}
	return nil
}

// errorBody is the answer's body for err; retryAfter tells whether the
// answer invites a retry (a Retry-After header).
func errorBody(err error, retryAfter bool) api.Error {
	outcomeUnknown := errors.Is(err, kernel.ErrOutcomeUnknown)
	body := api.Error{Error: err.Error(), OutcomeUnknown: outcomeUnknown,
		Retryable: retryAfter && !outcomeUnknown, Stopped: errors.Is(err, kernel.ErrStopped)}
	var d *kernel.Denial
	if errors.As(err, &d) {
		body.Stage, body.Gate, body.Signal = d.Stage, d.Gate, d.Signal
		if d.Recorded {
			index := d.Index
			body.DenialIndex = &index
		}
	}
	var ed *kernel.ElevationDenied
	if errors.As(err, &ed) {
		body.Reason = string(ed.Reason)
	}
	return body
}
