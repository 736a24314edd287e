// Package oid names bytes the way the log records them: an OID is
// "sha256:" followed by the 64 lower-case hex digits of the SHA-256 of the
// bytes. Execute intents and results, blob references and sealed payloads
// all carry OIDs; the blob store keeps the bytes behind them. The package
// holds no storage code, so a client or verifier can name and check bytes
// without importing a store.
package oid

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// Prefix starts every OID: the name of its hash.
const Prefix = "sha256:"

// Of is the OID of data.
func Of(data []byte) string {
	sum := sha256.Sum256(data)
	return Prefix + hex.EncodeToString(sum[:])
}

// Valid reports whether s is "sha256:" and 64 lower-case hex digits.
func Valid(s string) bool {
	h, ok := strings.CutPrefix(s, Prefix)
	if !ok || len(h) != 64 {
		return false
	}
	for i := 0; i < len(h); i++ {
		if c := h[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}
