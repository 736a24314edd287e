package witness

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"filippo.io/mldsa"
	fnote "github.com/transparency-dev/formats/note"
	"golang.org/x/mod/sumdb/note"
)

// KeyFileName is the witness's private key in a data folder: one line, an
// x/mod note Ed25519 signer key ("PRIVATE+KEY+<name>+<hash>+<base64>"),
// mode 0600.
const KeyFileName = "witness.key"

// MLDSAKeyFileName is the witness's ML-DSA-44 private key in a data
// folder: one line, "PRIVATE+KEY+<name>+<key ID>+<base64 of 0x06 || seed>"
// as transparency-dev/formats' GenerateMLDSAKey writes it, mode 0600. The
// name is the Ed25519 key's: one witness, two keys.
const MLDSAKeyFileName = "witness-mldsa.key"

// Signature type bytes of witness verifier keys (c2sp.org/signed-note,
// "Signature types").
const (
	cosignatureV1Ed25519 = 0x04
	cosignatureMLDSA44   = 0x06
)

// Cosigner signs checkpoints with the witness key as c2sp.org/tlog-cosignature
// cosignature/v1 (Ed25519), and, when it has one, with its ML-DSA-44 key
// too: every cosignature it makes is then two signature lines, and a log or
// client trusts the witness by either key.
type Cosigner struct {
	signer      *ed25519CosignerV1
	verifierKey string

	mldsa            *mldsaSigner // nil: Ed25519 only
	mldsaVerifierKey string
}

// NewCosigner makes a Cosigner from an x/mod note Ed25519 signer key.
func NewCosigner(skey string) (*Cosigner, error) {
	skey = strings.TrimSpace(skey)
	// x/mod note accepts only Ed25519 (0x01) signer keys: this refuses any
	// other algorithm that formats' cosignature signer would also take.
	if _, err := note.NewSigner(skey); err != nil {
		return nil, fmt.Errorf("witness key is not an x/mod note Ed25519 signer key: %w", err)
	}
	signer, err := fnote.NewSignerForCosignatureV1(skey)
	if err != nil {
		return nil, fmt.Errorf("witness key: %w", err)
	}
	// PRIVATE+KEY+<name>+<hash>+<base64>: the name has no '+', the base64
	// may.
	parts := strings.SplitN(skey, "+", 5)
	seed, err := base64.StdEncoding.DecodeString(parts[len(parts)-1])
	if len(parts) != 5 || err != nil || len(seed) != 1+ed25519.SeedSize {
		return nil, errors.New("witness key: malformed Ed25519 seed")
	}
	pub := ed25519.NewKeyFromSeed(seed[1:]).Public().(ed25519.PublicKey)
	vkey := fmt.Sprintf("%s+%08x+%s", signer.Name(), signer.KeyHash(),
		base64.StdEncoding.EncodeToString(append([]byte{cosignatureV1Ed25519}, pub...)))
	return &Cosigner{signer: newEd25519CosignerV1(signer.Name(), signer.KeyHash(), seed[1:]), verifierKey: vkey}, nil
}

// WithMLDSA returns a Cosigner that signs with c's Ed25519 key and with the
// ML-DSA-44 signer key mldsaKey (c2sp.org/tlog-cosignature, type 0x06),
// which must bear the same name: both keys are the one witness.
func (c *Cosigner) WithMLDSA(mldsaKey string) (*Cosigner, error) {
	mldsaKey = strings.TrimSpace(mldsaKey)
	signer, err := fnote.NewMLDSASigner(mldsaKey)
	if err != nil {
		return nil, fmt.Errorf("witness ML-DSA-44 key is not an ML-DSA-44 signer key: %w", err)
	}
	if signer.Name() != c.Name() {
		return nil, fmt.Errorf("witness ML-DSA-44 key is named %q, the Ed25519 key %q: both keys of a witness bear its one name", signer.Name(), c.Name())
	}
	priv, err := mldsa.NewPrivateKey(mldsa.MLDSA44(), mldsaSeed(mldsaKey))
	if err != nil {
		return nil, fmt.Errorf("witness ML-DSA-44 key: %w", err)
	}
	vkey := fmt.Sprintf("%s+%08x+%s", signer.Name(), signer.KeyHash(),
		base64.StdEncoding.EncodeToString(append([]byte{cosignatureMLDSA44}, priv.PublicKey().Bytes()...)))
	fast, err := newMLDSASigner(signer.Name(), signer.KeyHash(), mldsaSeed(mldsaKey))
	if err != nil {
		return nil, fmt.Errorf("witness ML-DSA-44 key: %w", err)
	}
	both := *c
	both.mldsa, both.mldsaVerifierKey = fast, vkey
	return &both, nil
}

// mldsaSeed is the key bytes of an ML-DSA-44 signer key NewMLDSASigner
// accepted (so the split cannot fail).
func mldsaSeed(skey string) []byte {
	parts := strings.SplitN(skey, "+", 5)
	raw, _ := base64.StdEncoding.DecodeString(parts[len(parts)-1])
	return raw[1:]
}

// Name is the witness's key name, the name on its cosignature lines.
func (c *Cosigner) Name() string { return c.signer.Name() }

