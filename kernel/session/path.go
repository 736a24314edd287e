package session

import (
	"errors"
	"fmt"
	"path"
	"strings"
	"unicode/utf8"
)

// SessionsRoot is the first segment of every session working directory in
// Annal's target namespace (§11.2: base_path).
const SessionsRoot = "sessions"

// MaxPathLength bounds a target IsPathAllowed considers (§17.2: 2048).
const MaxPathLength = 2048

// ErrDenied is wrapped by every denial of IsPathAllowed.
var ErrDenied = errors.New("session path access denied")

// Scope is the isolation scope of an agent acting in a session (§11):
// its own session, the session's isolation level and the sessions granted
// for reading.
type Scope struct {
	Session   string
	Isolation Isolation
	Granted   []string
}

// WorkDir returns the working directory of session id: "sessions/<id>"
// (§11.2).
func WorkDir(id string) string { return SessionsRoot + "/" + id }

// IsPathAllowed decides a read (write false) or a write of target under
// scope (§11.3, §11.4, §11.5, §20.5). It returns nil if allowed and an error
// wrapping ErrDenied, naming the rule, otherwise. See the package comment.
func IsPathAllowed(scope *Scope, target string, write bool) error {
	if scope == nil {
		return fmt.Errorf("%w: no isolation scope configured (fail closed, §11.4)", ErrDenied)
	}
	if !validID(scope.Session) {
		return fmt.Errorf("%w: scope session %q is not a valid identifier (§17.1)", ErrDenied, clipString(scope.Session))
	}
	if !scope.Isolation.Valid() {
		return fmt.Errorf("%w: scope isolation %q is unknown (fail closed)", ErrDenied, scope.Isolation)
	}
	if err := checkRawTarget(target); err != nil {
		return err
	}
	clean := path.Clean(target)
	segs := strings.Split(clean, "/")
	if segs[0] == ".." || segs[0] == "." {
		return fmt.Errorf("%w: %q leaves the target namespace once resolved to %q (§20.5)", ErrDenied, clipString(target), clipString(clean))
	}
	if len(segs) < 2 || segs[0] != SessionsRoot {
		return fmt.Errorf("%w: %q resolves to %q, outside every session directory (§11.3)", ErrDenied, clipString(target), clipString(clean))
	}
	dir := segs[1]
	if dir == scope.Session {
		return nil
	}
	if !scope.grants(dir) {
		return fmt.Errorf("%w: %q resolves to %q, in session %s, neither session %s's own directory nor granted to it (§11.3)", ErrDenied, clipString(target), clipString(clean), clipString(dir), scope.Session)
	}
	if scope.Isolation != ReadCommitted {
		return fmt.Errorf("%w: %w: session %s reads %s under %s; cross-session reads need READ_COMMITTED (§11.5)", ErrDenied, ErrIsolation, scope.Session, dir, scope.Isolation)
	}
	if write {
		return fmt.Errorf("%w: %q is in granted session %s, which session %s may read but not write (§11.1 READ_COMMITTED)", ErrDenied, clipString(target), dir, scope.Session)
	}
	return nil
}

// grants reports whether dir is one of the sessions granted for reading;
// a grant that is not a valid identifier grants nothing.
func (s *Scope) grants(dir string) bool {
	for _, g := range s.Granted {
		if g == dir && validID(g) {
			return true
		}
	}
	return false
}

// checkRawTarget refuses a target before any canonicalisation: empty, too
// long, absolute, with an empty segment (which also covers a trailing
// slash), invalid UTF-8, a control character, a backslash or a percent sign
// (no layer may later decode "%2e%2e" or "%2f" into a traversal).
func checkRawTarget(t string) error {
	switch {
	case t == "":
		return fmt.Errorf("%w: empty path", ErrDenied)
	case len(t) > MaxPathLength:
		return fmt.Errorf("%w: path of %d bytes exceeds %d (§17.2)", ErrDenied, len(t), MaxPathLength)
	case t[0] == '/':
		return fmt.Errorf("%w: %q is absolute; targets are relative", ErrDenied, clipString(t))
	case !utf8.ValidString(t):
		return fmt.Errorf("%w: path is not valid UTF-8", ErrDenied)
	}
	for _, r := range t {
		switch {
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0):
			return fmt.Errorf("%w: %q contains a control character", ErrDenied, clipString(t))
		case r == '\\':
			return fmt.Errorf("%w: %q contains a backslash", ErrDenied, clipString(t))
		case r == '%':
			return fmt.Errorf("%w: %q contains a percent sign (encoded paths are refused)", ErrDenied, clipString(t))
		}
	}
	for _, s := range strings.Split(t, "/") {
		if s == "" {
			return fmt.Errorf("%w: %q has an empty segment", ErrDenied, clipString(t))
		}
	}
	return nil
}
