package witness

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/annal-dev/annal/checkpoints"
)

// Limits on an add-checkpoint request. A request over any of them is
// refused before any signature is checked.
const (
	// MaxRequestSize bounds the whole body. A checkpoint with a few Ed25519
	// signatures is well under 1 KiB; the bound leaves room for about 16
	// ML-DSA-44 signatures (3.3 KiB each), the number c2sp.org/signed-note
	// says a verifier MUST accept.
	MaxRequestSize = 64 << 10
	// MaxProofLines is the most consistency proof lines a client may send
	// (c2sp.org/tlog-witness: "The client MUST NOT send more than 63").
	MaxProofLines = 63
	// MaxLineLength bounds every line of the body, including the checkpoint's
	// origin and extension lines and each signature line. An ML-DSA-44
	// signature line is about 3.3 KiB.
	MaxLineLength = 4 << 10
	// MaxSignatureLines bounds the signature lines of the checkpoint note.
	// c2sp.org/signed-note requires accepting at least 16.
	MaxSignatureLines = 32
)

// noteSignaturePrefix starts every signed-note signature line.
const noteSignaturePrefix = "— "

// AddCheckpointRequest is the body of a c2sp.org/tlog-witness add-checkpoint
// request:
//
//	old <size, decimal, no leading zeros>\n
//	[<standard base64 of a 32-byte hash>\n]...   (at most MaxProofLines)
//	\n
//	<checkpoint signed note>
type AddCheckpointRequest struct {
	// OldSize is the size of the checkpoint the client believes this
	// witness cosigned last.
	OldSize uint64
	// Proof is the RFC 6962 consistency proof from OldSize to the
	// checkpoint's size.
	Proof [][sha256.Size]byte
	// SignedCheckpoint is the checkpoint note exactly as sent, signatures
	// included. Nothing in it is verified by the parser.
	SignedCheckpoint []byte
	// Checkpoint is the parsed note text of SignedCheckpoint.
	Checkpoint checkpoints.Checkpoint
}

// Marshal encodes the request body. ParseAddCheckpointRequest(r.Marshal())
// gives r back for any request it accepted.
func (r AddCheckpointRequest) Marshal() []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "old %d\n", r.OldSize)
	for _, h := range r.Proof {
		b.WriteString(base64.StdEncoding.EncodeToString(h[:]))
		b.WriteByte('\n')
	}
	b.WriteByte('\n')
	b.Write(r.SignedCheckpoint)
	return b.Bytes()
}

// ErrMalformedRequest is wrapped by every error of a request that breaks the
// add-checkpoint format or one of its limits. The HTTP answer is 400.
var ErrMalformedRequest = errors.New("malformed add-checkpoint request")

// ErrRequestTooLarge is returned for a body over MaxRequestSize. The HTTP
// answer is 413.
var ErrRequestTooLarge = errors.New("add-checkpoint request too large")

// ParseAddCheckpointRequest parses a request body strictly: exactly the
// layout above, within the limits above, and a checkpoint note that is
// well-formed (see ParseSignedCheckpoint). It checks no signature and no
// proof.
func ParseAddCheckpointRequest(body []byte) (*AddCheckpointRequest, error) {
	if len(body) > MaxRequestSize {
		return nil, fmt.Errorf("%w: body is %d bytes, more than %d", ErrRequestTooLarge, len(body), MaxRequestSize)
	}
	line, rest, err := nextLine(body, "old size line")
	if err != nil {
		return nil, err
	}
	oldText, ok := strings.CutPrefix(line, "old ")
	if !ok {
		return nil, malformed("first line %q is not \"old <size>\"", abbreviate(line))
	}
	r := &AddCheckpointRequest{}
	if r.OldSize, err = checkpoints.ParseDecimal(oldText); err != nil {
		return nil, malformed("old size: %v", err)
	}
	for {
		if line, rest, err = nextLine(rest, "consistency proof line"); err != nil {
			return nil, err
		}
		if line == "" {
			break
		}
		if len(r.Proof) == MaxProofLines {
			return nil, malformed("more than %d consistency proof lines", MaxProofLines)
		}
		h, err := checkpoints.ParseHash(line)
		if err != nil {
			return nil, malformed("consistency proof line %d: %v", len(r.Proof)+1, err)
		}
		r.Proof = append(r.Proof, h)
	}
	if r.Checkpoint, err = ParseSignedCheckpoint(rest); err != nil {
		return nil, err
	}
	r.SignedCheckpoint = rest
	return r, nil
}

