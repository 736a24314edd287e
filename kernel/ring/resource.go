package ring

import (
	"fmt"
	"path"
	"strings"
)

// Resource is a resource type a ring constrains (§7.3).
type Resource string

// The resource types of §7.3.
const (
	Network       Resource = "NETWORK"
	Filesystem    Resource = "FILESYSTEM"
	Subprocess    Resource = "SUBPROCESS"
	ToolExecution Resource = "TOOL_EXECUTION"
)

// FSScope is a filesystem scope (§7.4).
type FSScope string

// The filesystem scopes of §7.4. Any other value is treated as ScopeNone.
const (
	// ScopeNone allows no filesystem access.
	ScopeNone FSScope = "none"
	// ScopeSession allows the agent's own session directory only.
	ScopeSession FSScope = "session"
	// ScopeScoped allows the agent's directories and paths granted to it.
	ScopeScoped FSScope = "scoped"
	// ScopeFull allows any path.
	ScopeFull FSScope = "full"
)

// Constraints are the resource constraints of one ring (§7.1). The JSON
// form uses the specification's field names, plus network_allowlist_only.
type Constraints struct {
	NetworkAllowed bool `json:"network_allowed"`
	// NetworkAllowlist lists the destinations allowed (see ParseAllowEntry).
	// A non-empty list always restricts the network to its entries. An
	// empty list allows every destination, as §7.1 says, unless
	// NetworkAllowlistOnly is set.
	NetworkAllowlist []string `json:"network_allowlist"`
	// NetworkAllowlistOnly makes the allowlist binding even when it is empty:
	// then no destination is allowed. It is Annal's addition, set for
	// Standard by DefaultConstraints (see there).
	NetworkAllowlistOnly bool    `json:"network_allowlist_only"`
	FilesystemWritable   bool    `json:"filesystem_writable"`
	FilesystemScope      FSScope `json:"filesystem_scope"`
	SubprocessAllowed    bool    `json:"subprocess_allowed"`
	MaxConcurrentTools   int     `json:"max_concurrent_tools"`
}

// DefaultConstraints returns the ring-to-constraint mapping of §7.2:
//
//	ring      network          filesystem        subprocess  tools
//	Root      all              full, writable    yes         32
//	Privileged all             full, writable    yes         16
//	Standard  allowlist only   scoped, writable  yes          8
//	Sandbox   none             none              no           2
//
// Deviation: §7.2 gives Standard "Yes (allowlist)" while §7.1 says an empty
// allowlist allows all, and the reference gives Standard an empty list, so
// there Standard had the same network as Privileged and "allowlist" meant
// nothing. In Annal, Standard's allowlist is binding
// (NetworkAllowlistOnly): with the default empty list, a Standard agent
// reaches no destination until the operator lists some. Root and Privileged
// have no allowlist and reach every destination.
//
// The map is new on every call, so callers may change it.
func DefaultConstraints() map[Ring]Constraints {
	return map[Ring]Constraints{
		Root:       {NetworkAllowed: true, FilesystemWritable: true, FilesystemScope: ScopeFull, SubprocessAllowed: true, MaxConcurrentTools: 32},
		Privileged: {NetworkAllowed: true, FilesystemWritable: true, FilesystemScope: ScopeFull, SubprocessAllowed: true, MaxConcurrentTools: 16},
		Standard:   {NetworkAllowed: true, NetworkAllowlist: []string{}, NetworkAllowlistOnly: true, FilesystemWritable: true, FilesystemScope: ScopeScoped, SubprocessAllowed: true, MaxConcurrentTools: 8},
		Sandbox:    {NetworkAllowed: false, FilesystemWritable: false, FilesystemScope: ScopeNone, SubprocessAllowed: false, MaxConcurrentTools: 2},
	}
}

