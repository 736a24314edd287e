package verifier

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/gowebpki/jcs"
	"golang.org/x/mod/sumdb/note"
)

// CheckSignature is the check of a signed request an event carries.
const CheckSignature Check = "request signature"

// SignedWindow is how far a signed request's time may be from its event's
// (testvectors/FORMATS.md, "Signed requests").
const SignedWindow = 5 * time.Minute

const signedStatementContext = "annal/signed-request/v1\n"

// Signatures counts, for one actor, the action events of a bundle (kinds
// action and hold.requested) by their signature: Signed by a key the
// bundle shows the actor registered (or, for an approved hold, by the
// human who answered); Unsigned; Unverifiable: signed, but the bundle does
// not hold the key's registration (a selection that leaves it out). A bad
// signature fails the bundle.
type Signatures struct {
	Signed       uint64 `json:"signed"`
	Unsigned     uint64 `json:"unsigned"`
	Unverifiable uint64 `json:"unverifiable"`
}

// signingFacts are what one event says about signatures, read on a worker.
type signingFacts struct {
	signed  *signedMember
	request []byte // the statement's request: logged, or rebuilt from the action
	// mismatch says how the event differs from its signed request.
	mismatch string
	// A key registration: actor's signing key becomes key ("" revokes).
	keyActor, key string
	keyChange     bool
	approvedBy    string // hold.answered_by of an action event
}

type signedMember struct {
	By      string          `json:"by"`
	Key     string          `json:"key"`
	Nonce   string          `json:"nonce"`
	Time    string          `json:"time"`
	Sig     string          `json:"sig"`
	Request json.RawMessage `json:"request"`
}

// readSigning reads the signature facts of an entry; nil if it has none.
func readSigning(kind string, entry []byte) (*signingFacts, error) {
	if !mayConcernSignatures(kind, entry) {
		return nil, nil
	}
	var e signedEntry
	if err := json.Unmarshal(entry, &e); err != nil {
		return nil, err
	}
	f := factsOf(kind, &e)
	if f.signed == nil {
		return f, nil
	}
	action, err := actionOf(&e)
	if err != nil {
		return nil, err
	}
	if f.request, err = requestOf(kind, &e, action); err != nil {
		return nil, err
	}
	req, err := parseSignedRequest(f.request)
	if err != nil {
		return nil, err
	}
	f.mismatch = req.mismatch(&signedEvent{kind: kind, signedEntry: &e, action: action})
	return f, nil
}

// mayConcernSignatures looks for the members readSigning reads (a signed
// request, a key registration) without decoding: most entries have none.
func mayConcernSignatures(kind string, entry []byte) bool {
	return bytes.Contains(entry, []byte(`"signed":{`)) || kind == "actor.key" ||
		kind == "actor.created" && bytes.Contains(entry, []byte(`"signing_key":`))
}

// The JSON an entry's signature concerns is decoded into unnamed struct
// types (signedEntry, requestAction, requestBody are aliases): encoding/json
// names a defined type in its errors, and these errors are the verifier's.

// signedEntry holds the members of an entry that signatures concern: the
// signature, the key registrations, and what each kind of request changes.
type signedEntry = struct {
	Session string          `json:"session"`
	Signed  *signedMember   `json:"signed"`
	Action  json.RawMessage `json:"action"`
	Subject *struct {
		ID         string `json:"id"`
		SigningKey string `json:"signing_key"`
	} `json:"subject"`
	KeyChange *struct {
		Actor string `json:"actor"`
		Key   string `json:"key"`
		Req   bool   `json:"require_signed"`
	} `json:"key_change"`
	Hold *struct {
		ID         string `json:"id"`
		Decision   string `json:"decision"`
		AnsweredBy string `json:"answered_by"`
	} `json:"hold"`
	Status *struct {
		Actor  string `json:"actor"`
		Status string `json:"status"`
	} `json:"status"`
	Kill       *struct{ Agent string } `json:"kill"`
	Quarantine *struct{ Agent string } `json:"quarantine"`
	Envelope   *struct {
		Holder string `json:"holder"`
		Budget uint64 `json:"budget"`
	} `json:"envelope"`
	EnvelopeEnd *struct{ ID string } `json:"envelope_end"`
}

// factsOf is the entry's signature, key registration and hold answerer.
func factsOf(kind string, e *signedEntry) *signingFacts {
	f := &signingFacts{signed: e.Signed}
	switch {
	case kind == "actor.created" && e.Subject != nil && e.Subject.SigningKey != "":
		f.keyActor, f.key, f.keyChange = e.Subject.ID, e.Subject.SigningKey, true
	case kind == "actor.key" && e.KeyChange != nil:
		f.keyActor, f.key, f.keyChange = e.KeyChange.Actor, e.KeyChange.Key, true
	}
	if e.Hold != nil {
		f.approvedBy = e.Hold.AnsweredBy
	}
	return f
}