// ParseSignedCheckpoint checks that note is a well-formed
// c2sp.org/signed-note whose text is a c2sp.org/tlog-checkpoint, and returns
// the parsed text. It verifies no signature: a caller MUST NOT trust the
// result before verifying the note with the log's keys.
//
// Rules: valid UTF-8 without control characters other than newline; a text
// of at least three non-empty lines (origin, size in canonical decimal,
// root hash in canonical base64 of 32 bytes, then optional non-empty
// extension lines); a blank line; 1 to MaxSignatureLines signature lines
// "— <key name> <canonical base64 of at least 5 bytes>"; every line at most
// MaxLineLength bytes. The origin may be any non-empty line: the spec only
// recommends a schema-less URL, and real logs (Go's checksum database:
// "go.sum database tree") use spaces.
func ParseSignedCheckpoint(note []byte) (checkpoints.Checkpoint, error) {
	if len(note) == 0 {
		return checkpoints.Checkpoint{}, malformed("no checkpoint after the blank line")
	}
	if err := checkNoteCharacters(note); err != nil {
		return checkpoints.Checkpoint{}, err
	}
	split := bytes.LastIndex(note, []byte("\n\n"))
	if split < 0 {
		return checkpoints.Checkpoint{}, malformed("checkpoint has no blank line before its signatures")
	}
	text, sigs := note[:split+1], note[split+2:]
	if err := checkSignatureLines(sigs); err != nil {
		return checkpoints.Checkpoint{}, err
	}
	return parseCheckpointText(text)
}

// parseCheckpointText parses a checkpoint note text: the text ends in a
// newline and holds no blank line (ParseSignedCheckpoint split it there).
func parseCheckpointText(text []byte) (checkpoints.Checkpoint, error) {
	lines := strings.Split(string(text[:len(text)-1]), "\n")
	for i, l := range lines {
		if len(l) > MaxLineLength {
			return checkpoints.Checkpoint{}, malformed("checkpoint line %d is %d bytes, more than %d", i+1, len(l), MaxLineLength)
		}
		if l == "" {
			return checkpoints.Checkpoint{}, malformed("checkpoint line %d is empty", i+1)
		}
	}
	if len(lines) < 3 {
		return checkpoints.Checkpoint{}, malformed("checkpoint has %d lines, want at least 3 (origin, size, root hash)", len(lines))
	}
	c := checkpoints.Checkpoint{Origin: lines[0]}
	var err error
	if c.Size, err = checkpoints.ParseDecimal(lines[1]); err != nil {
		return checkpoints.Checkpoint{}, malformed("checkpoint size: %v", err)
	}
	if c.Hash, err = checkpoints.ParseHash(lines[2]); err != nil {
		return checkpoints.Checkpoint{}, malformed("checkpoint root hash: %v", err)
	}
	if len(lines) > 3 {
		c.Extensions = lines[3:]
	}
	return c, nil
}

