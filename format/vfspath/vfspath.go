// Package vfspath is the syntax of the agent file system (Agent OS,
// "Virtual File System"): every agent has a tree
//
//	/agent/{agent_id}/
//	├── mem/working/        ephemeral: its view starts empty when the agent is resumed
//	├── mem/episodic/
//	├── mem/semantic/
//	├── state/checkpoints/
//	├── policy/active.json  read-only view of the log
//	├── policy/history.json read-only view of the log
//	├── ipc/inbox/          other agents write here, with a grant
//	├── ipc/outbox/         read-only: what the agent wrote to others' inboxes
//	└── audit/events.jsonl  read-only view of the log
//
// A path has three spellings, all parsed here and nowhere else: the MCP
// resource URI "vfs://{agent}/{path}", the action target the log records
// "vfs/{agent}/{path}", and an agent with a path relative to its tree. A
// path names the tree's root, one of its directories, one of its three
// read-only files, or a file under a writable directory (one to
// MaxDepth segments of MaxName bytes of [A-Za-z0-9._-], none "." or "..").
// Anything else is refused with an error that says why; a parsed path has
// one spelling, so equal paths are equal strings.
//
// The package holds no storage: the kernel folds writes (actions on these
// targets) into the tree, the server and the clients parse what people
// type with it.
package vfspath

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/annal-dev/annal/format/oid"
)

// Scheme starts a VFS resource URI; TargetRoot starts the target of an
// action on a VFS file.
const (
	Scheme     = "vfs://"
	TargetRoot = "vfs/"
)

// Limits on a path.
const (
	// MaxName bounds one segment of a file's name.
	MaxName = 128
	// MaxDepth bounds the segments of a file's name under its directory.
	MaxDepth = 8
	// MaxPath bounds a path relative to the tree.
	MaxPath = 512
	// MaxContent bounds what one write stores.
	MaxContent = 1 << 20
)

// Errors a path is refused with; every refusal wraps one of them.
var (
	// ErrInvalid: not a path of the tree.
	ErrInvalid = errors.New("not a path of the agent file system")
	// ErrReadOnly: a path that is a view of the log, or a directory.
	ErrReadOnly = errors.New("read-only")
)

// Reserved is an agent id that has no tree: vfs://sessions/ names the
// files of sessions (their delta chains).
const Reserved = "sessions"

// Directories of every tree, and which of them an agent writes files in.
var (
	dirs = map[string]bool{"mem": false, "mem/working": true, "mem/episodic": true, "mem/semantic": true,
		"state": false, "state/checkpoints": true, "policy": false, "ipc": false, "ipc/inbox": true, "ipc/outbox": false, "audit": false}
	// views are the read-only files, derived from the log.
	views = map[string]bool{"policy/active.json": true, "policy/history.json": true, "audit/events.jsonl": true}
)

// The directories whose files the kernel folds from writes.
const (
	Working     = "mem/working"
	Episodic    = "mem/episodic"
	Semantic    = "mem/semantic"
	Checkpoints = "state/checkpoints"
	Inbox       = "ipc/inbox"
	Outbox      = "ipc/outbox"
	// The read-only views.
	PolicyActive  = "policy/active.json"
	PolicyHistory = "policy/history.json"
	AuditEvents   = "audit/events.jsonl"
)

// Path is a parsed path: an agent and a path relative to its tree ("" for
// the root).
type Path struct {
	Agent string
	Rel   string
}

// ParseURI parses "vfs://{agent}" or "vfs://{agent}/{path}" (a trailing
// '/' names the same directory).
func ParseURI(uri string) (Path, error) {
	rest, ok := strings.CutPrefix(uri, Scheme)
	if !ok {
		return Path{}, fmt.Errorf("%w: %q does not start with %s", ErrInvalid, clip(uri), Scheme)
	}
	agent, rel, _ := strings.Cut(rest, "/")
	return Parse(agent, strings.TrimSuffix(rel, "/"))
}