// requestAction is an action as the body of POST /v1/actions carries it.
type requestAction = struct {
	Type        string          `json:"type"`
	Target      string          `json:"target"`
	Payload     json.RawMessage `json:"payload,omitempty"`
	PayloadHash string          `json:"payload_hash,omitempty"`
	Envelope    string          `json:"envelope,omitempty"`
	Session     string          `json:"session,omitempty"`
	Resources   json.RawMessage `json:"resources,omitempty"`
	Sealed      json.RawMessage `json:"sealed,omitempty"`
}

// actionOf is the event's action, with the event's session, as a request
// body; nil if the event has none.
func actionOf(e *signedEntry) (*requestAction, error) {
	if e.Action == nil {
		return nil, nil
	}
	var action *requestAction
	if err := json.Unmarshal(e.Action, &action); err != nil {
		return nil, err
	}
	if action == nil { // "action":null: no action to rebuild a request from
		return nil, nil
	}
	action.Session = e.Session
	return action, nil
}

// requestOf is the request the signature covers: logged beside it, or, for
// an action, rebuilt from the event's action.
func requestOf(kind string, e *signedEntry, action *requestAction) ([]byte, error) {
	switch {
	case e.Signed.Request != nil:
		return e.Signed.Request, nil
	case action != nil:
		body, err := json.Marshal(action)
		if err != nil {
			return nil, err
		}
		return canonicalRequest("POST", "/v1/actions", body)
	}
	return nil, fmt.Errorf("a signed %s event must carry its request", kind)
}

// signedRequest is a signed request, decoded.
type signedRequest struct {
	method, path string
	body         requestBody
	segments     []string // the path's segments after /v1/
}

// requestBody holds the members of every request body the routes read.
type requestBody = struct {
	Type        string          `json:"type"`
	Target      string          `json:"target"`
	Payload     json.RawMessage `json:"payload"`
	PayloadHash string          `json:"payload_hash"`
	Envelope    string          `json:"envelope"`
	Session     string          `json:"session"`
	Resources   json.RawMessage `json:"resources"`
	Status      string          `json:"status"`
	Holder      string          `json:"holder"`
	Budget      uint64          `json:"budget"`
	Key         string          `json:"key"`
	Require     bool            `json:"require_signed"`
	Sealed      json.RawMessage `json:"sealed"`
}

func parseSignedRequest(raw []byte) (*signedRequest, error) {
	var req struct {
		Method string          `json:"method"`
		Path   string          `json:"path"`
		Body   json.RawMessage `json:"body"`
	}
	if err := json.Unmarshal(raw, &req); err != nil {
		return nil, fmt.Errorf("signed request: %v", err)
	}
	r := &signedRequest{method: req.Method, path: req.Path,
		segments: strings.Split(strings.TrimPrefix(req.Path, "/v1/"), "/")}
	if len(req.Body) > 0 {
		if err := json.Unmarshal(req.Body, &r.body); err != nil {
			return nil, fmt.Errorf("signed request body: %v", err)
		}
	}
	return r, nil
}

// signedEvent is what a signed request is compared with: the event's kind,
// its members, and its action as a request body.
type signedEvent struct {
	kind string
	*signedEntry
	action *requestAction
}

// requestRoutes are the requests whose effect the event must be, each
// with its comparison; the first route whose path matches applies. A path
// with "*" is matched segment by segment after "/v1/", one segment per
// "*"; any other exactly. Other requests are checked for their signature
// only.
var requestRoutes = []struct {
	path     string
	mismatch func(r *signedRequest, ev *signedEvent) string
}{
	{"/v1/actions", actionMismatch},
	{"/v1/holds/*/*", func(r *signedRequest, ev *signedEvent) string {
		if ev.Hold == nil || ev.Hold.ID != r.segments[1] || ev.Hold.Decision != r.segments[2] {
			return "the request answers hold " + r.segments[1] + " with " + r.segments[2]
		}
		return ""
	}},
	{"/v1/actors/*/status", func(r *signedRequest, ev *signedEvent) string {
		if ev.Status == nil || ev.Status.Actor != r.segments[1] || ev.Status.Status != r.body.Status {
			return "the request sets " + r.segments[1] + " " + r.body.Status
		}
		return ""
	}},
	{"/v1/actors/*/key", func(r *signedRequest, ev *signedEvent) string {
		k := ev.KeyChange
		if k == nil || k.Actor != r.segments[1] || k.Key != r.body.Key || k.Req != r.body.Require {
			return "the request sets the signing key of " + r.segments[1]
		}
		return ""
	}},
	{"/v1/agents/*/kill", func(r *signedRequest, ev *signedEvent) string {
		if ev.Kill == nil || ev.Kill.Agent != r.segments[1] {
			return "the request kills " + r.segments[1]
		}
		return ""
	}},
	{"/v1/agents/*/quarantine", func(r *signedRequest, ev *signedEvent) string {
		if ev.Quarantine == nil || ev.Quarantine.Agent != r.segments[1] {
			return "the request quarantines " + r.segments[1]
		}
		return ""
	}},
	{"/v1/envelopes", func(r *signedRequest, ev *signedEvent) string {
		if ev.Envelope == nil || ev.Envelope.Holder != r.body.Holder || ev.Envelope.Budget != r.body.Budget {
			return "the request issues another envelope"
		}
		return ""
	}},
	{"/v1/envelopes/*/revoke", func(r *signedRequest, ev *signedEvent) string {
		if ev.EnvelopeEnd == nil || ev.EnvelopeEnd.ID != r.segments[1] {
			return "the request revokes envelope " + r.segments[1]
		}
		return ""
	}},
}

