package session

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"strconv"
	"unicode/utf8"
)

// Defaults of §10.2 and the bounds of §17.3.
const (
	DefaultMaxParticipants    = 10
	DefaultMaxDurationSeconds = 3600
	DefaultMinEffScore        = 6000 // basis points: 0.60

	MinParticipants    = 1
	MaxParticipants    = 1000
	MinDurationSeconds = 1
	MaxDurationSeconds = 604800 // 7 days
	MaxScore           = 10000  // basis points: 1.0

	// MaxConfigSize bounds the body ParseConfig reads.
	MaxConfigSize = 16 << 10
)

// Errors of configuration and participant validation. ErrType stands for
// the spec's TypeError and ErrRange for its ValueError (§17.3).
var (
	ErrType    = errors.New("type mismatch")
	ErrRange   = errors.New("value out of range")
	ErrSyntax  = errors.New("malformed session config")
	ErrTooBig  = errors.New("session config too large")
	ErrUnknown = errors.New("unknown field")
)

// Config is a session configuration (§10.2) in its event form: no floats,
// the minimum effective score in basis points.
type Config struct {
	ConsistencyMode            ConsistencyMode `json:"consistency_mode"`
	MaxParticipants            int             `json:"max_participants"`
	MaxDurationSeconds         int             `json:"max_duration_seconds"`
	MinEffScore                uint16          `json:"min_eff_score_bp"`
	EnableAudit                bool            `json:"enable_audit"`
	EnableBlockchainCommitment bool            `json:"enable_blockchain_commitment"`
	Isolation                  Isolation       `json:"isolation"`
}

// DefaultConfig returns the §10.2 defaults: EVENTUAL, 10 participants,
// 3600 s, 0.60 (6000 bp), audit on, blockchain commitment off, and SNAPSHOT
// isolation (the most isolated level, §11.1).
func DefaultConfig() Config {
	return Config{
		ConsistencyMode:    Eventual,
		MaxParticipants:    DefaultMaxParticipants,
		MaxDurationSeconds: DefaultMaxDurationSeconds,
		MinEffScore:        DefaultMinEffScore,
		EnableAudit:        true,
		Isolation:          Snapshot,
	}
}

// Validate checks c against §17.3: max_participants in [1, 1000],
// max_duration_seconds in [1, 604800], min_eff_score in [0, 10000] bp, and
// known enum values. Every error wraps ErrRange and names the field.
func (c Config) Validate() error {
	if !c.ConsistencyMode.Valid() {
		return fmt.Errorf("%w: consistency_mode %q must be STRONG or EVENTUAL", ErrRange, c.ConsistencyMode)
	}
	if c.MaxParticipants < MinParticipants || c.MaxParticipants > MaxParticipants {
		return fmt.Errorf("%w: max_participants %d must be an integer in [%d, %d]", ErrRange, c.MaxParticipants, MinParticipants, MaxParticipants)
	}
	if c.MaxDurationSeconds < MinDurationSeconds || c.MaxDurationSeconds > MaxDurationSeconds {
		return fmt.Errorf("%w: max_duration_seconds %d must be an integer in [%d, %d]", ErrRange, c.MaxDurationSeconds, MinDurationSeconds, MaxDurationSeconds)
	}
	if c.MinEffScore > MaxScore {
		return fmt.Errorf("%w: min_eff_score_bp %d must be in [0, %d]", ErrRange, c.MinEffScore, MaxScore)
	}
	if !c.Isolation.Valid() {
		return fmt.Errorf("%w: isolation %q must be SNAPSHOT, READ_COMMITTED or SERIALIZABLE", ErrRange, c.Isolation)
	}
	return nil
}

var intLiteral = regexp.MustCompile(`^-?(0|[1-9][0-9]*)$`)

// ParseConfig reads a session configuration in its API form (§10.2): a JSON
// object whose members are all optional and default to DefaultConfig, with
// min_eff_score a number in [0.0, 1.0]. See the package comment for what it
// refuses. The result has passed Validate.
func ParseConfig(data []byte) (Config, error) {
	c := DefaultConfig()
	if len(data) > MaxConfigSize {
		return Config{}, fmt.Errorf("%w: %d bytes, limit %d", ErrTooBig, len(data), MaxConfigSize)
	}
	if !utf8.Valid(data) {
		return Config{}, fmt.Errorf("%w: not valid UTF-8", ErrSyntax)
	}
	if !json.Valid(data) {
		return Config{}, fmt.Errorf("%w: not one well-formed JSON value", ErrSyntax)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return Config{}, fmt.Errorf("%w: %v", ErrSyntax, err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return Config{}, fmt.Errorf("%w: session config must be a JSON object", ErrType)
	}
	seen := map[string]bool{}
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return Config{}, fmt.Errorf("%w: %v", ErrSyntax, err)
		}
		name, _ := k.(string)
		if seen[name] {
			return Config{}, fmt.Errorf("%w: member %q appears twice", ErrSyntax, name)
		}
		seen[name] = true
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return Config{}, fmt.Errorf("%w: %s: %v", ErrSyntax, name, err)
		}
		if err := setField(&c, name, raw); err != nil {
			return Config{}, err
		}
	}
	if _, err := dec.Token(); err != nil { // the closing '}'
		return Config{}, fmt.Errorf("%w: %v", ErrSyntax, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return Config{}, fmt.Errorf("%w: data after the object", ErrSyntax)
	}
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	return c, nil
}

