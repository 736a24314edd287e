package witness

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	voi "github.com/oasisprotocol/curve25519-voi/primitives/ed25519"
)

// ed25519CosignerV1 is the cosignature/v1 Ed25519 signer of formats'
// NewSignerForCosignatureV1: the same name and key hash, and the same
// bytes (timestamp || Ed25519 signature of "cosignature/v1\ntime <t>\n"
// and the note's text; Ed25519 signatures are deterministic), signed with
// curve25519-voi in half the time (go test ./witness -bench Cosign).
// TestEd25519CosignerMatchesFormats compares the two byte for byte.
type ed25519CosignerV1 struct {
	name string
	hash uint32
	key  voi.PrivateKey
	now  func() time.Time
}

func newEd25519CosignerV1(name string, hash uint32, seed []byte) *ed25519CosignerV1 {
	return &ed25519CosignerV1{name: name, hash: hash, key: voi.NewKeyFromSeed(seed), now: time.Now}
}

func (s *ed25519CosignerV1) Name() string    { return s.name }
func (s *ed25519CosignerV1) KeyHash() uint32 { return s.hash }

func (s *ed25519CosignerV1) Sign(msg []byte) ([]byte, error) {
	// formats refuses a note of fewer than three lines (two line feeds).
	if bytes.Count(msg, []byte("\n")) < 2 {
		return nil, errors.New("cosigned note format invalid")
	}
	t := uint64(s.now().Unix())
	signed := voi.Sign(s.key, fmt.Appendf(nil, "cosignature/v1\ntime %d\n%s", t, msg))
	return append(binary.BigEndian.AppendUint64(make([]byte, 0, 8+len(signed)), t), signed...), nil
}
