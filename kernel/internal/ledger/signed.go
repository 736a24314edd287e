package ledger

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/annal-dev/annal/kernel/event"
)

// Signed requests (RulesSigned, kernel/event/signed.go). An event that
// carries a signature is checked here before its kind's gates, by the
// kernel when it decides and by every fold after: the signer's key is its
// current one as the log registered it, the time is within SignedWindow
// of the event's, the nonce was never used, the signature verifies over
// the statement, and the event is what the signed request asked for. An
// actor or envelope that requires signatures has none of its events
// written without one. So a kernel that logs an action no agent signed, or
// alters one after it was signed, writes a log its own fold refuses.

// RulesSigned adds signed requests, signing keys (actor.key) and
// require-signed actors and envelopes.
const RulesSigned = 4

// SignedWindow is how far a signed request's time may be from its event's.
const SignedWindow = 5 * time.Minute

// Nonce is a request nonce already used, kept while a request carrying it
// could still be within SignedWindow.
type Nonce struct {
	Index uint64        `json:"index"`
	At    event.Instant `json:"at"`
}

// nonceKey keys Nonces: one signer's one nonce.
func nonceKey(by, nonce string) string { return by + ":" + nonce }

func signedRefuse(class Class, format string, args ...any) *Violation {
	return (&Violation{Class: class, Reason: fmt.Sprintf(format, args...), since: RulesSigned}).at(GateSignature)
}

// checkSigned is run on every event before its kind's gates.
func checkSigned(c *checker) *Violation {
	l, ev := c.l, c.ev
	usesSigning := ev.Signed != nil || ev.KeyChange != nil ||
		(ev.Subject != nil && (ev.Subject.SigningKey != "" || ev.Subject.RequireSigned)) ||
		(ev.Envelope != nil && ev.Envelope.RequireSigned)
	if usesSigning && l.Rules < RulesSigned {
		return signedRefuse(Invalid, "the log is under rules %d, which has no signed requests (rules %d)", l.Rules, RulesSigned)
	}
	if ev.Signed != nil {
		if v := l.checkSignature(ev); v != nil {
			return v
		}
	}
	return checkRequired(c)
}

func (l *Ledger) checkSignature(ev *event.Event) *Violation {
	s := ev.Signed
	signer, ok := l.Actors[s.By]
	if !ok {
		return signedRefuse(NotFound, "signed by %s, who does not exist", s.By)
	}
	switch {
	case s.By == ev.Actor:
	case ev.Hold != nil && ev.Hold.AnsweredBy == s.By:
	default:
		return signedRefuse(Forbidden, "signed by %s, who neither is the event's actor %s nor answered its hold", s.By, ev.Actor)
	}
	if signer.SigningKey == "" {
		return signedRefuse(Unauthenticated, "signed by %s, who has no signing key", s.By)
	}
	key, err := l.signingKey(signer)
	if err != nil {
		return signedRefuse(Invalid, "signing key of %s: %v", s.By, err)
	}
	if key.ID != s.Key {
		return signedRefuse(Unauthenticated, "signed with key %s, but %s's signing key is %s (a rotated or revoked key signs nothing)", s.Key, s.By, key.ID)
	}
	if d := ev.Time.Sub(s.Time.Time); d > SignedWindow || d < -SignedWindow {
		return signedRefuse(Invalid, "signed at %s, more than %v from the event's time %s", s.Time, SignedWindow, ev.Time)
	}
	if n, ok := l.Nonces[nonceKey(s.By, s.Nonce)]; ok {
		return signedRefuse(Conflict, "nonce %s of %s was already used by entry %d: a signed request is logged once", s.Nonce, s.By, n.Index)
	}
	return l.checkStatement(ev, signer.SigningKey, key)
}

// checkStatement checks that ev's signature verifies under key (the
// signing key vkey) over its statement, and that ev is what the signed
// request asked. A signature the replay verified ahead (VerifiedAhead) is
// not verified again.
func (l *Ledger) checkStatement(ev *event.Event, vkey string, key *event.SigningKey) *Violation {
	s := ev.Signed
	req, err := event.RequestOf(ev)
	if err != nil {
		return signedRefuse(Invalid, "%v", err)
	}
	stmt, err := event.SignedStatement(l.Origin, s.By, s.Nonce, s.Time, req)
	if err != nil {
		return signedRefuse(Invalid, "statement: %v", err)
	}
	sig, _ := base64.StdEncoding.DecodeString(s.Sig) // the event's form checked it
	verified := l.VerifiedAhead != nil && l.VerifiedAhead(ev, l.Origin, vkey)
	if !verified && !key.Verify(stmt, sig) {
		return signedRefuse(Unauthenticated, "the signature of %s does not verify over the request, the log's origin, the nonce and the time", s.By)
	}
	if err := RequestMatches(ev, req); err != nil {
		return signedRefuse(Invalid, "the event is not what the signed request asked: %v", err)
	}
	return nil
}

