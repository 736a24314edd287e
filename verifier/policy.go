package verifier

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"slices"
	"strings"

	"github.com/annal-dev/annal/checkpoints"
	fnote "github.com/transparency-dev/formats/note"
	"golang.org/x/mod/sumdb/note"
)

// CheckPolicy names a failed policy check: a malformed policy, or a
// checkpoint without the quorum of cosignatures it requires.
const CheckPolicy Check = "policy"

// Limits on a policy (c2sp.org/tlog-policy recommends supporting at least 32 of each).
const (
	MaxPolicySize     = 64 << 10
	MaxPolicyLogs     = 64
	MaxPolicyWitness  = 64
	MaxPolicyGroups   = 64
	maxPolicyNameSize = 255
)

// Policy is a parsed c2sp.org/tlog-policy: the logs it accepts, its
// witnesses and groups, and the quorum a checkpoint's cosignatures must
// meet.
type Policy struct {
	Logs      []note.Verifier
	LogKeys   []string
	witnesses map[string]note.Verifier
	groups    map[string]policyGroup
	quorum    string // a witness or group name, or "none"
}

type policyGroup struct {
	k       int
	members []string
}

// ParsePolicy parses a c2sp.org/tlog-policy strictly: space- and
// tab-separated items, "#" comments, only tab, newline and printable
// octets; log keys must be Ed25519 (Annal logs), witness keys cosignature/v1;
// names defined before use, each a group member at most once, 1 <= k <= n,
// no duplicate keys, exactly one quorum line.
func ParsePolicy(text []byte) (*Policy, error) {
	if len(text) > MaxPolicySize {
		return nil, fail(CheckPolicy, "policy is %d bytes, more than %d", len(text), MaxPolicySize)
	}
	for i, c := range text {
		if c < 0x20 && c != '\t' && c != '\n' || c == 0x7f {
			return nil, fail(CheckPolicy, "policy has the control character %#02x at byte %d", c, i)
		}
	}
	p := &Policy{witnesses: map[string]note.Verifier{}, groups: map[string]policyGroup{}}
	keys := map[string]bool{} // public keys seen, to refuse duplicates
	defined := func(name string) bool {
		_, w := p.witnesses[name]
		_, g := p.groups[name]
		return w || g
	}
	for n, line := range strings.Split(string(text), "\n") {
		if i := strings.IndexByte(line, '#'); i >= 0 && strings.TrimLeft(line[:i], " \t") == "" {
			continue
		}
		fields := strings.FieldsFunc(line, func(r rune) bool { return r == ' ' || r == '\t' })
		if len(fields) == 0 {
			continue
		}
		bad := func(format string, args ...any) error {
			return fail(CheckPolicy, "line %d: %s", n+1, fmt.Sprintf(format, args...))
		}
		switch fields[0] {
		case "log":
			if len(fields) < 2 || len(fields) > 3 {
				return nil, bad("want: log <vkey> [<url>]")
			}
			v, err := LogVerifier(fields[1])
			if err != nil {
				return nil, bad("log key: %v", err)
			}
			if keys[publicKeyOf(fields[1])] {
				return nil, bad("a duplicate key")
			}
			keys[publicKeyOf(fields[1])] = true
			if len(p.Logs) == MaxPolicyLogs {
				return nil, bad("more than %d logs", MaxPolicyLogs)
			}
			p.Logs, p.LogKeys = append(p.Logs, v), append(p.LogKeys, fields[1])
		case "witness":
			if len(fields) < 3 || len(fields) > 4 {
				return nil, bad("want: witness <name> <vkey> [<url>]")
			}
			name := fields[1]
			if err := checkPolicyName(name); err != nil {
				return nil, bad("%v", err)
			}
			if defined(name) {
				return nil, bad("%q is defined twice", name)
			}
			v, err := witnessVerifier(fields[2])
			if err != nil {
				return nil, bad("witness key: %v", err)
			}
			if keys[publicKeyOf(fields[2])] {
				return nil, bad("a duplicate key")
			}
			keys[publicKeyOf(fields[2])] = true
			if len(p.witnesses) == MaxPolicyWitness {
				return nil, bad("more than %d witnesses", MaxPolicyWitness)
			}
			p.witnesses[name] = v
		case "group":
			if len(fields) < 4 {
				return nil, bad("want: group <name> <all|any|k> <name>...")
			}
			name, members := fields[1], fields[3:]
			if err := checkPolicyName(name); err != nil {
				return nil, bad("%v", err)
			}
			if defined(name) {
				return nil, bad("%q is defined twice", name)
			}
			seen := map[string]bool{}
			for _, m := range members {
				if !defined(m) {
					return nil, bad("member %q is not defined on an earlier line", m)
				}
				if seen[m] {
					return nil, bad("member %q is listed twice", m)
				}
				seen[m] = true
			}
			k := 0
			switch fields[2] {
			case "all":
				k = len(members)
			case "any":
				k = 1
			default:
				v, err := checkpoints.ParseDecimal(fields[2])
				if err != nil || v < 1 || v > uint64(len(members)) {
					return nil, bad("threshold %q is not a number from 1 to %d", fields[2], len(members))
				}
				k = int(v)
			}
			if len(p.groups) == MaxPolicyGroups {
				return nil, bad("more than %d groups", MaxPolicyGroups)
			}
			p.groups[name] = policyGroup{k: k, members: members}
		case "quorum":
			if len(fields) != 2 {
				return nil, bad("want: quorum <name>")
			}
			if p.quorum != "" {
				return nil, bad("a second quorum line")
			}
			if fields[1] != "none" && !defined(fields[1]) {
				return nil, bad("quorum %q is not defined on an earlier line", fields[1])
			}
			p.quorum = fields[1]
		default:
			return nil, bad("unknown keyword %q", fields[0])
		}
	}
	if p.quorum == "" {
		return nil, fail(CheckPolicy, "policy has no quorum line")
	}
	if len(p.Logs) == 0 {
		return nil, fail(CheckPolicy, "policy names no log: Annal verifies proofs of one log, named by a log line")
	}
	return p, nil
}

