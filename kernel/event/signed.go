package event

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/gowebpki/jcs"
	"golang.org/x/mod/sumdb/note"
)

// Signed requests (testvectors/FORMATS.md, "Signed requests"). An actor
// that registered a signing key may sign its HTTP requests; the event a
// signed request leads to carries the signature, so that the log shows
// what the actor asked for, not only what the kernel says it asked for.
//
// The signature is Ed25519 over the statement
//
//	"annal/signed-request/v1\n" || JCS({"by", "nonce", "origin", "request", "time"})
//
// where request is {"method", "path", "body"}: the HTTP method, the path,
// and the request body in canonical JSON (absent when empty). The origin
// binds it to one log, the nonce to one event, the time to a window of
// SignedWindow around the event's own time.

// KindActorKey records an actor's signing key registered, rotated or
// revoked, and whether its requests must be signed.
const KindActorKey Kind = "actor.key"

// SignedStatementContext starts every signed statement.
const SignedStatementContext = "annal/signed-request/v1\n"

// Signed is carried by an event a signed request led to.
type Signed struct {
	// By is the signer: the event's actor, or the human whose answer
	// commits a held action.
	By string `json:"by"`
	// Key is the signer's key ID as a signed-note verifier key names it
	// (8 lower-case hex digits).
	Key   string  `json:"key"`
	Nonce string  `json:"nonce"`
	Time  Instant `json:"time"`
	// Sig is the Ed25519 signature, standard base64.
	Sig string `json:"sig"`
	// Request is the signed request when the event does not give it back
	// on its own (RequestOf): every request but an action whose event
	// holds exactly what it asked.
	Request json.RawMessage `json:"request,omitempty"`
}

// KeyChange is carried by actor.key: Key (a signed-note Ed25519 verifier
// key) becomes the actor's signing key, replacing
// any other; an empty Key revokes it. RequireSigned says whether the
// actor's requests must be signed from then on.
type KeyChange struct {
	Actor         string `json:"actor"`
	Key           string `json:"key,omitempty"`
	RequireSigned bool   `json:"require_signed,omitempty"`
	Reason        string `json:"reason,omitempty"`
}

// SignedRequest is the request part of a statement.
type SignedRequest struct {
	Method string          `json:"method"`
	Path   string          `json:"path"`
	Body   json.RawMessage `json:"body,omitempty"`
}

var noncePattern = regexp.MustCompile(`^[A-Za-z0-9_-]{16,64}$`)

// MaxSignedRequest bounds a logged signed request.
const MaxSignedRequest = 16 << 10

// ValidNonce reports whether s can be a request nonce: 16 to 64 characters
// of base64url.
func ValidNonce(s string) bool { return noncePattern.MatchString(s) }

// SigningKey is a parsed signing key.
type SigningKey struct {
	note.Verifier
	// ID is the key ID, 8 lower-case hex digits.
	ID string
}

// ParseSigningKey parses a signed-note Ed25519 verifier key
// ("<name>+<key ID>+<base64 of 0x01 || key>"). The name is the key
// holder's choice (`annal keys generate` names it); the log binds the key
// to its actor.
func ParseSigningKey(vkey string) (*SigningKey, error) {
	if len(vkey) > 512 {
		return nil, errors.New("signing key is longer than 512 bytes")
	}
	v, err := note.NewVerifier(vkey)
	if err != nil {
		return nil, fmt.Errorf("signing key is not a signed-note Ed25519 verifier key: %w", err)
	}
	return &SigningKey{Verifier: v, ID: fmt.Sprintf("%08x", v.KeyHash())}, nil
}

// CanonicalRequest returns the canonical request part of a statement.
// body is the request body as sent (any JSON, or empty). An action request
// that seals its payload is signed as its event will show it
// (SealedRequestBody): the commitment in place of the payload.
func CanonicalRequest(method, path string, body []byte) ([]byte, error) {
	r := SignedRequest{Method: method, Path: path}
	if len(bytes.TrimSpace(body)) > 0 {
		canon, err := jcs.Transform(body)
		if err != nil {
			return nil, fmt.Errorf("request body is not JSON: %w", err)
		}
		if method == "POST" && path == ActionsPath {
			if canon, err = SealedRequestBody(canon); err != nil {
				return nil, err
			}
		}
		r.Body = canon
	}
	raw, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	return jcs.Transform(raw)
}

// SignedStatement returns the bytes a signature covers.
func SignedStatement(origin, by, nonce string, at Instant, request []byte) ([]byte, error) {
	raw, err := json.Marshal(struct {
		By      string          `json:"by"`
		Nonce   string          `json:"nonce"`
		Origin  string          `json:"origin"`
		Request json.RawMessage `json:"request"`
		Time    string          `json:"time"`
	}{by, nonce, origin, request, FormatTime(at.Time)})
	if err != nil {
		return nil, err
	}
	canon, err := jcs.Transform(raw)
	if err != nil {
		return nil, err
	}
	return append([]byte(SignedStatementContext), canon...), nil
}