// ParseTarget parses the target of an action on the tree,
// "vfs/{agent}/{path}". ok is false when the target is not in the vfs/
// namespace at all.
func ParseTarget(target string) (p Path, ok bool, err error) {
	rest, ok := strings.CutPrefix(target, TargetRoot)
	if !ok {
		return Path{}, false, nil
	}
	agent, rel, _ := strings.Cut(rest, "/")
	p, err = Parse(agent, rel)
	return p, true, err
}

// Parse checks agent and rel, a path relative to agent's tree with no
// leading or trailing '/'.
func Parse(agent, rel string) (Path, error) {
	if err := checkAgent(agent); err != nil {
		return Path{}, err
	}
	p := Path{Agent: agent, Rel: rel}
	if _, isDir := dirs[rel]; rel == "" || isDir || views[rel] {
		return p, nil
	}
	if len(rel) > MaxPath {
		return Path{}, fmt.Errorf("%w: path is %d bytes, more than %d", ErrInvalid, len(rel), MaxPath)
	}
	dir, name := p.split()
	if dir == "" {
		return Path{}, fmt.Errorf("%w: %q is not in one of the tree's directories (%s)", ErrInvalid, clip(rel), strings.Join(DirNames(), ", "))
	}
	if err := checkName(dir, name); err != nil {
		return Path{}, err
	}
	return p, nil
}

// checkAgent: an actor id ([a-z][a-z0-9-]{0,63}), not Reserved.
func checkAgent(agent string) error {
	ok := len(agent) > 0 && len(agent) <= 64 && agent[0] >= 'a' && agent[0] <= 'z'
	for i := 1; ok && i < len(agent); i++ {
		c := agent[i]
		ok = c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-'
	}
	switch {
	case !ok:
		return fmt.Errorf("%w: agent %q is not an actor id ([a-z][a-z0-9-]{0,63})", ErrInvalid, clip(agent))
	case agent == Reserved:
		return fmt.Errorf("%w: vfs://%s/ holds the files of sessions, not an agent's tree", ErrInvalid, Reserved)
	}
	return nil
}

// checkName checks a file's name under dir: segments of [A-Za-z0-9._-].
func checkName(dir, name string) error {
	if name == "" {
		return fmt.Errorf("%w: %s/ needs a file name after it", ErrInvalid, dir)
	}
	segs := strings.Split(name, "/")
	if len(segs) > MaxDepth {
		return fmt.Errorf("%w: %s/%s has %d segments under %s/, more than %d", ErrInvalid, dir, clip(name), len(segs), dir, MaxDepth)
	}
	for _, seg := range segs {
		if err := checkSegment(dir, name, seg); err != nil {
			return err
		}
	}
	return nil
}

// checkSegment checks one segment of name: not empty, "." or "..", at
// most MaxName bytes of [A-Za-z0-9._-].
func checkSegment(dir, name, s string) error {
	switch {
	case s == "":
		return fmt.Errorf("%w: %s/%s has an empty segment", ErrInvalid, dir, clip(name))
	case s == "." || s == "..":
		return fmt.Errorf("%w: %s/%s has a %q segment", ErrInvalid, dir, clip(name), s)
	case len(s) > MaxName:
		return fmt.Errorf("%w: a segment of %s/ is %d bytes, more than %d", ErrInvalid, dir, len(s), MaxName)
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("%w: %s/%s holds %q; a name is made of A-Z a-z 0-9 . _ -", ErrInvalid, dir, clip(name), rune(c))
		}
	}
	return nil
}

// split is the tree directory a file lies in and its name under it ("",
// "" for the root, a directory or a view).
func (p Path) split() (dir, name string) {
	if _, ok := dirs[p.Rel]; ok || p.Rel == "" || views[p.Rel] {
		return "", ""
	}
	for d, writable := range dirs {
		if rest, ok := strings.CutPrefix(p.Rel, d+"/"); ok && (writable || d == Outbox) {
			return d, rest
		}
	}
	return "", ""
}