// ConstraintsFor returns m's constraints for r. When r is invalid or not in
// m, it returns m's constraints for Sandbox (§6.4), and when m has no
// Sandbox entry either, DefaultConstraints' Sandbox.
func ConstraintsFor(m map[Ring]Constraints, r Ring) Constraints {
	if c, ok := m[r]; ok && r.Valid() {
		return c
	}
	if c, ok := m[Sandbox]; ok {
		return c
	}
	return DefaultConstraints()[Sandbox]
}

// Use describes the resources one action declares it will use.
type Use struct {
	// Network lists destinations, each host or host:port (ParseDestination).
	Network []string
	// FilesystemWrite lists paths the action writes.
	FilesystemWrite []string
	// FilesystemRead lists paths the action reads.
	FilesystemRead []string
	// Subprocess reports whether the action starts processes.
	Subprocess bool
	// Tools is how many tools the action runs at once.
	Tools int
}

// Denied is one refused use of a resource.
type Denied struct {
	Resource Resource `json:"resource"`
	// Target is the destination or path refused, or "" for subprocesses
	// and tools.
	Target string `json:"target,omitempty"`
	Reason string `json:"reason"`
}

// CheckUse returns every use in u that c refuses, in the order network,
// filesystem writes, filesystem reads, subprocess, tools; nil when all are
// allowed (§6.3, §7). The rules:
//   - network: refused unless network_allowed; each destination must parse
//     (ParseDestination); when the allowlist binds (non-empty, or
//     NetworkAllowlistOnly), it must match an entry (MatchAllowlist).
//   - filesystem: writes need filesystem_writable. Scope none (or an unknown
//     scope) refuses every path. Scope session and scoped allow only
//     relative, slash-separated paths that, after path.Clean, are one of
//     ownDirs or lie below one, compared segment by segment, so "own/../x"
//     and "ownx/y" are outside "own"; absolute paths and paths that climb
//     out with ".." are refused. For session the caller passes the
//     session's directory; for scoped, the agent's directories and the
//     paths granted to it. Entries of ownDirs that are empty, ".", absolute
//     or climb with ".." are ignored (fail closed). Scope full allows any
//     path. In every scope a path must be non-empty, valid UTF-8, without
//     control characters or backslashes.
//   - subprocess: refused unless subprocess_allowed.
//   - tools: more than max_concurrent_tools, or a negative count, is
//     refused; using a tool is otherwise always allowed (§7.3).
//
// The check is lexical: it does not read the filesystem, so symbolic links
// are the caller's concern.
func (c Constraints) CheckUse(u Use, ownDirs []string) []Denied {
	chk := useCheck{c: c, allowlistBinds: c.NetworkAllowlistOnly || len(c.NetworkAllowlist) > 0}
	for _, s := range u.Network {
		chk.network(s)
	}
	chk.dirs = cleanDirs(ownDirs)
	for _, p := range u.FilesystemWrite {
		chk.path(p, true)
	}
	for _, p := range u.FilesystemRead {
		chk.path(p, false)
	}
	chk.subprocess(u.Subprocess)
	chk.tools(u.Tools)
	return chk.denied
}

// useCheck is one CheckUse: the constraints, what they refused so far,
// and one method per resource's rule.
type useCheck struct {
	c              Constraints
	allowlistBinds bool     // the allowlist restricts the network, even empty
	dirs           []string // the agent's directories, cleaned
	denied         []Denied
}

func (chk *useCheck) deny(r Resource, target, format string, args ...any) {
	chk.denied = append(chk.denied, Denied{Resource: r, Target: target, Reason: fmt.Sprintf(format, args...)})
}

func (chk *useCheck) network(s string) {
	if !chk.c.NetworkAllowed {
		chk.deny(Network, s, "network access is not allowed at this ring (§7.2)")
		return
	}
	d, err := ParseDestination(s)
	if err != nil {
		chk.deny(Network, s, "%v", err)
		return
	}
	if chk.allowlistBinds && !MatchAllowlist(chk.c.NetworkAllowlist, d) {
		chk.deny(Network, s, "destination %s matches no entry of the network allowlist (§7.1)", d)
	}
}

