package checkpoints

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"golang.org/x/mod/sumdb/note"
)

// MaxCheckpointSize bounds a signed checkpoint note: body, log signature and
// cosignatures together. Real checkpoints are a few hundred bytes; the bound
// leaves room for dozens of cosignatures.
const MaxCheckpointSize = 16 << 10

// Checkpoint is the body of a c2sp.org/tlog-checkpoint note:
//
//	<origin>\n
//	<size, decimal, no leading zeros>\n
//	<root hash, standard base64 of 32 bytes>\n
//	[<extension line>\n]...
type Checkpoint struct {
	Origin     string
	Size       uint64
	Hash       [sha256.Size]byte
	Extensions []string
}

// Marshal returns the checkpoint body, the text that the log signs.
func (c Checkpoint) Marshal() []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s\n%d\n%s\n", c.Origin, c.Size, base64.StdEncoding.EncodeToString(c.Hash[:]))
	for _, e := range c.Extensions {
		b.WriteString(e)
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// ParseCheckpointBody parses a checkpoint body strictly: exactly the layout
// above, every line non-empty UTF-8 without control characters, a canonical
// decimal size and a canonical base64 root of exactly 32 bytes.
func ParseCheckpointBody(text []byte) (Checkpoint, error) {
	if len(text) == 0 || text[len(text)-1] != '\n' {
		return Checkpoint{}, errors.New("checkpoint body does not end with a newline")
	}
	lines := strings.Split(string(text[:len(text)-1]), "\n")
	if len(lines) < 3 {
		return Checkpoint{}, fmt.Errorf("checkpoint body has %d lines, want at least 3 (origin, size, root hash)", len(lines))
	}
	if err := ValidateOrigin(lines[0]); err != nil {
		return Checkpoint{}, fmt.Errorf("checkpoint origin: %w", err)
	}
	size, err := ParseDecimal(lines[1])
	if err != nil {
		return Checkpoint{}, fmt.Errorf("checkpoint size: %w", err)
	}
	hash, err := ParseHash(lines[2])
	if err != nil {
		return Checkpoint{}, fmt.Errorf("checkpoint root hash: %w", err)
	}
	c := Checkpoint{Origin: lines[0], Size: size, Hash: hash}
	for i, e := range lines[3:] {
		if e == "" {
			return Checkpoint{}, fmt.Errorf("checkpoint extension line %d is empty", i+1)
		}
		// A c2sp.org/signed-note text is UTF-8 without control characters,
		// so a body breaking that rule could never have been signed.
		if !utf8.ValidString(e) || strings.ContainsFunc(e, isControl) {
			return Checkpoint{}, fmt.Errorf("checkpoint extension line %d is not UTF-8 text without control characters", i+1)
		}
		c.Extensions = append(c.Extensions, e)
	}
	return c, nil
}

// ParseDecimal parses an unsigned decimal with no sign and no leading zeros
// (other than "0" itself), as C2SP formats write sizes and indexes.
func ParseDecimal(s string) (uint64, error) {
	if s == "" {
		return 0, errors.New("empty number")
	}
	if len(s) > 1 && s[0] == '0' {
		return 0, fmt.Errorf("number %q has a leading zero", abbreviate(s))
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, fmt.Errorf("number %q is not plain decimal", abbreviate(s))
		}
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("number %q does not fit in 64 bits", abbreviate(s))
	}
	return n, nil
}

// ParseHash decodes a standard, padded base64 SHA-256 hash and refuses any
// other length or a non-canonical encoding.
func ParseHash(s string) ([sha256.Size]byte, error) {
	var h [sha256.Size]byte
	raw, err := decodeBase64(s)
	if err != nil {
		return h, fmt.Errorf("hash %q is not standard base64: %w", abbreviate(s), err)
	}
	if len(raw) != sha256.Size {
		return h, fmt.Errorf("hash is %d bytes, want %d", len(raw), sha256.Size)
	}
	copy(h[:], raw)
	return h, nil
}