// Dir is the directory of the tree that p's file lies in ("" when p is
// the root, a directory or a view).
func (p Path) Dir() string { d, _ := p.split(); return d }

// Name is p's file name under Dir.
func (p Path) Name() string { _, n := p.split(); return n }

// IsDir reports whether p is the root or one of the tree's directories.
func (p Path) IsDir() bool {
	_, ok := dirs[p.Rel]
	return ok || p.Rel == ""
}

// IsView reports whether p is one of the read-only files derived from the
// log.
func (p Path) IsView() bool { return views[p.Rel] }

// Writable says whether an agent may write p: nil for a file under a
// writable directory, else an error wrapping ErrReadOnly that says why.
func (p Path) Writable() error {
	switch d := p.Dir(); {
	case p.IsView():
		return fmt.Errorf("%w: %s is a view of the log; it changes only as the log does", ErrReadOnly, p.URI())
	case p.IsDir():
		return fmt.Errorf("%w: %s is a directory; write a file in it", ErrReadOnly, p.URI())
	case d == Outbox:
		return fmt.Errorf("%w: %s lists what %s wrote to other agents' %s; write to vfs://<agent>/%s/<name> instead", ErrReadOnly, p.URI(), p.Agent, Inbox, Inbox)
	}
	return nil
}

// WriteType is the action type of a write to p: "create" for a message
// to an inbox, "mutate" for any other file.
func (p Path) WriteType() string {
	if p.Dir() == Inbox {
		return "create"
	}
	return "mutate"
}

// WriteRequest is the body of the action request a write of the content
// oid to p is, under envelope (empty: none named): what a signed write
// states, since the write's own body is the file's bytes, not JSON. Its
// members are those of an action request (POST /v1/actions), so the
// event the write leads to gives the signed request back like any
// action's.
func (p Path) WriteRequest(oid, envelope string) ([]byte, error) {
	return json.Marshal(struct {
		Type        string `json:"type"`
		Target      string `json:"target"`
		PayloadHash string `json:"payload_hash"`
		Envelope    string `json:"envelope,omitempty"`
	}{p.WriteType(), p.Target(), oid, envelope})
}

// APIPrefix is the path under which annald serves the trees:
// /v1/vfs/{agent}/{path}.
const APIPrefix = "/v1/vfs/"

// SignedWrite is the body of the action request a signed write of content
// to urlPath, a path under APIPrefix, states (WriteRequest), under
// envelope: what the client signs and annald checks, one computation for
// both. ok is false for a path outside APIPrefix.
func SignedWrite(urlPath, envelope string, content []byte) (body []byte, ok bool, err error) {
	rest, ok := strings.CutPrefix(urlPath, APIPrefix)
	if !ok {
		return nil, false, nil
	}
	agent, rel, _ := strings.Cut(rest, "/")
	p, err := Parse(agent, rel)
	if err != nil {
		return nil, true, err
	}
	body, err = p.WriteRequest(oid.Of(content), envelope)
	return body, true, err
}

// URI is p as an MCP resource: "vfs://{agent}/{path}".
func (p Path) URI() string {
	if p.Rel == "" {
		return Scheme + p.Agent + "/"
	}
	return Scheme + p.Agent + "/" + p.Rel
}

// Target is the target of an action that writes p: "vfs/{agent}/{path}".
func (p Path) Target() string { return TargetRoot + p.Agent + "/" + p.Rel }

// TargetPrefix is the start of every target in agent's tree.
func TargetPrefix(agent string) string { return TargetRoot + agent + "/" }

// DirNames lists the tree's directories, in the order of the tree.
func DirNames() []string {
	return []string{"mem", Working, Episodic, Semantic, "state", Checkpoints, "policy", "ipc", Inbox, Outbox, "audit"}
}

// Under reports whether p lies at or under directory dir (a Rel).
func (p Path) Under(dir string) bool {
	return dir == "" || p.Rel == dir || strings.HasPrefix(p.Rel, dir+"/")
}

// clip bounds what an error quotes of outside input.
func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}
