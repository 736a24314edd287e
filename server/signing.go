package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/annal-dev/annal/api"
	"github.com/annal-dev/annal/format/vfspath"
	"github.com/annal-dev/annal/kernel"
	"github.com/annal-dev/annal/kernel/event"
)

// maxSignedBody bounds the body of a signed request read before its
// handler, which then applies its own, smaller limit.
const maxSignedBody = api.MaxActionBody

// signedRequest reads a request that carries an Annal-Signature header
// and returns it with the signature in its context and its body still to
// read. The signer is the authenticated actor; the kernel verifies the
// signature against the actor's key as the log registered it, when it
// decides the event the request leads to.
func (s *Server) signedRequest(w http.ResponseWriter, r *http.Request) (*http.Request, error) {
	if r.Method != http.MethodPost && r.Method != http.MethodPut && r.Method != http.MethodDelete {
		return r, fmt.Errorf("%w: only a POST, PUT or DELETE request is signed", kernel.ErrInvalid)
	}
	sig, err := parseSignatureHeader(r.Header.Get(api.SignatureHeader))
	if err != nil {
		return r, err
	}
	actor, err := s.authenticate(r)
	if err != nil {
		return r, err
	}
	limit := int64(maxSignedBody)
	if isVFSWrite(r) {
		limit = api.MaxVFSContent
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return r, fmt.Errorf("%w: request body is larger than %d bytes", kernel.ErrTooLarge, limit)
	} else if err != nil {
		return r, fmt.Errorf("%w: read body: %v", kernel.ErrInvalid, err)
	}
	if sig.Request, err = signedForm(r, body); err != nil {
		return r, err
	}
	if len(sig.Request) > event.MaxSignedRequest && r.URL.Path != event.ActionsPath {
		return r, fmt.Errorf("%w: a signed request other than an action is at most %d bytes", kernel.ErrTooLarge, event.MaxSignedRequest)
	}
	sig.By = actor.ID
	ctx := context.WithValue(kernel.WithRequestSignature(r.Context(), sig), authenticatedKey{}, actor)
	r2 := r.WithContext(ctx)
	r2.Body = io.NopCloser(bytes.NewReader(body))
	return r2, nil
}

// isVFSWrite: a write to the agent file system, whose body is the file.
func isVFSWrite(r *http.Request) bool {
	return r.Method == http.MethodPut && strings.HasPrefix(r.URL.Path, vfspath.APIPrefix)
}

// signedForm is the request a signature of r states (canonical {method,
// path, body}): r itself, its body JSON; for a write to the agent file
// system, whose body is the file's bytes, the action the write is (POST
// /v1/actions naming the content's OID, vfspath.SignedWrite), so the event
// gives it back like any signed action's and the fold checks it against
// the event member by member.
func signedForm(r *http.Request, body []byte) ([]byte, error) {
	if !isVFSWrite(r) {
		req, err := event.CanonicalRequest(r.Method, r.URL.Path, body)
		if err != nil {
			return nil, fmt.Errorf("%w: a signed request's body is JSON: %v", kernel.ErrInvalid, err)
		}
		return req, nil
	}
	action, _, err := vfspath.SignedWrite(r.URL.Path, r.URL.Query().Get("envelope"), body)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", kernel.ErrInvalid, err)
	}
	return event.CanonicalRequest(http.MethodPost, event.ActionsPath, action)
}

// authenticatedKey carries the actor signedRequest authenticated to the
// handler, which then need not look the credential up again.
type authenticatedKey struct{}

// parseSignatureHeader parses "key=…, nonce=…, time=…, sig=…".
func parseSignatureHeader(h string) (*kernel.RequestSignature, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s header: %s", kernel.ErrInvalid, api.SignatureHeader, fmt.Sprintf(format, args...))
	}
	if len(h) > 512 {
		return nil, bad("longer than 512 bytes")
	}
	sig := &kernel.RequestSignature{}
	seen := map[string]bool{}
	for _, part := range strings.Split(h, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok || seen[k] {
			return nil, bad("%q is not one key=value of key, nonce, time, sig", part)
		}
		seen[k] = true
		switch k {
		case "key":
			sig.Key = v
		case "nonce":
			sig.Nonce = v
		case "time":
			t, err := event.ParseInstant(v)
			if err != nil {
				return nil, bad("%v", err)
			}
			sig.Time = t
		case "sig":
			sig.Sig = v
		default:
			return nil, bad("unknown parameter %q", k)
		}
	}
	if len(seen) != 4 {
		return nil, bad("needs key, nonce, time and sig")
	}
	probe := event.Signed{By: "probe", Key: sig.Key, Nonce: sig.Nonce, Time: sig.Time, Sig: sig.Sig}
	if err := probe.Check(); err != nil {
		return nil, bad("%v", err)
	}
	return sig, nil
}
