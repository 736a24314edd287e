package checkpoints

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/mod/sumdb/note"
)

// Ed25519 is the signature algorithm byte of an x/mod note Ed25519 key
// (c2sp.org/signed-note, "Signature types").
const Ed25519 = 0x01

// GenerateLogKey makes a new Ed25519 log key whose name is origin. It returns
// the private key (x/mod note "PRIVATE+KEY+..." form, to be kept secret) and
// the verifier key ("<origin>+<hash>+<base64>") that auditors and witnesses use.
func GenerateLogKey(origin string) (skey, vkey string, err error) {
	if err := ValidateOrigin(origin); err != nil {
		return "", "", err
	}
	return note.GenerateKey(rand.Reader, origin)
}

// NewLogSigner parses a private key made by GenerateLogKey.
func NewLogSigner(skey string) (note.Signer, error) {
	s, err := note.NewSigner(strings.TrimSpace(skey))
	if err != nil {
		return nil, fmt.Errorf("log signing key: %w", err)
	}
	return s, nil
}

// VerifierKeyOf derives the verifier key of a private key made by
// GenerateLogKey: "PRIVATE+KEY+<name>+<hash>+<base64(0x01 || seed)>".
func VerifierKeyOf(skey string) (string, error) {
	parts := strings.SplitN(strings.TrimSpace(skey), "+", 5) // the base64 key may hold "+"
	if len(parts) != 5 || parts[0] != "PRIVATE" || parts[1] != "KEY" {
		return "", errors.New("log signing key: not a PRIVATE+KEY+<name>+<hash>+<key> note key")
	}
	raw, err := base64.StdEncoding.DecodeString(parts[4])
	if err != nil || len(raw) != 1+ed25519.SeedSize || raw[0] != Ed25519 {
		return "", errors.New("log signing key: not an Ed25519 note key")
	}
	pub := ed25519.NewKeyFromSeed(raw[1:]).Public().(ed25519.PublicKey)
	vkey, err := note.NewEd25519VerifierKey(parts[2], pub)
	if err != nil {
		return "", fmt.Errorf("log signing key: %w", err)
	}
	if _, err := NewLogSigner(skey); err != nil {
		return "", err
	}
	return vkey, nil
}

// NewLogVerifier parses a log verifier key. It MUST be an Ed25519 key: Annal
// logs sign only with Ed25519, so any other algorithm is refused here rather
// than at signature check time.
func NewLogVerifier(vkey string) (note.Verifier, error) {
	vkey = strings.TrimSpace(vkey)
	v, err := note.NewVerifier(vkey)
	if err != nil {
		return nil, fmt.Errorf("log verifier key %q: %w", abbreviate(vkey), err)
	}
	if err := ValidateOrigin(v.Name()); err != nil {
		return nil, fmt.Errorf("log verifier key: %w", err)
	}
	return v, nil
}

// ValidateOrigin checks that origin can name a log: c2sp.org/tlog-checkpoint
// requires a non-empty line, and c2sp.org/signed-note key names are non-empty
// and contain no Unicode spaces and no "+".
func ValidateOrigin(origin string) error {
	switch {
	case origin == "":
		return errors.New("origin is empty")
	case len(origin) > 255:
		return fmt.Errorf("origin %q is longer than 255 bytes", abbreviate(origin))
	case strings.ContainsAny(origin, "+"):
		return fmt.Errorf("origin %q contains '+', which a note key name may not", origin)
	case !utf8.ValidString(origin):
		return fmt.Errorf("origin %q is not valid UTF-8", origin)
	}
	if strings.ContainsFunc(origin, isSpaceOrControl) {
		return fmt.Errorf("origin %q contains a space or control character", origin)
	}
	return nil
}

// isSpaceOrControl is what a key name may not hold: an ASCII control
// character, or a Unicode space (the White_Space property, as
// unicode.IsSpace has it).
func isSpaceOrControl(r rune) bool { return isControl(r) || unicode.IsSpace(r) }

func abbreviate(s string) string {
	if len(s) > 64 {
		return s[:61] + "..."
	}
	return s
}