// checkRequired refuses an unsigned event of an actor, or an action under
// an envelope, that requires signatures. A denial records a refusal, and
// an approved hold's action was signed when it was requested: the
// approving human's own requirement holds for it instead.
func checkRequired(c *checker) *Violation {
	l, ev := c.l, c.ev
	switch {
	case ev.Actor == event.KernelActor || ev.Kind == event.KindActionDenied:
		return nil
	case ev.Kind == event.KindAction && ev.Hold != nil:
		return l.checkApproverSigned(ev)
	}
	if a := c.actorNamed(ev.Actor); a != nil && a.RequireSigned && !signedBy(ev, ev.Actor) {
		return signedRefuse(Unauthenticated, "%s requires signed requests; this %s is not signed by it", ev.Actor, ev.Kind)
	}
	return checkEnvelopeSigned(c)
}

// signedBy says whether ev is signed by actor id.
func signedBy(ev *event.Event, id string) bool { return ev.Signed != nil && ev.Signed.By == id }

// checkApproverSigned: the human who approves a hold, if it requires
// signed requests, signed its answer.
func (l *Ledger) checkApproverSigned(ev *event.Event) *Violation {
	if h := ev.Hold.AnsweredBy; h != "" {
		if a, ok := l.Actors[h]; ok && a.RequireSigned && !signedBy(ev, h) {
			return signedRefuse(Unauthenticated, "%s requires signed requests; its answer to hold %s is not signed by it", h, ev.Hold.ID)
		}
	}
	return nil
}

// checkEnvelopeSigned: an action under an envelope of a chain that
// requires signed actions is signed by its actor.
func checkEnvelopeSigned(c *checker) *Violation {
	ev := c.ev
	if ev.Action == nil || ev.Action.Envelope == "" || signedBy(ev, ev.Actor) {
		return nil
	}
	for _, v := range c.chainOf(ev.Action.Envelope) {
		if v.RequireSigned {
			return signedRefuse(Unauthenticated, "envelope %s requires signed actions; this one is not signed by %s", v.ID, ev.Actor)
		}
	}
	return nil
}

// signingKey parses a's signing key, once per key.
func (l *Ledger) signingKey(a *Actor) (*event.SigningKey, error) {
	if k, ok := l.keys[a.SigningKey]; ok {
		return k, nil
	}
	k, err := event.ParseSigningKey(a.SigningKey)
	if err != nil {
		return nil, err
	}
	if len(l.keys) > 4096 {
		clear(l.keys)
	}
	l.keys[a.SigningKey] = k
	return k, nil
}

// applySigned records a signed event's nonce, and forgets the nonces no
// request could use again: one used at time t can only be replayed by an
// event within 2×SignedWindow of t, whose time check would refuse it
// anyway. (Forgetting is an optimisation; it never changes a decision.)
func (l *Ledger) applySigned(index uint64, ev *event.Event) {
	if ev.Signed == nil {
		return
	}
	key := nonceKey(ev.Signed.By, ev.Signed.Nonce)
	l.Nonces[key] = &Nonce{Index: index, At: ev.Time}
	l.touch("nonce/" + key)
	if len(l.Nonces) < l.prunedNonces*2+1024 {
		return
	}
	horizon := ev.Time.Add(-2 * SignedWindow)
	for k, n := range l.Nonces {
		if n.At.Before(horizon) {
			delete(l.Nonces, k)
			l.touch("nonce/" + k)
		}
	}
	l.prunedNonces = len(l.Nonces)
}

// RequestMatches reports whether the event is what the signed request
// (canonical {method, path, body}) asked for: for an action, its type,
// target, payload, session and resources, and its envelope if the request
// named one; for a human's decision, the object and the decision. A
// request to any other path is checked only by its signature and signer.
func RequestMatches(ev *event.Event, raw []byte) error {
	var req event.SignedRequest
	if err := json.Unmarshal(raw, &req); err != nil {
		return err
	}
	var body signedBody
	if len(req.Body) > 0 {
		if err := json.Unmarshal(req.Body, &body); err != nil {
			return fmt.Errorf("request body: %v", err)
		}
	}
	if req.Method != "POST" {
		return nil
	}
	segments := strings.Split(strings.TrimPrefix(req.Path, "/v1/"), "/")
	for _, r := range signedRoutes {
		if r.matches(req.Path, segments) {
			return r.check(ev, segments, &body)
		}
	}
	return nil
}

// signedBody is what RequestMatches reads of a request's body. (An alias
// of its struct: a body that does not decode names the struct in its
// error, as it always has.)
type signedBody = struct {
	Type        event.ActionType     `json:"type"`
	Target      string               `json:"target"`
	Payload     json.RawMessage      `json:"payload"`
	PayloadHash string               `json:"payload_hash"`
	Envelope    string               `json:"envelope"`
	Session     string               `json:"session"`
	Res         *event.Resources     `json:"resources"`
	Status      string               `json:"status"`
	Holder      string               `json:"holder"`
	Budget      uint64               `json:"budget"`
	Key         string               `json:"key"`
	Require     bool                 `json:"require_signed"`
	Sealed      *event.SealedPayload `json:"sealed"`
}

