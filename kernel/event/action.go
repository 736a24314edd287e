package event

import (
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"strings"
	"unicode/utf8"
)

// The kinds of event that record an action.
const (
	// KindAction records an action that passed the pipeline.
	KindAction Kind = "action"
	// KindActionDenied records an action a gate refused, at zero cost.
	KindActionDenied Kind = "action.denied"
)

// ActionType is one of the four action types of the paper (§4.2).
type ActionType string

// The action types.
const (
	Observe ActionType = "observe"
	Create  ActionType = "create"
	Mutate  ActionType = "mutate"
	Execute ActionType = "execute"
)

// Valid reports whether t is one of the four action types.
func (t ActionType) Valid() bool {
	switch t {
	case Observe, Create, Mutate, Execute:
		return true
	}
	return false
}

// Action is what an actor asked the kernel to record. Its fields are in
// member order (Event).
type Action struct {
	// Envelope is the envelope an agent acted under (Def. 4.13).
	Envelope string `json:"envelope,omitempty"`
	// Payload is the caller's JSON, canonicalised. At most one of Payload,
	// PayloadHash and Sealed is set.
	Payload json.RawMessage `json:"payload,omitempty"`
	// PayloadHash is "sha256:<64 hex>" for a payload kept outside the log.
	PayloadHash string `json:"payload_hash,omitempty"`
	// Resources is what the action declared it uses (Execution Control §7).
	Resources *Resources `json:"resources,omitempty"`
	// Sealed is set instead of Payload for a payload kept sealed beside
	// the log (sealed.go).
	Sealed *SealedPayload `json:"sealed,omitempty"`
	Target string         `json:"target"`
	Type   ActionType     `json:"type"`
}

// MaxTargetSize bounds an action target.
const MaxTargetSize = 1024

func (a *Action) check(*Event) error {
	if a.Envelope != "" && !ValidEnvelopeID(a.Envelope) {
		return fmt.Errorf("action envelope %q is not an envelope id", a.Envelope)
	}
	return a.Validate()
}

// Validate checks an action's type, target and payload form. Targets are
// '/'-separated paths of non-empty segments, none of them "." or "..", of
// printable characters other than '\' (so a target has one spelling).
func (a *Action) Validate() error {
	if !a.Type.Valid() {
		return fmt.Errorf("action type %q is not one of observe, create, mutate, execute", a.Type)
	}
	if err := ValidateTarget(a.Target); err != nil {
		return err
	}
	if a.Payload != nil && a.PayloadHash != "" {
		return fmt.Errorf("action on %q carries both payload and payload_hash; send one", a.Target)
	}
	// Without this check Encode would round a number such as 2^53+1 without
	// a word, and write entries that Parse refuses.
	if len(a.Payload) > 0 {
		if err := CheckJSON(a.Payload); err != nil {
			return fmt.Errorf("action on %q: payload: %w", a.Target, err)
		}
	}
	if a.Resources != nil {
		if err := a.Resources.validate(); err != nil {
			return fmt.Errorf("action on %q: %w", a.Target, err)
		}
	}
	if a.PayloadHash != "" && !ValidOID(a.PayloadHash) {
		return fmt.Errorf("payload_hash %q is not \"sha256:<64 lower-case hex>\"", a.PayloadHash)
	}
	if a.Sealed != nil {
		return a.checkSealed()
	}
	return nil
}

// ValidateTarget checks a target path; see Action.Validate.
func ValidateTarget(target string) error {
	if target == "" {
		return fmt.Errorf("target is empty")
	}
	if len(target) > MaxTargetSize {
		return fmt.Errorf("target is %d bytes, more than %d", len(target), MaxTargetSize)
	}
	if !utf8.ValidString(target) {
		return fmt.Errorf("target %q is not valid UTF-8", target)
	}
	start := 0
	for i := 0; i <= len(target); i++ {
		if i < len(target) && target[i] != '/' {
			c := target[i]
			if c < 0x20 || c == 0x7f || c == '\\' {
				return fmt.Errorf("target %q contains a control character or backslash", target)
			}
			continue
		}
		switch seg := target[start:i]; seg {
		case "":
			return fmt.Errorf("target %q has an empty path segment", target)
		case ".", "..":
			return fmt.Errorf("target %q has a %q segment", target, seg)
		}
		start = i + 1
	}
	return nil
}