// checkSignatureLines checks the signature block of a note: each line
// "— <name> <base64>\n", with the base64 in canonical form. x/mod note
// decodes base64 leniently (it ignores the unused bits of the last
// character), which would give one checkpoint several byte spellings; a
// witness that stores checkpoints as evidence wants exactly one.
func checkSignatureLines(sigs []byte) error {
	if len(sigs) == 0 || sigs[len(sigs)-1] != '\n' {
		return malformed("checkpoint signature block is empty or does not end with a newline")
	}
	lines := strings.Split(string(sigs[:len(sigs)-1]), "\n")
	if len(lines) > MaxSignatureLines {
		return malformed("checkpoint has %d signature lines, more than %d", len(lines), MaxSignatureLines)
	}
	for i, l := range lines {
		if len(l) > MaxLineLength {
			return malformed("checkpoint signature line %d is %d bytes, more than %d", i+1, len(l), MaxLineLength)
		}
		rest, ok := strings.CutPrefix(l, noteSignaturePrefix)
		if !ok {
			return malformed("checkpoint signature line %d does not start with \"— \"", i+1)
		}
		name, b64, ok := strings.Cut(rest, " ")
		if !ok || !isValidKeyName(name) {
			return malformed("checkpoint signature line %d has no valid key name (non-empty, no spaces, no '+')", i+1)
		}
		raw, err := base64.StdEncoding.Strict().DecodeString(b64)
		if err != nil || strings.ContainsAny(b64, "\r\n") {
			return malformed("checkpoint signature line %d is not canonical standard base64", i+1)
		}
		if len(raw) < 5 {
			return malformed("checkpoint signature line %d holds %d bytes, want a 4-byte key ID and a signature", i+1, len(raw))
		}
	}
	return nil
}

// signatureCounts counts the signature lines of a well-formed note by key
// (name and key ID). A key repeated is refused only if the witness knows it
// (openCheckpoint): x/mod note verifies the first signature by a key and
// skips the others, so a second one by a configured key, valid or not,
// would pass unchecked; signatures by keys the witness does not know are
// ignored, repeated or not, as c2sp.org/tlog-witness says.
func signatureCounts(signed []byte) map[signatureKey]int {
	counts := map[signatureKey]int{}
	split := bytes.LastIndex(signed, []byte("\n\n"))
	if split < 0 || len(signed) == 0 {
		return counts
	}
	for _, l := range strings.Split(strings.TrimSuffix(string(signed[split+2:]), "\n"), "\n") {
		rest, _ := strings.CutPrefix(l, noteSignaturePrefix)
		name, b64, _ := strings.Cut(rest, " ")
		if raw, err := base64.StdEncoding.DecodeString(b64); err == nil && len(raw) >= 4 {
			counts[signatureKey{name, binary.BigEndian.Uint32(raw[:4])}]++
		}
	}
	return counts
}

// signatureKey is a signature line's key: its name and key ID.
type signatureKey struct {
	name string
	id   uint32
}

// checkNoteCharacters applies c2sp.org/signed-note's character rule: valid
// UTF-8 and no ASCII control characters other than newline.
func checkNoteCharacters(note []byte) error {
	for i := 0; i < len(note); {
		r, size := utf8.DecodeRune(note[i:])
		if r == utf8.RuneError && size == 1 {
			return malformed("checkpoint is not valid UTF-8 (byte %d)", i)
		}
		if (r < 0x20 && r != '\n') || r == 0x7f {
			return malformed("checkpoint holds control character %U at byte %d", r, i)
		}
		i += size
	}
	return nil
}

// nextLine returns the first line of b without its newline, and the rest.
func nextLine(b []byte, what string) (string, []byte, error) {
	i := bytes.IndexByte(b, '\n')
	if i < 0 {
		if len(b) > MaxLineLength {
			return "", nil, malformed("%s is longer than %d bytes", what, MaxLineLength)
		}
		return "", nil, malformed("%s does not end with a newline (no blank line before the checkpoint?)", what)
	}
	if i > MaxLineLength {
		return "", nil, malformed("%s is %d bytes, more than %d", what, i, MaxLineLength)
	}
	return string(b[:i]), b[i+1:], nil
}

// isValidKeyName is c2sp.org/signed-note's rule for key names: non-empty,
// no Unicode spaces, no '+'. x/mod note applies the same rule.
func isValidKeyName(name string) bool {
	return name != "" && utf8.ValidString(name) && strings.IndexFunc(name, unicode.IsSpace) < 0 && !strings.Contains(name, "+")
}

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrMalformedRequest, fmt.Sprintf(format, args...))
}

// abbreviate shortens s for an error message; callers quote it with %q.
func abbreviate(s string) string {
	if len(s) > 64 {
		return s[:61] + "..."
	}
	return s
}