// mismatch says how the event differs from what the request asks, or "".
func (r *signedRequest) mismatch(ev *signedEvent) string {
	if r.method != "POST" {
		return ""
	}
	for _, route := range requestRoutes {
		if r.matches(route.path) {
			return route.mismatch(r, ev)
		}
	}
	return ""
}

// matches reports whether the request's path is pattern (see requestRoutes).
func (r *signedRequest) matches(pattern string) bool {
	if !strings.Contains(pattern, "*") {
		return r.path == pattern
	}
	want := strings.Split(strings.TrimPrefix(pattern, "/v1/"), "/")
	if len(want) != len(r.segments) {
		return false
	}
	for i, w := range want {
		if w != "*" && w != r.segments[i] {
			return false
		}
	}
	return true
}

// holdAnswerMismatch compares an action that answers a hold (a mutate of
// target ledger/hold/<id>) with the hold the event records.
func holdAnswerMismatch(target string, ev *signedEvent) string {
	if ev.Hold == nil || "ledger/hold/"+ev.Hold.ID != target {
		return "the request answers " + target
	}
	return ""
}

// actionMismatch compares a POST /v1/actions with the event: the action
// it records, or, for a mutate of ledger/hold/<id>, the hold it answers.
func actionMismatch(r *signedRequest, ev *signedEvent) string {
	b, a := &r.body, ev.action
	if b.Type == "mutate" && strings.HasPrefix(b.Target, "ledger/hold/") {
		return holdAnswerMismatch(b.Target, ev)
	}
	switch {
	case a == nil:
		return "the request is an action, the event a " + ev.kind
	case a.Type != b.Type || a.Target != b.Target:
		return fmt.Sprintf("the request is %s %s, the event %s %s", b.Type, b.Target, a.Type, a.Target)
	case !bytes.Equal(a.Payload, b.Payload) || a.PayloadHash != b.PayloadHash:
		return "the payload differs"
	case !bytes.Equal(a.Sealed, b.Sealed):
		return "the sealed payload differs"
	case a.Session != b.Session:
		return "the session differs"
	case b.Envelope != "" && b.Envelope != a.Envelope:
		return "the envelope differs"
	case !bytes.Equal(a.Resources, b.Resources):
		return "the declared resources differ"
	}
	return ""
}

// canonicalRequest is the request part of a statement.
func canonicalRequest(method, path string, body []byte) ([]byte, error) {
	raw, err := json.Marshal(struct {
		Method string          `json:"method"`
		Path   string          `json:"path"`
		Body   json.RawMessage `json:"body,omitempty"`
	}{method, path, body})
	if err != nil {
		return nil, err
	}
	return jcs.Transform(raw)
}

// signatureState follows the signing keys through a bundle, in index order.
type signatureState struct {
	origin   string
	complete bool // the bundle holds every entry from 0: every key registration
	keys     map[string]note.Verifier
	nonces   map[string]uint64
	byActor  map[string]*Signatures
}

func newSignatureState(origin string, complete bool) *signatureState {
	return &signatureState{origin: origin, complete: complete, keys: map[string]note.Verifier{},
		nonces: map[string]uint64{}, byActor: map[string]*Signatures{}}
}

// signatureVerdict is what the signature of one event showed.
type signatureVerdict int

const (
	unsigned     signatureVerdict = iota
	unverifiable                  // signed, but the bundle does not hold the signer's key
	verified
)

// event checks one event's signature, counts it, then applies its key
// registration (a rotation is signed by the key it replaces).
func (s *signatureState) event(index uint64, ev *Event, f *signingFacts) error {
	verdict := unsigned
	if f != nil && f.signed != nil {
		var err error
		if verdict, err = s.check(index, ev, f); err != nil {
			return err
		}
	}
	if ev.Kind == "action" || ev.Kind == "hold.requested" {
		s.counts(ev.Actor).add(verdict)
	}
	if f != nil && f.keyChange {
		return s.register(f.keyActor, f.key)
	}
	return nil
}