// VerifierKey is the cosignature/v1 verifier key (signature type 0x04) that
// logs and clients configure to check this witness's cosignatures, e.g. in a
// c2sp.org/tlog-policy "witness" line.
func (c *Cosigner) VerifierKey() string { return c.verifierKey }

// MLDSAVerifierKey is the ML-DSA-44 verifier key (signature type 0x06) of
// the witness, or "" when it signs with Ed25519 only.
func (c *Cosigner) MLDSAVerifierKey() string { return c.mldsaVerifierKey }

// VerifierKeys are all the verifier keys the witness signs with: the
// Ed25519 one first.
func (c *Cosigner) VerifierKeys() []string {
	if c.mldsa == nil {
		return []string{c.verifierKey}
	}
	return []string{c.verifierKey, c.mldsaVerifierKey}
}

// Signer is the note.Signer that produces cosignature/v1 signatures.
func (c *Cosigner) Signer() note.Signer { return c.signer }

// Signers are the note.Signers of every key, in the order of VerifierKeys:
// a cosignature is one line by each.
func (c *Cosigner) Signers() []note.Signer {
	if c.mldsa == nil {
		return []note.Signer{c.signer}
	}
	return []note.Signer{c.signer, c.mldsa}
}

// LoadOrCreateKey reads the witness key at path, or, if there is none,
// generates an Ed25519 key named name and writes it there with mode 0600.
// name must be a valid note key name (non-empty, no spaces, no '+'); a
// schema-less URL such as "witness.example.com/w1" is recommended. An
// existing key file readable by group or others is refused, and so is a
// non-empty name that differs from the existing key's: a witness's name is
// part of every policy that trusts it.
func LoadOrCreateKey(path, name string) (skey string, created bool, err error) {
	skey, found, err := readKeyFile(path)
	if err != nil {
		return "", false, err
	}
	if found {
		s, err := note.NewSigner(skey)
		if err != nil {
			return "", false, fmt.Errorf("witness key %s: %w", path, err)
		}
		if name != "" && name != s.Name() {
			return "", false, fmt.Errorf("witness key %s is named %q, not %q: a witness keeps its name (omit --name, or use another data folder)", path, s.Name(), name)
		}
		return skey, false, nil
	}
	if !isValidKeyName(name) {
		return "", false, fmt.Errorf("witness name %q is not a valid key name (non-empty, no spaces, no '+')", name)
	}
	skey, _, err = note.GenerateKey(rand.Reader, name)
	if err != nil {
		return "", false, err
	}
	if err := writeKeyFile(path, skey); err != nil {
		return "", false, err
	}
	return skey, true, nil
}

// LoadOrCreateMLDSAKey reads the witness's ML-DSA-44 key at path, or, if
// there is none, generates one named name (the Ed25519 key's) and writes it
// there with mode 0600. The same rules as LoadOrCreateKey hold: a key file
// readable by others or named otherwise is refused.
func LoadOrCreateMLDSAKey(path, name string) (skey string, created bool, err error) {
	skey, found, err := readKeyFile(path)
	if err != nil {
		return "", false, err
	}
	if found {
		s, err := fnote.NewMLDSASigner(skey)
		if err != nil {
			return "", false, fmt.Errorf("witness key %s is not an ML-DSA-44 signer key: %w", path, err)
		}
		if name != s.Name() {
			return "", false, fmt.Errorf("witness key %s is named %q, not %q, the witness's name", path, s.Name(), name)
		}
		return skey, false, nil
	}
	skey, _, err = fnote.GenerateMLDSAKey(name)
	if err != nil {
		return "", false, fmt.Errorf("generate ML-DSA-44 key named %q: %w", name, err)
	}
	if err := writeKeyFile(path, skey); err != nil {
		return "", false, err
	}
	return skey, true, nil
}

// readKeyFile reads the key file at path: found is false if there is none.
// A file readable by group or others is refused: it holds a private key.
func readKeyFile(path string) (skey string, found bool, err error) {
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", false, nil
	case err != nil:
		return "", false, fmt.Errorf("read witness key: %w", err)
	}
	info, err := os.Stat(path)
	if err != nil {
		return "", false, err
	}
	if perm := info.Mode().Perm(); perm&0o077 != 0 {
		return "", false, fmt.Errorf("witness key %s has mode %04o: it must not be readable by group or others (chmod 600 %s)", path, perm, path)
	}
	return strings.TrimSpace(string(data)), true, nil
}

// writeKeyFile creates path (it must not exist) with skey and mode 0600,
// durably.
func writeKeyFile(path, skey string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("create witness key: %w", err)
	}
	if _, err := f.WriteString(skey + "\n"); err != nil {
		f.Close()
		return fmt.Errorf("write witness key: %w", err)
	}
	// The key must survive a crash: a witness that restarts with a new key
	// would be a different witness to every policy that names it.
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("sync witness key: %w", err)
	}
	if err := f.Close(); err != nil {
		return err
	}
	// And so must its name in the folder.
	if dir, err := os.Open(filepath.Dir(path)); err == nil {
		err = dir.Sync()
		dir.Close()
		if err != nil {
			return fmt.Errorf("sync data folder: %w", err)
		}
	}
	return nil
}