func checkPolicyName(name string) error {
	if name == "none" {
		return fmt.Errorf("%q is predefined", name)
	}
	if len(name) > maxPolicyNameSize {
		return fmt.Errorf("name longer than %d bytes", maxPolicyNameSize)
	}
	return nil
}

// publicKeyOf is the key material of a vkey, without name and key id, so
// that one key under two names counts as a duplicate.
func publicKeyOf(vkey string) string {
	if i := strings.LastIndexByte(vkey, '+'); i >= 0 {
		return vkey[i+1:]
	}
	return vkey
}

// PolicyResult says which policy log signed a checkpoint and which
// witnesses cosigned it.
type PolicyResult struct {
	Checkpoint *checkpoints.SignedCheckpoint
	LogKey     string
	Cosigners  []string // witness names with a valid cosignature, sorted
}

// OpenCheckpoint opens a signed checkpoint under the policy: it must be
// signed by one of the policy's logs (whose key name is its origin), every
// signature by a key the policy knows must verify, and the valid
// cosignatures must meet the quorum.
func (p *Policy) OpenCheckpoint(signed []byte) (*PolicyResult, error) {
	body, _, found := bytes.Cut(signed, []byte("\n\n"))
	origin, _, _ := bytes.Cut(body, []byte("\n"))
	if !found {
		return nil, fail(CheckCheckpoint, "checkpoint is not a signed note")
	}
	var logKey note.Verifier
	var logVKey string
	for i, v := range p.Logs {
		if v.Name() == string(origin) {
			logKey, logVKey = v, p.LogKeys[i]
		}
	}
	if logKey == nil {
		return nil, fail(CheckCheckpoint, "checkpoint origin %q is not a log of the policy", abbreviate(string(origin)))
	}
	names := make([]string, 0, len(p.witnesses))
	verifiers := make([]note.Verifier, 0, len(p.witnesses))
	for name, v := range p.witnesses {
		names = append(names, name)
		verifiers = append(verifiers, v)
	}
	cp, err := checkpoints.OpenCheckpoint(signed, logKey, verifiers...)
	if err != nil {
		return nil, wrap(CheckCheckpoint, err)
	}
	signedBy := map[string]bool{}
	for _, s := range cp.Note.Sigs {
		for i, v := range verifiers {
			if s.Name == v.Name() && s.Hash == v.KeyHash() {
				signedBy[names[i]] = true
			}
		}
	}
	res := &PolicyResult{Checkpoint: cp, LogKey: logVKey}
	for name := range signedBy {
		res.Cosigners = append(res.Cosigners, name)
	}
	slices.Sort(res.Cosigners)
	if !p.witnessed(p.quorum, signedBy) {
		return nil, fail(CheckPolicy, "the checkpoint's cosignatures (%s) do not meet the quorum %q", strings.Join(res.Cosigners, ", "), p.quorum)
	}
	return res, nil
}

