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
	if !bytes.Contains(entry, []byte(`"signed":{`)) && kind != "actor.key" &&
		!(kind == "actor.created" && bytes.Contains(entry, []byte(`"signing_key":`))) {
		return nil, nil
	}
	var e struct {
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
	if err := json.Unmarshal(entry, &e); err != nil {
		return nil, err
	}
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
	if f.signed == nil {
		return f, nil
	}
	var action *struct {
		Type        string          `json:"type"`
		Target      string          `json:"target"`
		Payload     json.RawMessage `json:"payload,omitempty"`
		PayloadHash string          `json:"payload_hash,omitempty"`
		Envelope    string          `json:"envelope,omitempty"`
		Session     string          `json:"session,omitempty"`
		Resources   json.RawMessage `json:"resources,omitempty"`
		Sealed      json.RawMessage `json:"sealed,omitempty"`
	}
	if e.Action != nil {
		if err := json.Unmarshal(e.Action, &action); err != nil {
			return nil, err
		}
		action.Session = e.Session
	}
	switch {
	case f.signed.Request != nil:
		f.request = f.signed.Request
	case action != nil:
		body, err := json.Marshal(action)
		if err != nil {
			return nil, err
		}
		if f.request, err = canonicalRequest("POST", "/v1/actions", body); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("a signed %s event must carry its request", kind)
	}
	var req struct {
		Method string          `json:"method"`
		Path   string          `json:"path"`
		Body   json.RawMessage `json:"body"`
	}
	if err := json.Unmarshal(f.request, &req); err != nil {
		return nil, fmt.Errorf("signed request: %v", err)
	}
	var body struct {
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
	if len(req.Body) > 0 {
		if err := json.Unmarshal(req.Body, &body); err != nil {
			return nil, fmt.Errorf("signed request body: %v", err)
		}
	}
	parts := strings.Split(strings.TrimPrefix(req.Path, "/v1/"), "/")
	at := func(i int) string {
		if i < len(parts) {
			return parts[i]
		}
		return ""
	}
	three := len(parts) == 3
	switch {
	case req.Method != "POST":
	case req.Path == "/v1/actions" && body.Type == "mutate" && strings.HasPrefix(body.Target, "ledger/hold/"):
		if e.Hold == nil || "ledger/hold/"+e.Hold.ID != body.Target {
			f.mismatch = "the request answers " + body.Target
		}
	case req.Path == "/v1/actions":
		switch {
		case action == nil:
			f.mismatch = "the request is an action, the event a " + kind
		case action.Type != body.Type || action.Target != body.Target:
			f.mismatch = fmt.Sprintf("the request is %s %s, the event %s %s", body.Type, body.Target, action.Type, action.Target)
		case !bytes.Equal(action.Payload, body.Payload) || action.PayloadHash != body.PayloadHash:
			f.mismatch = "the payload differs"
		case !bytes.Equal(action.Sealed, body.Sealed):
			f.mismatch = "the sealed payload differs"
		case action.Session != body.Session:
			f.mismatch = "the session differs"
		case body.Envelope != "" && body.Envelope != action.Envelope:
			f.mismatch = "the envelope differs"
		case !bytes.Equal(action.Resources, body.Resources):
			f.mismatch = "the declared resources differ"
		}
	case three && at(0) == "holds":
		if e.Hold == nil || e.Hold.ID != at(1) || e.Hold.Decision != at(2) {
			f.mismatch = "the request answers hold " + at(1) + " with " + at(2)
		}
	case three && at(0) == "actors" && at(2) == "status":
		if e.Status == nil || e.Status.Actor != at(1) || e.Status.Status != body.Status {
			f.mismatch = "the request sets " + at(1) + " " + body.Status
		}
	case three && at(0) == "actors" && at(2) == "key":
		if e.KeyChange == nil || e.KeyChange.Actor != at(1) || e.KeyChange.Key != body.Key || e.KeyChange.Req != body.Require {
			f.mismatch = "the request sets the signing key of " + at(1)
		}
	case three && at(0) == "agents" && at(2) == "kill":
		if e.Kill == nil || e.Kill.Agent != at(1) {
			f.mismatch = "the request kills " + at(1)
		}
	case three && at(0) == "agents" && at(2) == "quarantine":
		if e.Quarantine == nil || e.Quarantine.Agent != at(1) {
			f.mismatch = "the request quarantines " + at(1)
		}
	case req.Path == "/v1/envelopes":
		if e.Envelope == nil || e.Envelope.Holder != body.Holder || e.Envelope.Budget != body.Budget {
			f.mismatch = "the request issues another envelope"
		}
	case three && at(0) == "envelopes" && at(2) == "revoke":
		if e.EnvelopeEnd == nil || e.EnvelopeEnd.ID != at(1) {
			f.mismatch = "the request revokes envelope " + at(1)
		}
	}
	return f, nil
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

// event checks one event's signature, counts it, then applies its key
// registration (a rotation is signed by the key it replaces).
func (s *signatureState) event(index uint64, ev *Event, f *signingFacts) error {
	counts := func(id string) *Signatures {
		c := s.byActor[id]
		if c == nil {
			c = &Signatures{}
			s.byActor[id] = c
		}
		return c
	}
	isAction := ev.Kind == "action" || ev.Kind == "hold.requested"
	verified, unverifiable := false, false
	if f != nil && f.signed != nil {
		sg := f.signed
		k, ok := s.keys[sg.By]
		switch {
		case sg.By != ev.Actor && sg.By != f.approvedBy:
			return fmt.Errorf("signed by %s, neither its actor nor the human who answered its hold", sg.By)
		case !ok && s.complete:
			return fmt.Errorf("signed by %s, who has no signing key in the log", sg.By)
		case !ok:
			unverifiable = true
		case fmt.Sprintf("%08x", k.KeyHash()) != sg.Key:
			return fmt.Errorf("signed with key %s, but %s's signing key there is %08x", sg.Key, sg.By, k.KeyHash())
		}
		t, err := time.Parse(time.RFC3339Nano, sg.Time)
		if err != nil {
			return fmt.Errorf("signed request time %q: %v", sg.Time, err)
		}
		if d := ev.Time.Sub(t); d > SignedWindow || d < -SignedWindow {
			return fmt.Errorf("signed at %s, more than %v from the event's time", sg.Time, SignedWindow)
		}
		if prev, dup := s.nonces[sg.By+":"+sg.Nonce]; dup {
			return fmt.Errorf("nonce %s of %s was already used by entry %d", sg.Nonce, sg.By, prev)
		}
		s.nonces[sg.By+":"+sg.Nonce] = index
		if !unverifiable {
			stmt, err := statement(s.origin, sg, f.request)
			if err != nil {
				return err
			}
			sig, err := base64.StdEncoding.DecodeString(sg.Sig)
			if err != nil || !k.Verify(stmt, sig) {
				return fmt.Errorf("the signature of %s does not verify: the event is not what %s signed", sg.By, sg.By)
			}
			verified = true
		}
		if f.mismatch != "" {
			return fmt.Errorf("the event is not what %s signed: %s", sg.By, f.mismatch)
		}
	}
	if isAction {
		switch {
		case verified:
			counts(ev.Actor).Signed++
		case unverifiable:
			counts(ev.Actor).Unverifiable++
		default:
			counts(ev.Actor).Unsigned++
		}
	}
	if f != nil && f.keyChange {
		if f.key == "" {
			delete(s.keys, f.keyActor)
		} else {
			v, err := note.NewVerifier(f.key)
			if err != nil {
				return fmt.Errorf("signing key of %s: %v", f.keyActor, err)
			}
			s.keys[f.keyActor] = v
		}
	}
	return nil
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
