package client

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/gowebpki/jcs"
	"golang.org/x/mod/sumdb/note"

	"github.com/annal-dev/annal/api"
)

// signedStatementContext starts the statement a request signature covers
// (testvectors/FORMATS.md, "Signed requests").
const signedStatementContext = "annal/signed-request/v1\n"

// requestSigner signs requests with one key for one log and actor.
type requestSigner struct {
	signer note.Signer

	mu     sync.Mutex
	origin string // fetched once, with by
	by     string
}

// WithSigningKey makes the client sign every POST, PUT and DELETE with
// skey, an x/mod note Ed25519 signer key ("PRIVATE+KEY+…", from `annal
// keys generate`): the events its requests lead to then carry the
// signature, which the log checks against the actor's registered key and
// an auditor checks again offline. Each request gets a new nonce. A
// reverse proxy in front of the kernel must not rewrite the path: the
// signature covers it.
func (c *Client) WithSigningKey(skey string) (*Client, error) {
	s, err := note.NewSigner(skey)
	if err != nil {
		return nil, fmt.Errorf("signing key is not an x/mod note Ed25519 signer key: %w", err)
	}
	c.signer = &requestSigner{signer: s}
	return c, nil
}

// signingIdentity is the log's origin and the client's actor, which every
// signature names.
func (c *Client) signingIdentity(ctx context.Context) (origin, by string, err error) {
	c.signer.mu.Lock()
	defer c.signer.mu.Unlock()
	if c.signer.origin == "" {
		info, err := c.Info(ctx)
		if err != nil {
			return "", "", fmt.Errorf("read the log's origin to sign for it: %w", err)
		}
		me, err := c.WhoAmI(ctx)
		if err != nil {
			return "", "", fmt.Errorf("read who signs: %w", err)
		}
		c.signer.origin, c.signer.by = info.Origin, me.ID
	}
	return c.signer.origin, c.signer.by, nil
}

// signatureHeader signs method path body for the kernel's log.
func (c *Client) signatureHeader(ctx context.Context, method, path string, body []byte) (string, error) {
	origin, by, err := c.signingIdentity(ctx)
	if err != nil {
		return "", err
	}
	var nb [16]byte
	if _, err := rand.Read(nb[:]); err != nil {
		return "", err
	}
	nonce := base64.RawURLEncoding.EncodeToString(nb[:])
	at := time.Now().UTC().Format(time.RFC3339Nano)
	stmt, err := SignedStatement(origin, by, nonce, at, method, path, body)
	if err != nil {
		return "", err
	}
	sig, err := c.signer.signer.Sign(stmt)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("key=%08x, nonce=%s, time=%s, sig=%s", c.signer.signer.KeyHash(), nonce, at,
		base64.StdEncoding.EncodeToString(sig)), nil
}

// SignedStatement returns the bytes a request signature covers:
// "annal/signed-request/v1\n" and the RFC 8785 JSON of {by, nonce, origin,
// request: {method, path, body}, time}, the body canonicalised too (and
// absent when empty). at is RFC 3339 UTC as events write times.
func SignedStatement(origin, by, nonce, at, method, path string, body []byte) ([]byte, error) {
	type request struct {
		Method string          `json:"method"`
		Path   string          `json:"path"`
		Body   json.RawMessage `json:"body,omitempty"`
	}
	r := request{Method: method, Path: path}
	if len(bytes.TrimSpace(body)) > 0 {
		r.Body = json.RawMessage(body)
		if method == "POST" && path == "/v1/actions" {
			var err error
			if r.Body, err = sealedBody(body); err != nil {
				return nil, err
			}
		}
	}
	raw, err := json.Marshal(struct {
		By      string  `json:"by"`
		Nonce   string  `json:"nonce"`
		Origin  string  `json:"origin"`
		Request request `json:"request"`
		Time    string  `json:"time"`
	}{by, nonce, origin, r, at})
	if err != nil {
		return nil, err
	}
	canon, err := jcs.Transform(raw)
	if err != nil {
		return nil, err
	}
	return append([]byte(signedStatementContext), canon...), nil
}

// sealContext starts the bytes a sealed payload's commitment hashes.
const sealContext = "annal/sealed-payload/v1\n"

// sealedBody is an action body as a signature covers it: a body that
// seals its payload with its own salt has payload, salt, seal and subject
// replaced by "sealed": {"commitment", "subject"}, the commitment being
// "sha256:" || hex(SHA-256(sealContext || salt || JCS(payload))).
func sealedBody(body []byte) ([]byte, error) {
	var m map[string]json.RawMessage
	if json.Unmarshal(body, &m) != nil {
		return body, nil
	}
	rawSalt, hasSalt := m["salt"]
	_, hasSeal := m["seal"]
	rawSubject, hasSubject := m["subject"]
	if !hasSalt && !hasSeal && !hasSubject {
		return body, nil
	}
	var salt []byte
	var subject string
	if !hasSalt || !hasSubject || json.Unmarshal(rawSalt, &salt) != nil || len(salt) != 32 ||
		json.Unmarshal(rawSubject, &subject) != nil || m["payload"] == nil {
		return nil, errors.New("annal: a signed request that seals its payload carries the payload, its subject and its salt")
	}
	payload, err := jcs.Transform(m["payload"])
	if err != nil {
		return nil, fmt.Errorf("annal: payload: %w", err)
	}
	h := sha256.New()
	h.Write([]byte(sealContext))
	h.Write(salt)
	h.Write(payload)
	sealed, err := json.Marshal(map[string]string{"commitment": "sha256:" + hex.EncodeToString(h.Sum(nil)), "subject": subject})
	if err != nil {
		return nil, err
	}
	for _, k := range []string{"payload", "salt", "seal", "subject"} {
		delete(m, k)
	}
	m["sealed"] = sealed
	return json.Marshal(m)
}

// prepareSeal draws the salt and names the subject of a sealing request
// the client signs.
func (c *Client) prepareSeal(ctx context.Context, req *api.ActionRequest) error {
	if c.signer == nil || (!req.Seal && req.Subject == "" && req.Salt == "") {
		return nil
	}
	if req.Subject == "" {
		_, by, err := c.signingIdentity(ctx)
		if err != nil {
			return err
		}
		req.Subject = by
	}
	if req.Salt == "" {
		var salt [32]byte
		if _, err := rand.Read(salt[:]); err != nil {
			return err
		}
		req.Salt = base64.StdEncoding.EncodeToString(salt[:])
	}
	return nil
}
