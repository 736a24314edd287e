package ring

import (
	"fmt"
	"unicode/utf8"
)

// Reversibility says how far an action can be undone (§5.1, §16.1).
type Reversibility string

// The three reversibility levels. Any other value is invalid: Validate
// refuses it and RiskWeight treats it as None.
const (
	Full    Reversibility = "FULL"
	Partial Reversibility = "PARTIAL"
	None    Reversibility = "NONE"
)

// Valid reports whether r is FULL, PARTIAL or NONE (case-sensitive).
func (r Reversibility) Valid() bool { return r == Full || r == Partial || r == None }

// Limits on descriptor fields (§5.3).
const (
	// MaxNameLen is the longest name, in characters (Unicode code points).
	MaxNameLen = 256
	// MaxUndoWindowSeconds is the longest undo window: one day.
	MaxUndoWindowSeconds = 86400
	// MaxCompensationMethodLen is the longest compensation method name, in
	// characters. The specification sets no bound; Annal uses the name's.
	MaxCompensationMethodLen = 256
)

// Descriptor is an action descriptor (§5.1). Its JSON form uses the
// specification's field names.
type Descriptor struct {
	ActionID           string        `json:"action_id"`
	Name               string        `json:"name"`
	ExecuteAPI         string        `json:"execute_api"`
	UndoAPI            *string       `json:"undo_api,omitempty"`
	Reversibility      Reversibility `json:"reversibility"`
	UndoWindowSeconds  int           `json:"undo_window_seconds"`
	CompensationMethod *string       `json:"compensation_method,omitempty"`
	IsReadOnly         bool          `json:"is_read_only"`
	IsAdmin            bool          `json:"is_admin"`
}

// Validate checks every rule of §5.3, and a few Annal adds:
//   - action_id is a valid identifier (ValidIdentifier);
//   - name is non-empty, at most 256 characters, valid UTF-8 and free of
//     control and format characters (the last two are Annal's: a name is
//     shown to the person who answers a hold);
//   - execute_api is a valid API path (ValidAPIPath);
//   - undo_api, when given, is a valid API path;
//   - reversibility is FULL, PARTIAL or NONE;
//   - undo_window_seconds is in [0, 86400];
//   - compensation_method, when given, is non-empty, at most 256
//     characters and free of control and format characters (Annal's).
//
// The error names the field and wraps ErrInvalidValue.
func (d Descriptor) Validate() error {
	if err := ValidIdentifier(d.ActionID); err != nil {
		return fmt.Errorf("action descriptor: action_id: %w", err)
	}
	if err := checkName("name", d.Name, MaxNameLen); err != nil {
		return d.errorf("%w", err)
	}
	if err := ValidAPIPath(d.ExecuteAPI); err != nil {
		return d.errorf("execute_api: %w", err)
	}
	if d.UndoAPI != nil {
		if err := ValidAPIPath(*d.UndoAPI); err != nil {
			return d.errorf("undo_api: %w", err)
		}
	}
	if !d.Reversibility.Valid() {
		return d.errorf("reversibility %s: %w: must be FULL, PARTIAL or NONE (§5.1)", quote(string(d.Reversibility)), ErrInvalidValue)
	}
	if d.UndoWindowSeconds < 0 || d.UndoWindowSeconds > MaxUndoWindowSeconds {
		return d.errorf("undo_window_seconds %d: %w: must be in [0, %d] (§5.3)", d.UndoWindowSeconds, ErrInvalidValue, MaxUndoWindowSeconds)
	}
	if d.CompensationMethod != nil {
		if err := checkName("compensation_method", *d.CompensationMethod, MaxCompensationMethodLen); err != nil {
			return d.errorf("%w", err)
		}
	}
	return nil
}

func (d Descriptor) errorf(format string, args ...any) error {
	return fmt.Errorf("action descriptor %q: "+format, append([]any{d.ActionID}, args...)...)
}

// checkName checks a human-readable text field: non-empty, at most max
// characters, valid UTF-8, no control or format characters.
func checkName(field, s string, max int) error {
	if s == "" {
		return fmt.Errorf("%s: %w: must not be empty (§5.3)", field, ErrInvalidValue)
	}
	if err := checkText(field, s); err != nil {
		return err
	}
	if n := utf8.RuneCountInString(s); n > max {
		return fmt.Errorf("%s %s: %w: %d characters, more than %d (§5.3)", field, quote(s), ErrInvalidValue, n, max)
	}
	return nil
}

// RequiredRing returns the ring an action requires (§5.2): Root when it is
// an admin action; else Privileged when it is irreversible (NONE) and not
// read-only; else Sandbox when it is read-only; else Standard. A
// reversibility other than FULL, PARTIAL or NONE counts as NONE (fail
// closed), though Validate refuses it first.
func (d Descriptor) RequiredRing() Ring {
	switch {
	case d.IsAdmin:
		return Root
	case !d.IsReadOnly && (d.Reversibility == None || !d.Reversibility.Valid()):
		return Privileged
	case d.IsReadOnly:
		return Sandbox
	default:
		return Standard
	}
}