// check applies the rules of a signed request in order: who signed, with
// which key, when, with a fresh nonce, over which statement, and that the
// event is what was signed.
func (s *signatureState) check(index uint64, ev *Event, f *signingFacts) (signatureVerdict, error) {
	sg := f.signed
	k, err := s.signerKey(ev, f)
	if err != nil {
		return unsigned, err
	}
	if err := signedInWindow(ev, sg); err != nil {
		return unsigned, err
	}
	if err := s.useNonce(index, sg); err != nil {
		return unsigned, err
	}
	verdict := unverifiable
	if k != nil {
		if err := s.verify(k, sg, f.request); err != nil {
			return unsigned, err
		}
		verdict = verified
	}
	if f.mismatch != "" {
		return unsigned, fmt.Errorf("the event is not what %s signed: %s", sg.By, f.mismatch)
	}
	return verdict, nil
}

// signerKey is the key the signer has registered. The signer must be the
// event's actor or the human who answered its hold; nil, with no error,
// if the bundle may not hold the registration.
func (s *signatureState) signerKey(ev *Event, f *signingFacts) (note.Verifier, error) {
	sg := f.signed
	k, ok := s.keys[sg.By]
	switch {
	case sg.By != ev.Actor && sg.By != f.approvedBy:
		return nil, fmt.Errorf("signed by %s, neither its actor nor the human who answered its hold", sg.By)
	case !ok && s.complete:
		return nil, fmt.Errorf("signed by %s, who has no signing key in the log", sg.By)
	case !ok:
		return nil, nil
	case fmt.Sprintf("%08x", k.KeyHash()) != sg.Key:
		return nil, fmt.Errorf("signed with key %s, but %s's signing key there is %08x", sg.Key, sg.By, k.KeyHash())
	}
	return k, nil
}

// signedInWindow checks that the request was signed within SignedWindow
// of the event's time.
func signedInWindow(ev *Event, sg *signedMember) error {
	t, err := time.Parse(time.RFC3339Nano, sg.Time)
	if err != nil {
		return fmt.Errorf("signed request time %q: %v", sg.Time, err)
	}
	if d := ev.Time.Sub(t); d > SignedWindow || d < -SignedWindow {
		return fmt.Errorf("signed at %s, more than %v from the event's time", sg.Time, SignedWindow)
	}
	return nil
}

// useNonce records the signer's nonce, which no earlier entry may have used.
func (s *signatureState) useNonce(index uint64, sg *signedMember) error {
	if prev, dup := s.nonces[sg.By+":"+sg.Nonce]; dup {
		return fmt.Errorf("nonce %s of %s was already used by entry %d", sg.Nonce, sg.By, prev)
	}
	s.nonces[sg.By+":"+sg.Nonce] = index
	return nil
}

// verify checks the signature over the statement of request.
func (s *signatureState) verify(k note.Verifier, sg *signedMember, request []byte) error {
	stmt, err := statement(s.origin, sg, request)
	if err != nil {
		return err
	}
	sig, err := base64.StdEncoding.DecodeString(sg.Sig)
	if err != nil || !k.Verify(stmt, sig) {
		return fmt.Errorf("the signature of %s does not verify: the event is not what %s signed", sg.By, sg.By)
	}
	return nil
}

// register applies a key registration: key becomes actor's signing key,
// or, empty, revokes it.
func (s *signatureState) register(actor, key string) error {
	if key == "" {
		delete(s.keys, actor)
		return nil
	}
	v, err := note.NewVerifier(key)
	if err != nil {
		return fmt.Errorf("signing key of %s: %v", actor, err)
	}
	s.keys[actor] = v
	return nil
}

func (s *signatureState) counts(actor string) *Signatures {
	c := s.byActor[actor]
	if c == nil {
		c = &Signatures{}
		s.byActor[actor] = c
	}
	return c
}

func (c *Signatures) add(v signatureVerdict) {
	switch v {
	case verified:
		c.Signed++
	case unverifiable:
		c.Unverifiable++
	default:
		c.Unsigned++
	}
}

// statement is what a request signature covers.
func statement(origin string, sg *signedMember, request []byte) ([]byte, error) {
	raw, err := json.Marshal(map[string]any{"by": sg.By, "nonce": sg.Nonce, "origin": origin,
		"request": json.RawMessage(request), "time": sg.Time})
	if err != nil {
		return nil, err
	}
	canon, err := jcs.Transform(raw)
	if err != nil {
		return nil, err
	}
	return append([]byte(signedStatementContext), canon...), nil
}