// jsonKind names the JSON type of a raw value for error messages.
func jsonKind(raw json.RawMessage) string {
	switch raw[0] {
	case '"':
		return "string"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	case '{':
		return "object"
	case '[':
		return "array"
	}
	return "number"
}

// setField sets the member name of a session config from its JSON value.
// On an error c is left part-set: ParseConfig then returns no config.
func setField(c *Config, name string, raw json.RawMessage) (err error) {
	switch name {
	case "consistency_mode":
		c.ConsistencyMode, err = enumField(name, raw, ConsistencyMode.Valid, "STRONG or EVENTUAL")
	case "isolation":
		c.Isolation, err = enumField(name, raw, Isolation.Valid, "SNAPSHOT, READ_COMMITTED or SERIALIZABLE")
	case "max_participants":
		c.MaxParticipants, err = intField(name, raw, MinParticipants, MaxParticipants)
	case "max_duration_seconds":
		c.MaxDurationSeconds, err = intField(name, raw, MinDurationSeconds, MaxDurationSeconds)
	case "min_eff_score":
		c.MinEffScore, err = ScoreField(name, raw)
	case "enable_audit":
		c.EnableAudit, err = boolField(name, raw)
	case "enable_blockchain_commitment":
		c.EnableBlockchainCommitment, err = boolField(name, raw)
	default:
		err = fmt.Errorf("%w: %q is not a session config field", ErrUnknown, name)
	}
	return err
}

// enumField reads a string member that must be one of the values valid
// accepts, listed in values for the error.
func enumField[E ~string](name string, raw json.RawMessage, valid func(E) bool, values string) (E, error) {
	s, err := stringField(name, raw)
	if err != nil {
		return "", err
	}
	if !valid(E(s)) {
		return "", fmt.Errorf("%w: %s %q must be %s", ErrRange, name, s, values)
	}
	return E(s), nil
}

func stringField(name string, raw json.RawMessage) (string, error) {
	if raw[0] != '"' {
		return "", fmt.Errorf("%w: %s must be a string, got %s", ErrType, name, jsonKind(raw))
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", fmt.Errorf("%w: %s: %v", ErrSyntax, name, err)
	}
	return s, nil
}

func boolField(name string, raw json.RawMessage) (bool, error) {
	switch string(raw) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, fmt.Errorf("%w: %s must be a boolean, got %s", ErrType, name, jsonKind(raw))
}

func intField(name string, raw json.RawMessage, lo, hi int) (int, error) {
	if jsonKind(raw) != "number" || !intLiteral.Match(raw) {
		return 0, fmt.Errorf("%w: %s must be an integer, got %s %s", ErrType, name, jsonKind(raw), clip(raw))
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil || n < int64(lo) || n > int64(hi) {
		return 0, fmt.Errorf("%w: %s %s must be an integer in [%d, %d]", ErrRange, name, clip(raw), lo, hi)
	}
	return int(n), nil
}

// ScoreField converts a score in its API form, a JSON number in [0.0, 1.0],
// to basis points, rounding to nearest (0.6 → 6000, 0.60005 → 6001). A
// value that is not a JSON number wraps ErrType; one outside [0, 1] wraps
// ErrRange. name is used in error messages only.
func ScoreField(name string, raw json.RawMessage) (uint16, error) {
	if len(raw) == 0 || jsonKind(raw) != "number" {
		k := "nothing"
		if len(raw) > 0 {
			k = jsonKind(raw)
		}
		return 0, fmt.Errorf("%w: %s must be a number in [0.0, 1.0], got %s", ErrType, name, k)
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	if err != nil || math.IsNaN(f) || f < 0 || f > 1 {
		return 0, fmt.Errorf("%w: %s %s must be in [0.0, 1.0]", ErrRange, name, clip(raw))
	}
	return uint16(math.Round(f * MaxScore)), nil
}

// clip shortens a raw value for an error message.
func clip(raw json.RawMessage) string {
	const max = 32
	if len(raw) > max {
		return string(raw[:max]) + "…"
	}
	return string(raw)
}