func (chk *useCheck) path(p string, write bool) {
	c := chk.c
	if write && !c.FilesystemWritable {
		chk.deny(Filesystem, p, "filesystem writes are not allowed at this ring (§7.1)")
		return
	}
	switch c.FilesystemScope {
	case ScopeSession, ScopeScoped, ScopeFull:
	default:
		chk.deny(Filesystem, p, "filesystem scope %s allows no filesystem access (§7.4)", quote(string(c.FilesystemScope)))
		return
	}
	if err := checkPathSyntax(p); err != nil {
		chk.deny(Filesystem, p, "%v", err)
		return
	}
	if c.FilesystemScope == ScopeFull {
		return
	}
	if rel, ok := relPath(p); !ok {
		chk.deny(Filesystem, p, "scope %s allows only relative paths that stay inside the agent's directories (§7.4, §20.5)", c.FilesystemScope)
	} else if !inside(rel, chk.dirs) {
		chk.deny(Filesystem, p, "path %s is outside the agent's directories in scope %s (§7.4)", quote(rel), c.FilesystemScope)
	}
}

func (chk *useCheck) subprocess(used bool) {
	if used && !chk.c.SubprocessAllowed {
		chk.deny(Subprocess, "", "subprocess creation is not allowed at this ring (§7.2)")
	}
}

func (chk *useCheck) tools(n int) {
	switch {
	case n < 0:
		chk.deny(ToolExecution, "", "tool count %d is negative", n)
	case n > chk.c.MaxConcurrentTools:
		chk.deny(ToolExecution, "", "%d concurrent tools, more than the %d this ring allows (§7.1)", n, chk.c.MaxConcurrentTools)
	}
}

// checkPathSyntax refuses an empty path, invalid UTF-8, control and format
// characters, and backslashes (which another platform reads as separators,
// so "a\..\..\x" would escape there).
func checkPathSyntax(p string) error {
	if p == "" {
		return fmt.Errorf("path: %w: must not be empty", ErrInvalidValue)
	}
	if strings.ContainsRune(p, '\\') {
		return fmt.Errorf("path %s: %w: backslashes are not allowed (paths are slash-separated)", quote(p), ErrInvalidValue)
	}
	return checkText("path", p)
}

// relPath cleans p and reports whether it is relative and stays below the
// root (does not start with "..").
func relPath(p string) (string, bool) {
	if path.IsAbs(p) {
		return "", false
	}
	c := path.Clean(p)
	if c == ".." || strings.HasPrefix(c, "../") {
		return "", false
	}
	return c, true
}

// cleanDirs cleans ownDirs and drops those that are not usable scopes. It
// returns ownDirs itself when each is clean and usable already, as the
// kernel's are: a copy is made only of a list that changes.
func cleanDirs(ownDirs []string) []string {
	var out []string // nil while every dir so far is kept as it is
	for i, d := range ownDirs {
		c, ok := cleanDir(d)
		if out == nil && ok && c == d {
			continue
		}
		if out == nil {
			out = append(make([]string, 0, len(ownDirs)), ownDirs[:i]...)
		}
		if ok {
			out = append(out, c)
		}
	}
	if out == nil {
		return ownDirs
	}
	return out
}

// cleanDir is d cleaned, if it is a usable scope.
func cleanDir(d string) (string, bool) {
	if checkPathSyntax(d) != nil {
		return "", false
	}
	c, ok := relPath(d)
	return c, ok && c != "."
}

// inside reports whether the clean relative path p is one of dirs or below
// one, comparing whole segments.
func inside(p string, dirs []string) bool {
	for _, d := range dirs {
		if p == d || strings.HasPrefix(p, d+"/") {
			return true
		}
	}
	return false
}
