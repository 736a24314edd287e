package witness

import (
	"encoding/base64"
	"strings"
	"sync"

	"github.com/annal-dev/annal/checkpoints"
	"github.com/oasisprotocol/curve25519-voi/primitives/ed25519"
	"golang.org/x/mod/sumdb/note"
)

// fastEd25519 is a log's Ed25519 note verifier that checks signatures with
// curve25519-voi's expanded public key, made once per key, under the
// standard library's rules (VerifyOptionsStdLib: cofactorless, as
// crypto/ed25519, which note.NewVerifier's verifier calls). Why: checking
// the log's signature was a sixth of a cosignature's CPU, and this takes
// half the time (go test ./witness -bench Ed25519Verify); what it accepts
// is what crypto/ed25519 accepts (FuzzFastEd25519AgreesWithStdlib).
type fastEd25519 struct {
	name string
	hash uint32
	key  *ed25519.ExpandedPublicKey
}

var stdlibRules = &ed25519.Options{Verify: ed25519.VerifyOptionsStdLib}

func (v *fastEd25519) Name() string    { return v.name }
func (v *fastEd25519) KeyHash() uint32 { return v.hash }
func (v *fastEd25519) Verify(msg, sig []byte) bool {
	return len(sig) == ed25519.SignatureSize && ed25519.VerifyExpandedWithOptions(v.key, msg, sig, stdlibRules)
}

// expandedKeys caches the expanded public key of each Ed25519 verifier
// key seen (the logs' configured keys: a handful each), by the key's
// text. Expanding costs about as much as a verification.
var expandedKeys struct {
	sync.Mutex
	m map[string]*fastEd25519
}

// maxExpandedKeys bounds expandedKeys; past it the cache starts over.
const maxExpandedKeys = 4096

// withFastEd25519 returns v, the verifier note parsing made of vkey, or,
// when vkey is an Ed25519 key, one that verifies the same signatures
// faster.
func withFastEd25519(vkey string, v note.Verifier) note.Verifier {
	expandedKeys.Lock()
	defer expandedKeys.Unlock()
	if f, ok := expandedKeys.m[vkey]; ok {
		return f
	}
	parts := strings.SplitN(vkey, "+", 3) // base64 holds "+" too
	if len(parts) != 3 {
		return v
	}
	raw, err := base64.StdEncoding.DecodeString(parts[2])
	if err != nil || len(raw) != 1+ed25519.PublicKeySize || raw[0] != checkpoints.Ed25519 {
		return v
	}
	key, err := ed25519.NewExpandedPublicKey(ed25519.PublicKey(raw[1:]))
	if err != nil {
		return v
	}
	f := &fastEd25519{name: v.Name(), hash: v.KeyHash(), key: key}
	if expandedKeys.m == nil || len(expandedKeys.m) >= maxExpandedKeys {
		expandedKeys.m = map[string]*fastEd25519{}
	}
	expandedKeys.m[vkey] = f
	return f
}