// signedRoute is one POST a signed request can make, and how the event
// that records it must match it. A route names its path whole, or by the
// segments after /v1/ ("*": any one).
type signedRoute struct {
	path     string
	segments []string
	// check compares the event with the request; id is the path's
	// segments after /v1/.
	check func(ev *event.Event, id []string, body *signedBody) error
}

func (r *signedRoute) matches(path string, segments []string) bool {
	if r.path != "" {
		return path == r.path
	}
	if len(segments) != len(r.segments) {
		return false
	}
	for i, s := range r.segments {
		if s != "*" && s != segments[i] {
			return false
		}
	}
	return true
}

func routePath(path string, check func(*event.Event, []string, *signedBody) error) signedRoute {
	return signedRoute{path: path, check: check}
}

func routeSegments(pattern string, check func(*event.Event, []string, *signedBody) error) signedRoute {
	return signedRoute{segments: strings.Split(pattern, "/"), check: check}
}

// signedRoutes are the requests whose events RequestMatches compares, the
// first that matches deciding.
var signedRoutes = []signedRoute{
	routePath(event.ActionsPath, matchAction),
	routeSegments("holds/*/*", func(ev *event.Event, id []string, _ *signedBody) error {
		if ev.Hold == nil || ev.Hold.ID != id[1] || ev.Hold.Decision != id[2] {
			return fmt.Errorf("the request answers hold %s with %s", id[1], id[2])
		}
		return nil
	}),
	routeSegments("actors/*/status", func(ev *event.Event, id []string, b *signedBody) error {
		if ev.Status == nil || ev.Status.Actor != id[1] || ev.Status.Status != b.Status {
			return fmt.Errorf("the request sets %s %s", id[1], b.Status)
		}
		return nil
	}),
	routeSegments("actors/*/key", func(ev *event.Event, id []string, b *signedBody) error {
		if k := ev.KeyChange; k == nil || k.Actor != id[1] || k.Key != b.Key || k.RequireSigned != b.Require {
			return fmt.Errorf("the request sets the signing key of %s", id[1])
		}
		return nil
	}),
	routeSegments("agents/*/kill", func(ev *event.Event, id []string, _ *signedBody) error {
		if ev.Kill == nil || ev.Kill.Agent != id[1] {
			return fmt.Errorf("the request kills %s", id[1])
		}
		return nil
	}),
	routeSegments("agents/*/quarantine", func(ev *event.Event, id []string, _ *signedBody) error {
		if ev.Quarantine == nil || ev.Quarantine.Agent != id[1] {
			return fmt.Errorf("the request quarantines %s", id[1])
		}
		return nil
	}),
	routePath("/v1/envelopes", func(ev *event.Event, _ []string, b *signedBody) error {
		if ev.Envelope == nil || ev.Envelope.Holder != b.Holder || ev.Envelope.Budget != b.Budget {
			return fmt.Errorf("the request issues an envelope of %d to %s", b.Budget, b.Holder)
		}
		return nil
	}),
	routeSegments("envelopes/*/revoke", func(ev *event.Event, id []string, _ *signedBody) error {
		if ev.EnvelopeEnd == nil || ev.EnvelopeEnd.ID != id[1] {
			return fmt.Errorf("the request revokes envelope %s", id[1])
		}
		return nil
	}),
}

// matchAction compares an action request with its event, member by
// member; a mutate of ledger/hold/<id> is a human's answer to that hold.
func matchAction(ev *event.Event, _ []string, b *signedBody) error {
	if hold, ok := strings.CutPrefix(b.Target, "ledger/hold/"); ok && b.Type == event.Mutate {
		if ev.Hold == nil || ev.Hold.ID != hold {
			return fmt.Errorf("the request answers hold %s", hold)
		}
		return nil
	}
	a := ev.Action
	switch {
	case a == nil:
		return fmt.Errorf("the request is an action, the event a %s", ev.Kind)
	case a.Type != b.Type || a.Target != b.Target:
		return fmt.Errorf("the request is %s %s, the event %s %s", b.Type, b.Target, a.Type, a.Target)
	case !bytes.Equal(a.Payload, b.Payload):
		return fmt.Errorf("the payload differs")
	case a.PayloadHash != b.PayloadHash:
		return fmt.Errorf("the payload hash differs")
	case !reflect.DeepEqual(a.Sealed, b.Sealed):
		return fmt.Errorf("the sealed payload differs")
	case ev.Session != b.Session:
		return fmt.Errorf("the request is in session %q, the event in %q", b.Session, ev.Session)
	case b.Envelope != "" && a.Envelope != b.Envelope:
		return fmt.Errorf("the request names envelope %s, the event %s", b.Envelope, a.Envelope)
	case !reflect.DeepEqual(a.Resources, b.Res):
		return fmt.Errorf("the declared resources differ")
	}
	return nil
}