// Resources is what an action declares it will use (§7): the gates check
// it against the acting agent's ring, and the event records it.
type Resources struct {
	Network         []string `json:"network,omitempty"`
	FilesystemRead  []string `json:"fs_read,omitempty"`
	FilesystemWrite []string `json:"fs_write,omitempty"`
	Subprocess      bool     `json:"subprocess,omitempty"`
	Tools           uint64   `json:"tools,omitempty"`
}

// MaxResourceEntries bounds each list of Resources.
const MaxResourceEntries = 64

func (r *Resources) validate() error {
	for _, list := range [][]string{r.Network, r.FilesystemRead, r.FilesystemWrite} {
		if len(list) > MaxResourceEntries {
			return fmt.Errorf("resources: %d entries in one list, more than %d", len(list), MaxResourceEntries)
		}
		for _, s := range list {
			if s == "" {
				return fmt.Errorf("resources: an empty entry")
			}
			if err := validateText("resource entry", s, MaxTargetSize); err != nil {
				return err
			}
		}
	}
	// Declared paths are logged clean, so every rule judges the path the
	// action will use: "x/../sessions/s" is "sessions/s".
	for _, p := range slices.Concat(r.FilesystemRead, r.FilesystemWrite) {
		if c := path.Clean(p); c != p || c == ".." || strings.HasPrefix(c, "../") {
			return fmt.Errorf("resources: path %q is not in clean form (%q) inside the target namespace", p, c)
		}
	}
	if r.Tools > 1024 {
		return fmt.Errorf("resources: %d concurrent tools, more than 1024", r.Tools)
	}
	return nil
}

// Decision is what the pipeline decided, in energy units.
type Decision struct {
	Cost     uint64 `json:"cost"`
	Outcome  string `json:"outcome"`
	Reserved uint64 `json:"reserved"`
	Settled  uint64 `json:"settled"`
}

// OutcomeCommitted is the outcome of an action that passed every stage.
const OutcomeCommitted = "committed"

// OutcomeDenied is the outcome of an action.denied event.
const OutcomeDenied = "denied"

func (d *Decision) check(e *Event) error {
	switch {
	case e.Kind == KindActionDenied && (d.Outcome != OutcomeDenied || d.Cost != 0 || d.Reserved != 0 || d.Settled != 0):
		return fmt.Errorf("a denied action has outcome %q and costs nothing", OutcomeDenied)
	case e.Kind == KindAction && d.Outcome != OutcomeCommitted:
		return fmt.Errorf("unknown outcome %q", d.Outcome)
	}
	if d.Cost > MaxEnergy || d.Reserved > MaxEnergy || d.Settled > MaxEnergy {
		return fmt.Errorf("decision figures (cost %d, reserved %d, settled %d) must be at most 2^53", d.Cost, d.Reserved, d.Settled)
	}
	return nil
}

// Denial is carried by action.denied: which gate refused and why.
type Denial struct {
	Stage  string `json:"stage"`
	Reason string `json:"reason"`
}

func (d *Denial) check(*Event) error {
	if d.Stage == "" || len(d.Stage) > 64 {
		return fmt.Errorf("denial stage must be 1 to 64 bytes")
	}
	return validateText("denial reason", d.Reason, 2048)
}

// The parts of its kinds (parts.go).
func init() {
	kinds[KindAction] = carries(may("hold"), may("session"), must("action"), must("decision"))
	kinds[KindActionDenied] = carries(must("denial"), may("session"), must("action"), must("decision"))
}