// actionBody is an action request as the events of actions give it back.
type actionBody struct {
	Type        ActionType      `json:"type"`
	Target      string          `json:"target"`
	Payload     json.RawMessage `json:"payload,omitempty"`
	PayloadHash string          `json:"payload_hash,omitempty"`
	Envelope    string          `json:"envelope,omitempty"`
	Session     string          `json:"session,omitempty"`
	Resources   *Resources      `json:"resources,omitempty"`
	Sealed      *SealedPayload  `json:"sealed,omitempty"`
}

// ActionsPath is the path of action requests.
const ActionsPath = "/v1/actions"

// RequestOf returns the signed request of e: Signed.Request, or, for an
// event carrying an action, the POST /v1/actions request its action and
// session give back. Nil if e is not signed.
func RequestOf(e *Event) ([]byte, error) {
	if e.Signed == nil {
		return nil, nil
	}
	if e.Signed.Request != nil {
		return e.Signed.Request, nil
	}
	if e.Action == nil {
		return nil, errors.New("a signed event without an action must carry its request")
	}
	return reconstructAction(e)
}

func reconstructAction(e *Event) ([]byte, error) {
	a := e.Action
	body, err := json.Marshal(actionBody{Type: a.Type, Target: a.Target, Payload: a.Payload, PayloadHash: a.PayloadHash,
		Envelope: a.Envelope, Session: e.Session, Resources: a.Resources, Sealed: a.Sealed})
	if err != nil {
		return nil, err
	}
	return CanonicalRequest("POST", ActionsPath, body)
}

// CompactSigned drops e.Signed.Request when e gives it back on its own.
func CompactSigned(e *Event) {
	if e.Signed == nil || e.Action == nil || e.Signed.Request == nil {
		return
	}
	if again, err := reconstructAction(e); err == nil && bytes.Equal(again, e.Signed.Request) {
		e.Signed.Request = nil
	}
}

// Check checks the form of s as an event would carry it.
func (s *Signed) Check() error { return s.validate() }

// checkOn checks s as e carries it: the kernel's own events are not
// signed.
func (s *Signed) checkOn(e *Event) error {
	if e.Actor == KernelActor {
		return errors.New("the kernel's own events are not signed")
	}
	return s.validate()
}

func (s *Signed) validate() error {
	if !ValidActorID(s.By) {
		return fmt.Errorf("signed by %q, not a valid actor id", s.By)
	}
	if len(s.Key) != 8 || strings.ToLower(s.Key) != s.Key {
		return fmt.Errorf("signing key ID %q is not 8 lower-case hex digits", s.Key)
	}
	if _, err := strconv.ParseUint(s.Key, 16, 32); err != nil {
		return fmt.Errorf("signing key ID %q is not 8 lower-case hex digits", s.Key)
	}
	if !ValidNonce(s.Nonce) {
		return fmt.Errorf("nonce %q is not 16 to 64 characters of base64url", s.Nonce)
	}
	if s.Time.IsZero() {
		return errors.New("signed request without a time")
	}
	if err := validateTime("signed request time", s.Time); err != nil {
		return err
	}
	if sig, err := base64.StdEncoding.Strict().DecodeString(s.Sig); err != nil || len(sig) != 64 {
		return errors.New("signature is not 64 bytes of standard base64")
	}
	if s.Request != nil {
		return checkSignedRequest(s.Request)
	}
	return nil
}

// checkSignedRequest checks a logged signed request: at most
// MaxSignedRequest bytes of {method, path, body}, in canonical form.
func checkSignedRequest(raw json.RawMessage) error {
	if len(raw) > MaxSignedRequest {
		return fmt.Errorf("signed request is %d bytes, more than %d", len(raw), MaxSignedRequest)
	}
	var r SignedRequest
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil || r.Method == "" || !strings.HasPrefix(r.Path, "/") {
		return errors.New("signed request is not {method, path, body}")
	}
	canon, err := CanonicalRequest(r.Method, r.Path, r.Body)
	if err != nil || !bytes.Equal(canon, raw) {
		return errors.New("signed request is not canonical")
	}
	return nil
}

func (k *KeyChange) check(*Event) error {
	if !ValidActorID(k.Actor) {
		return fmt.Errorf("key change of %q, not a valid actor id", k.Actor)
	}
	if k.Key != "" {
		if _, err := ParseSigningKey(k.Key); err != nil {
			return err
		}
	}
	return validateText("key change reason", k.Reason, 1024)
}

// The parts of its kinds (parts.go).
func init() {
	kinds[KindActorKey] = carries(must("key_change"))
}