// witnessed evaluates a quorum name against the witnesses that cosigned.
func (p *Policy) witnessed(name string, signedBy map[string]bool) bool {
	if name == "none" {
		return true
	}
	if _, ok := p.witnesses[name]; ok {
		return signedBy[name]
	}
	g := p.groups[name]
	n := 0
	for _, m := range g.members {
		if p.witnessed(m, signedBy) {
			n++
		}
	}
	return n >= g.k
}

// LogKey returns the verifier key of the policy's log with this origin.
func (p *Policy) LogKey(origin string) (string, bool) {
	for i, v := range p.Logs {
		if v.Name() == origin {
			return p.LogKeys[i], true
		}
	}
	return "", false
}

// VerifyProofWithPolicy is VerifyProof with the log key taken from a
// policy, and the checkpoint required to meet the policy's quorum.
func VerifyProofWithPolicy(entry, tlogProof []byte, p *Policy) (*ProofResult, *PolicyResult, error) {
	tp, err := checkpoints.ParseTLogProof(tlogProof)
	if err != nil {
		return nil, nil, wrap(CheckFormat, err)
	}
	pr, err := p.OpenCheckpoint(tp.Checkpoint)
	if err != nil {
		return nil, nil, err
	}
	res, err := VerifyProof(entry, tlogProof, pr.LogKey)
	if err != nil {
		return nil, nil, err
	}
	return res, pr, nil
}

// The key types of c2sp.org/tlog-cosignature a witness key may have.
const (
	keyTypeEd25519       = 0x01 // a log's (signed-note Ed25519), never a witness's
	keyTypeCosignatureV1 = 0x04
	keyTypeMLDSA44       = 0x06
)

// witnessVerifier reads a witness's verifier key strictly: a
// cosignature/v1 (Ed25519) or ML-DSA-44 key whose key ID is the one its
// name and key give. The library it wraps takes the ID as given and a
// plain Ed25519 key too, which would let a policy name a key under an ID
// no cosignature carries, or a log's key as a witness's.
func witnessVerifier(vkey string) (note.Verifier, error) {
	name, rest, _ := strings.Cut(vkey, "+")
	id, key64, _ := strings.Cut(rest, "+")
	key, err := base64.StdEncoding.Strict().DecodeString(key64)
	if err != nil || len(key) == 0 || len(id) != 8 || name == "" {
		return nil, fmt.Errorf("%q is not a verifier key <name>+<8 hex key ID>+<base64 key>", abbreviate(vkey))
	}
	switch key[0] {
	case keyTypeCosignatureV1, keyTypeMLDSA44:
	case keyTypeEd25519:
		return nil, fmt.Errorf("%q is a plain Ed25519 key (type 0x01), a log's: a witness key is cosignature/v1 (0x04) or ML-DSA-44 (0x06)", abbreviate(vkey))
	default:
		return nil, fmt.Errorf("%q has key type %#02x; a witness key is cosignature/v1 (0x04) or ML-DSA-44 (0x06)", abbreviate(vkey), key[0])
	}
	v, err := fnote.NewVerifierForCosignatureV1(vkey)
	if err != nil {
		return nil, err
	}
	if want := fmt.Sprintf("%08x", v.KeyHash()); id != want {
		return nil, fmt.Errorf("%q names key ID %s, but its name and key give %s", abbreviate(vkey), id, want)
	}
	return v, nil
}
