package witness

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"filippo.io/mldsa"
	fnote "github.com/transparency-dev/formats/note"
	bolt "go.etcd.io/bbolt"
	"golang.org/x/mod/sumdb/note"
)

// MaxPeers bounds the peers of a witness: a gossip round fetches one
// checkpoint per peer and log.
const MaxPeers = 64

var (
	// ErrUnknownPeer is returned for a peer name that is not configured.
	// errors.Is(ErrUnknownPeer, fs.ErrNotExist) holds.
	ErrUnknownPeer error = notExistError("unknown peer")
	// ErrPeerExists is returned by AddPeer for a peer name already
	// configured.
	ErrPeerExists = errors.New("peer is already configured")
	// ErrInvalidPeerConfig wraps every validation error of a PeerConfig,
	// and the refusal of a peer beyond MaxPeers.
	ErrInvalidPeerConfig = errors.New("invalid peer configuration")
)

// PeerConfig is another witness this one gossips with.
type PeerConfig struct {
	// Name is the peer's witness name: the name of its verifier key. It
	// identifies the peer in the state, in the commands and in evidence
	// observations.
	Name string `json:"name"`
	// URL is the peer's base URL. Its monitoring endpoint for a log is
	// <URL>/<lowercase hex SHA-256(origin)>/checkpoint.
	URL string `json:"url"`
	// Key is the peer's cosignature/v1 verifier key (Ed25519, signature
	// type 0x04), as its serve command prints it.
	Key string `json:"key"`
}

// NewPeerConfig makes a PeerConfig from a base URL and a verifier key,
// naming the peer after its key, and validates it.
func NewPeerConfig(baseURL, key string) (PeerConfig, error) {
	p := PeerConfig{URL: strings.TrimSpace(baseURL), Key: strings.TrimSpace(key)}
	if name, _, ok := strings.Cut(p.Key, "+"); ok {
		p.Name = name
	}
	return p, p.Validate()
}

// Validate checks a PeerConfig: an absolute http(s) URL without query or
// fragment, a cosignature/v1 Ed25519 verifier key whose key ID matches
// its name and key, and a Name equal to the key's name.
func (p PeerConfig) Validate() error {
	if _, err := p.verifier(); err != nil {
		return err
	}
	u, err := url.Parse(p.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || len(p.URL) > MaxLineLength {
		return fmt.Errorf("%w: peer URL %q is not an absolute http(s) URL without query or fragment", ErrInvalidPeerConfig, abbreviate(p.URL))
	}
	return nil
}

// verifier parses the peer's key: name+hash+base64(0x04 || 32-byte
// Ed25519 public key), with the hash that key's ID.
func (p PeerConfig) verifier() (note.Verifier, error) {
	parts := strings.SplitN(p.Key, "+", 3)
	if len(parts) != 3 || !isValidKeyName(parts[0]) || len(parts[1]) != 8 {
		return nil, fmt.Errorf("%w: peer key %q is not a note verifier key <name>+<8 hex digits>+<base64>", ErrInvalidPeerConfig, abbreviate(p.Key))
	}
	raw, err := base64.StdEncoding.Strict().DecodeString(parts[2])
	ed25519Key := err == nil && len(raw) == 1+ed25519.PublicKeySize && raw[0] == cosignatureV1Ed25519
	mldsaKey := err == nil && len(raw) == 1+mldsa.MLDSA44PublicKeySize && raw[0] == cosignatureMLDSA44
	if !ed25519Key && !mldsaKey {
		return nil, fmt.Errorf("%w: peer key %q is neither a cosignature/v1 Ed25519 key (signature type 0x04 and 32 bytes) nor an ML-DSA-44 key (0x06 and %d bytes)", ErrInvalidPeerConfig, abbreviate(p.Key), mldsa.MLDSA44PublicKeySize)
	}
	v, err := fnote.NewVerifierForCosignatureV1(p.Key)
	if err != nil {
		return nil, fmt.Errorf("%w: peer key %q: %v", ErrInvalidPeerConfig, abbreviate(p.Key), err)
	}
	if fmt.Sprintf("%08x", v.KeyHash()) != parts[1] {
		return nil, fmt.Errorf("%w: peer key %q: key ID %s is not %08x, the ID of that name and key (lowercase hex)", ErrInvalidPeerConfig, abbreviate(p.Key), parts[1], v.KeyHash())
	}
	if p.Name != v.Name() {
		return nil, fmt.Errorf("%w: peer name %q is not its key's name %q", ErrInvalidPeerConfig, p.Name, v.Name())
	}
	return v, nil
}

// checkpointURL is the peer's monitoring endpoint for origin.
func (p PeerConfig) checkpointURL(origin string) string {
	id := LogID(origin)
	return strings.TrimSuffix(p.URL, "/") + "/" + hex.EncodeToString(id[:]) + "/checkpoint"
}

// AddPeer configures a new peer. Its Name must be its key's name
// (NewPeerConfig sets it); it fails with ErrPeerExists if a peer of that
// name is configured, and with ErrInvalidPeerConfig beyond MaxPeers.
func (s *Store) AddPeer(p PeerConfig) error {
	p.URL, p.Key = strings.TrimSpace(p.URL), strings.TrimSpace(p.Key)
	if err := p.Validate(); err != nil {
		return err
	}
	value, err := json.Marshal(p)
	if err != nil {
		return err
	}
	return s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(peersBucket)
		if b.Get([]byte(p.Name)) != nil {
			return fmt.Errorf("%w: %q", ErrPeerExists, p.Name)
		}
		if n := b.Stats().KeyN; n >= MaxPeers {
			return fmt.Errorf("%w: this witness has %d peers already, the most it gossips with", ErrInvalidPeerConfig, n)
		}
		return b.Put([]byte(p.Name), value)
	})
}

// RemovePeer stops gossiping with the peer named name. Evidence already
// found with its help is kept.
func (s *Store) RemovePeer(name string) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(peersBucket)
		if b.Get([]byte(name)) == nil {
			return fmt.Errorf("%w: %q", ErrUnknownPeer, abbreviate(name))
		}
		return b.Delete([]byte(name))
	})
}

// Peers lists the configured peers, ordered by name.
func (s *Store) Peers() ([]PeerConfig, error) {
	var out []PeerConfig
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(peersBucket).ForEach(func(k, v []byte) error {
			var p PeerConfig
			if err := json.Unmarshal(v, &p); err != nil {
				return fmt.Errorf("peer record %q: %w", k, err)
			}
			out = append(out, p)
			return nil
		})
	})
	slices.SortFunc(out, func(a, b PeerConfig) int { return strings.Compare(a.Name, b.Name) })
	return out, err
}
