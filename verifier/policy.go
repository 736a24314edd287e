package verifier

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"math"
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
	if err := checkPolicyText(text); err != nil {
		return nil, err
	}
	pp := &policyParser{p: &Policy{witnesses: map[string]note.Verifier{}, groups: map[string]policyGroup{}}, keys: map[string]bool{}}
	for n, line := range strings.Split(string(text), "\n") {
		fields := policyFields(line)
		if len(fields) == 0 {
			continue
		}
		if err := pp.line(fields); err != nil {
			return nil, fail(CheckPolicy, "line %d: %v", n+1, err)
		}
	}
	return pp.finish()
}

// checkPolicyText refuses an oversized policy and control characters.
func checkPolicyText(text []byte) error {
	if len(text) > MaxPolicySize {
		return fail(CheckPolicy, "policy is %d bytes, more than %d", len(text), MaxPolicySize)
	}
	for i, c := range text {
		if c < 0x20 && c != '\t' && c != '\n' || c == 0x7f {
			return fail(CheckPolicy, "policy has the control character %#02x at byte %d", c, i)
		}
	}
	return nil
}

// policyFields are a line's items; none for a blank or comment line (one
// whose first item starts with "#").
func policyFields(line string) []string {
	if i := strings.IndexByte(line, '#'); i >= 0 && strings.TrimLeft(line[:i], " \t") == "" {
		return nil
	}
	return strings.FieldsFunc(line, func(r rune) bool { return r == ' ' || r == '\t' })
}

// policyLines are the kinds of policy line: how many items each has, the
// line's syntax for the error that says otherwise, and its parser.
var policyLines = map[string]struct {
	min, max int
	usage    string
	parse    func(pp *policyParser, fields []string) error
}{
	"log":     {2, 3, "log <vkey> [<url>]", (*policyParser).log},
	"witness": {3, 4, "witness <name> <vkey> [<url>]", (*policyParser).witness},
	"group":   {4, math.MaxInt, "group <name> <all|any|k> <name>...", (*policyParser).group},
	"quorum":  {2, 2, "quorum <name>", (*policyParser).quorum},
}

// policyParser builds a Policy line by line.
type policyParser struct {
	p    *Policy
	keys map[string]bool // public keys seen, to refuse duplicates
}

func (pp *policyParser) line(fields []string) error {
	kind, ok := policyLines[fields[0]]
	switch {
	case !ok:
		return fmt.Errorf("unknown keyword %q", fields[0])
	case len(fields) < kind.min || len(fields) > kind.max:
		return fmt.Errorf("want: %s", kind.usage)
	}
	return kind.parse(pp, fields)
}

// log: log <vkey> [<url>]
func (pp *policyParser) log(fields []string) error {
	v, err := LogVerifier(fields[1])
	if err != nil {
		return fmt.Errorf("log key: %v", err)
	}
	if err := pp.newKey(fields[1]); err != nil {
		return err
	}
	if len(pp.p.Logs) == MaxPolicyLogs {
		return fmt.Errorf("more than %d logs", MaxPolicyLogs)
	}
	pp.p.Logs, pp.p.LogKeys = append(pp.p.Logs, v), append(pp.p.LogKeys, fields[1])
	return nil
}

// witness: witness <name> <vkey> [<url>]
func (pp *policyParser) witness(fields []string) error {
	name := fields[1]
	if err := pp.newName(name); err != nil {
		return err
	}
	v, err := witnessVerifier(fields[2])
	if err != nil {
		return fmt.Errorf("witness key: %v", err)
	}
	if err := pp.newKey(fields[2]); err != nil {
		return err
	}
	if len(pp.p.witnesses) == MaxPolicyWitness {
		return fmt.Errorf("more than %d witnesses", MaxPolicyWitness)
	}
	pp.p.witnesses[name] = v
	return nil
}

// group: group <name> <all|any|k> <name>...
func (pp *policyParser) group(fields []string) error {
	name, members := fields[1], fields[3:]
	if err := pp.newName(name); err != nil {
		return err
	}
	seen := map[string]bool{}
	for _, m := range members {
		if !pp.defined(m) {
			return fmt.Errorf("member %q is not defined on an earlier line", m)
		}
		if seen[m] {
			return fmt.Errorf("member %q is listed twice", m)
		}
		seen[m] = true
	}
	k, err := groupThreshold(fields[2], len(members))
	if err != nil {
		return err
	}
	if len(pp.p.groups) == MaxPolicyGroups {
		return fmt.Errorf("more than %d groups", MaxPolicyGroups)
	}
	pp.p.groups[name] = policyGroup{k: k, members: members}
	return nil
}

// groupThreshold is how many of n members a group's k item requires.
func groupThreshold(k string, n int) (int, error) {
	switch k {
	case "all":
		return n, nil
	case "any":
		return 1, nil
	}
	v, err := checkpoints.ParseDecimal(k)
	if err != nil || v < 1 || v > uint64(n) {
		return 0, fmt.Errorf("threshold %q is not a number from 1 to %d", k, n)
	}
	return int(v), nil
}

// quorum: quorum <name>
func (pp *policyParser) quorum(fields []string) error {
	if pp.p.quorum != "" {
		return errors.New("a second quorum line")
	}
	if fields[1] != "none" && !pp.defined(fields[1]) {
		return fmt.Errorf("quorum %q is not defined on an earlier line", fields[1])
	}
	pp.p.quorum = fields[1]
	return nil
}

func (pp *policyParser) defined(name string) bool {
	_, w := pp.p.witnesses[name]
	_, g := pp.p.groups[name]
	return w || g
}

// newName checks the name a witness or group line defines.
func (pp *policyParser) newName(name string) error {
	if err := checkPolicyName(name); err != nil {
		return err
	}
	if pp.defined(name) {
		return fmt.Errorf("%q is defined twice", name)
	}
	return nil
}

// newKey records a log or witness key, which no earlier line may hold.
func (pp *policyParser) newKey(vkey string) error {
	if pp.keys[publicKeyOf(vkey)] {
		return errors.New("a duplicate key")
	}
	pp.keys[publicKeyOf(vkey)] = true
	return nil
}

// finish checks what the whole policy must have.
func (pp *policyParser) finish() (*Policy, error) {
	if pp.p.quorum == "" {
		return nil, fail(CheckPolicy, "policy has no quorum line")
	}
	if len(pp.p.Logs) == 0 {
		return nil, fail(CheckPolicy, "policy names no log: Annal verifies proofs of one log, named by a log line")
	}
	return pp.p, nil
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

// publicKeyOf is the key material of a vkey ("name+id+key"), without
// name and key id, so that one key under two names counts as a duplicate.
// The key is base64, whose alphabet has '+': it is what follows the
// second '+', not the last (a name has none).
func publicKeyOf(vkey string) string {
	_, rest, ok := strings.Cut(vkey, "+")
	if !ok {
		return vkey
	}
	if _, key, ok := strings.Cut(rest, "+"); ok {
		return key
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
