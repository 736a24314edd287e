package checkpoints

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
)

// MarshalHashes writes a proof as one standard base64 hash per line, each
// line ending in a newline. It is the text form of consistency proofs that
// Annal serves and annal-verify reads.
func MarshalHashes(hashes [][sha256.Size]byte) []byte {
	var b bytes.Buffer
	for _, h := range hashes {
		b.WriteString(base64.StdEncoding.EncodeToString(h[:]))
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// ParseHashes reads what MarshalHashes writes, strictly: every line a
// canonical base64 SHA-256 hash ending in a newline, at most MaxProofHashes.
func ParseHashes(text []byte) ([][sha256.Size]byte, error) {
	if len(text) == 0 {
		return nil, nil
	}
	if text[len(text)-1] != '\n' {
		return nil, fmt.Errorf("proof does not end with a newline")
	}
	lines := bytes.Split(text[:len(text)-1], []byte("\n"))
	if len(lines) > MaxProofHashes {
		return nil, fmt.Errorf("proof has %d hashes, more than %d", len(lines), MaxProofHashes)
	}
	out := make([][sha256.Size]byte, len(lines))
	for i, l := range lines {
		h, err := ParseHash(string(l))
		if err != nil {
			return nil, fmt.Errorf("proof line %d: %w", i+1, err)
		}
		out[i] = h
	}
	return out, nil
}