// decodeBase64 decodes canonical standard base64. Go's decoder skips '\r' and
// '\n' even in strict mode, which would give one value many spellings.
func decodeBase64(s string) ([]byte, error) {
	if i := strings.IndexAny(s, "\r\n"); i >= 0 {
		return nil, fmt.Errorf("line break at offset %d", i)
	}
	return base64.StdEncoding.Strict().DecodeString(s)
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f }

// SignedCheckpoint is a checkpoint whose log signature has been verified.
type SignedCheckpoint struct {
	Checkpoint
	// Note is the opened note; its Sigs hold the log signature and any
	// signatures by the other verifiers passed to OpenCheckpoint.
	Note *note.Note
	// Raw is the signed note exactly as received.
	Raw []byte
}

// OpenCheckpoint verifies a signed checkpoint note. It succeeds only if the
// note carries a valid signature by logKey, the body parses strictly, and the
// body's origin equals the key name (Annal logs name their key after their
// origin). Signatures by unknown keys, such as cosignatures the caller does
// not check, are ignored; a signature by a known key that does not verify is
// an error. others are further verifiers (witnesses) whose valid signatures
// are kept in Note.Sigs.
func OpenCheckpoint(signed []byte, logKey note.Verifier, others ...note.Verifier) (*SignedCheckpoint, error) {
	if len(signed) > MaxCheckpointSize {
		return nil, fmt.Errorf("checkpoint is %d bytes, more than the limit of %d", len(signed), MaxCheckpointSize)
	}
	n, err := note.Open(signed, note.VerifierList(append([]note.Verifier{logKey}, others...)...))
	if err != nil {
		var unverified *note.UnverifiedNoteError
		var invalid *note.InvalidSignatureError
		switch {
		case errors.As(err, &unverified):
			return nil, fmt.Errorf("checkpoint has no signature by log key %q", logKey.Name())
		case errors.As(err, &invalid):
			return nil, fmt.Errorf("checkpoint signature by %q does not verify", invalid.Name)
		}
		return nil, fmt.Errorf("checkpoint is not a well-formed signed note: %w", err)
	}
	if err := checkCanonicalSignatures(signed); err != nil {
		return nil, err
	}
	logSigned := false
	for _, s := range n.Sigs {
		if s.Name == logKey.Name() && s.Hash == logKey.KeyHash() {
			logSigned = true
		}
	}
	if !logSigned {
		return nil, fmt.Errorf("checkpoint has no signature by log key %q", logKey.Name())
	}
	c, err := ParseCheckpointBody([]byte(n.Text))
	if err != nil {
		return nil, err
	}
	if c.Origin != logKey.Name() {
		return nil, fmt.Errorf("checkpoint origin %q is not the log key's name %q", c.Origin, logKey.Name())
	}
	return &SignedCheckpoint{Checkpoint: c, Note: n, Raw: signed}, nil
}

// checkCanonicalSignatures refuses signature lines whose base64 is not in
// canonical form. x/mod note decodes signatures leniently, ignoring the
// unused bits of the last base64 character, so without this check one valid
// signed checkpoint would have several byte encodings.
func checkCanonicalSignatures(signed []byte) error {
	i := bytes.LastIndex(signed, []byte("\n\n"))
	if i < 0 {
		return errors.New("checkpoint is not a well-formed signed note: no signature block")
	}
	for _, line := range strings.Split(strings.TrimSuffix(string(signed[i+2:]), "\n"), "\n") {
		j := strings.LastIndexByte(line, ' ')
		if j < 0 {
			return fmt.Errorf("checkpoint signature line %q is malformed", abbreviate(line))
		}
		if _, err := base64.StdEncoding.Strict().DecodeString(line[j+1:]); err != nil {
			return fmt.Errorf("checkpoint signature line %q is not canonical base64", abbreviate(line))
		}
	}
	return nil
}

// SignCheckpoint signs a checkpoint body with the log key. The signer's name
// MUST equal the checkpoint origin.
func SignCheckpoint(c Checkpoint, s note.Signer) ([]byte, error) {
	if s.Name() != c.Origin {
		return nil, fmt.Errorf("signer %q cannot sign a checkpoint of origin %q", s.Name(), c.Origin)
	}
	return note.Sign(&note.Note{Text: string(c.Marshal())}, s)
}
