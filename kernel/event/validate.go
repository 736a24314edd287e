package event

import (
	"fmt"
	"slices"

	"github.com/annal-dev/annal/kernel/delta"
	"unicode/utf8"
)

func (e *Event) validate() error {
	if e.V != Version {
		return fmt.Errorf("event version %d is not %d", e.V, Version)
	}
	if !validUUID(e.ID) {
		return fmt.Errorf("event id %q is not a lower-case UUID", e.ID)
	}
	if e.Time.IsZero() {
		return fmt.Errorf("event %s has no time", e.ID)
	}
	if !writable(e.Time) { // the message is built only when it is needed
		return validateTime("event "+e.ID+" time", e.Time)
	}
	if !ValidActorID(e.Actor) {
		return fmt.Errorf("event %s: actor %q is not a valid actor id", e.ID, e.Actor)
	}
	want, ok := kindPresence[e.Kind]
	if !ok {
		return fmt.Errorf("event %s: unknown kind %q", e.ID, e.Kind)
	}
	for i, set := range e.partsSet() {
		switch need := want[i]; {
		case need == required && !set:
			return fmt.Errorf("event %s of kind %s lacks %q", e.ID, e.Kind, partNames[i])
		case need == forbidden && set:
			return fmt.Errorf("event %s of kind %s may not carry %q", e.ID, e.Kind, partNames[i])
		}
	}
	switch sessionKinds[e.Kind] {
	case required:
		if e.Session == "" {
			return fmt.Errorf("event %s of kind %s lacks \"session\"", e.ID, e.Kind)
		}
	case forbidden:
		if e.Session != "" {
			return fmt.Errorf("event %s of kind %s may not carry \"session\"", e.ID, e.Kind)
		}
	}
	if e.Signed != nil {
		if e.Actor == KernelActor {
			return fmt.Errorf("event %s: the kernel's own events are not signed", e.ID)
		}
		if err := e.Signed.validate(); err != nil {
			return fmt.Errorf("event %s: %w", e.ID, err)
		}
	}
	if e.KeyChange != nil {
		if err := e.KeyChange.validate(); err != nil {
			return fmt.Errorf("event %s: %w", e.ID, err)
		}
	}
	if e.Erasure != nil {
		if err := e.Erasure.validate(); err != nil {
			return fmt.Errorf("event %s: %w", e.ID, err)
		}
	}
	if e.Toleration != nil {
		if err := e.Toleration.validate(); err != nil {
			return fmt.Errorf("event %s: %w", e.ID, err)
		}
	}
	if err := e.validateControl(); err != nil {
		return fmt.Errorf("event %s: %w", e.ID, err)
	}
	if err := e.validateParts(); err != nil {
		return fmt.Errorf("event %s: %w", e.ID, err)
	}
	if e.Log != nil && (e.Log.Rules < 0 || e.Log.Rules > 1000 || (e.Kind == KindRulesAdopted && e.Log.Rules == 0)) {
		return fmt.Errorf("event %s: rules version %d is not valid", e.ID, e.Log.Rules)
	}
	if e.Log != nil && (e.Log.Origin == "" || e.Log.Software == "") {
		return fmt.Errorf("event %s: log origin and software must be set", e.ID)
	}
	if e.Log != nil && (!utf8.ValidString(e.Log.Origin) || !utf8.ValidString(e.Log.Software)) {
		return fmt.Errorf("event %s: log origin and software must be UTF-8", e.ID)
	}
	if e.Subject != nil {
		if err := e.Subject.validate(); err != nil {
			return fmt.Errorf("event %s: %w", e.ID, err)
		}
		if e.Kind == KindGenesis && (e.Subject.Kind != Human || e.Subject.ID != e.Actor) {
			return fmt.Errorf("event %s: genesis must create its own actor, a human", e.ID)
		}
	}
	if e.Action != nil {
		if err := e.Action.Validate(); err != nil {
			return fmt.Errorf("event %s: %w", e.ID, err)
		}
	}
	if e.Decision != nil {
		if err := e.Decision.validate(e.Kind); err != nil {
			return fmt.Errorf("event %s: %w", e.ID, err)
		}
	}
	return nil
}

// MaxEnergy is the largest energy figure an event can carry: RFC 8785
// writes numbers as IEEE 754 doubles, which hold every integer up to 2^53
// and would round larger ones.
const MaxEnergy = 1 << 53

func (d *Decision) validate(kind Kind) error {
	switch {
	case kind == KindActionDenied && (d.Outcome != OutcomeDenied || d.Cost != 0 || d.Reserved != 0 || d.Settled != 0):
		return fmt.Errorf("a denied action has outcome %q and costs nothing", OutcomeDenied)
	case kind == KindAction && d.Outcome != OutcomeCommitted:
		return fmt.Errorf("unknown outcome %q", d.Outcome)
	}
	if d.Cost > MaxEnergy || d.Reserved > MaxEnergy || d.Settled > MaxEnergy {
		return fmt.Errorf("decision figures (cost %d, reserved %d, settled %d) must be at most 2^53", d.Cost, d.Reserved, d.Settled)
	}
	return nil
}

// presence says whether a kind of event must, may or must not carry a part.
type presence int

const (
	forbidden presence = iota
	optional
	required
)

// partNames are the members of an event that are its kind's parts, in
// the order of partsSet.
var partNames = [...]string{
	"log", "subject", "action", "decision", "status", "envelope", "envelope_end", "production",
	"denial", "hold", "delta", "ring", "ring_config", "descriptor", "elevation", "elevation_end",
	"session_record", "session_change", "quarantine", "kill", "saga", "saga_step", "policy",
	"policy_attachment", "signal", "signal_mask", "key_change", "erasure", "toleration",
}

// partsSet says which of the parts named by partNames the event carries.
func (e *Event) partsSet() [len(partNames)]bool {
	return [...]bool{
		e.Log != nil, e.Subject != nil, e.Action != nil, e.Decision != nil, e.Status != nil, e.Envelope != nil,
		e.EnvelopeEnd != nil, e.Production != nil, e.Denial != nil, e.Hold != nil, e.Delta != nil,
		e.Ring != nil, e.RingConfig != nil, e.Descriptor != nil, e.Elevation != nil, e.ElevationEnd != nil,
		e.SessionRecord != nil, e.SessionChange != nil, e.Quarantine != nil, e.Kill != nil, e.Saga != nil,
		e.SagaStep != nil, e.Policy != nil, e.PolicyAttachment != nil, e.Signal != nil,
		e.SignalMask != nil, e.KeyChange != nil, e.Erasure != nil, e.Toleration != nil,
	}
}

// kindPresence is kindFields by part, in the order of partNames: what
// validate reads for every event (a map lookup per part cost a governed
// action's encoding about 0.5 µs).
var kindPresence = func() map[Kind][len(partNames)]presence {
	m := make(map[Kind][len(partNames)]presence, len(kindFields))
	for kind, fields := range kindFields {
		var byPart [len(partNames)]presence
		for i, name := range partNames {
			byPart[i] = fields[name]
		}
		for name := range fields {
			if !slices.Contains(partNames[:], name) {
				panic("event: kindFields names a part partNames lacks: " + name)
			}
		}
		m[kind] = byPart
	}
	return m
}()

// kindFields lists the parts each kind carries; parts not listed are forbidden.
var kindFields = map[Kind]map[string]presence{
	KindGenesis:         {"log": required, "subject": required},
	KindRulesAdopted:    {"log": required},
	KindActorCreated:    {"subject": required},
	KindAction:          {"action": required, "decision": required, "hold": optional},
	KindActorStatus:     {"status": required},
	KindEnvelopeIssued:  {"envelope": required},
	KindEnvelopeRevoked: {"envelope_end": required},
	KindEnergyProduced:  {"production": required},
	KindActionDenied:    {"action": required, "decision": required, "denial": required},
	KindHoldRequested:   {"action": required, "hold": required},
	KindHoldAnswered:    {"hold": required},
	KindSessionDelta:    {"delta": required},

	KindRingAssigned:      {"ring": required},
	KindRingsConfigured:   {"ring_config": required},
	KindActionRegistered:  {"descriptor": required},
	KindElevationGranted:  {"elevation": required},
	KindElevationEnded:    {"elevation_end": required},
	KindSessionCreated:    {"session_record": required},
	KindSessionChanged:    {"session_change": required},
	KindQuarantineStarted: {"quarantine": required},
	KindQuarantineEnded:   {"quarantine": required},
	KindAgentKilled:       {"kill": required},
	KindSagaStarted:       {"saga": required},
	KindSagaStep:          {"saga_step": required},
	KindPolicySet:         {"policy": required},
	KindPolicyAttached:    {"policy_attachment": required},
	KindSignalSent:        {"signal": required},
	KindSignalMasked:      {"signal_mask": required},
	KindActorKey:          {"key_change": required},
	KindSubjectErased:     {"erasure": required},
	KindTolerated:         {"toleration": required},
}

// Kinds returns every kind of event, sorted.
func Kinds() []Kind {
	kinds := make([]Kind, 0, len(kindFields))
	for k := range kindFields {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	return kinds
}

// sessionKinds must name their session; other kinds may (an action, an
// elevation, a quarantine, a kill or a saga within one) or may not.
var sessionKinds = map[Kind]presence{
	KindSessionDelta: required, KindSessionCreated: required, KindSessionChanged: required,
	KindAction: optional, KindActionDenied: optional, KindHoldRequested: optional,
	KindElevationGranted: optional, KindElevationEnded: optional,
	KindQuarantineStarted: optional, KindQuarantineEnded: optional,
	KindAgentKilled: optional, KindSagaStarted: optional, KindSagaStep: optional,
}

// validateParts checks the kind-specific parts of an event.
func (e *Event) validateParts() error {
	if e.Log != nil && e.Log.Energy != nil {
		if err := e.Log.Energy.validate(); err != nil {
			return err
		}
	}
	if e.Status != nil {
		if err := e.Status.validate(); err != nil {
			return err
		}
	}
	if e.Envelope != nil {
		if err := e.Envelope.validate(); err != nil {
			return err
		}
	}
	if e.EnvelopeEnd != nil {
		if !ValidEnvelopeID(e.EnvelopeEnd.ID) {
			return fmt.Errorf("envelope id %q is not valid", e.EnvelopeEnd.ID)
		}
		if err := validateText("revocation reason", e.EnvelopeEnd.Reason, 1024); err != nil {
			return err
		}
	}
	if e.Production != nil {
		if err := e.Production.validate(); err != nil {
			return err
		}
	}
	if e.Denial != nil {
		if err := e.Denial.validate(); err != nil {
			return err
		}
	}
	if e.Hold != nil {
		if err := e.Hold.validate(e.Kind); err != nil {
			return err
		}
	}
	if e.Session != "" && !delta.ValidIdentifier(e.Session) {
		return fmt.Errorf("session %q does not match ^[a-zA-Z0-9]([a-zA-Z0-9._:-]*[a-zA-Z0-9])?$ (at most 256)", e.Session)
	}
	if e.Delta != nil {
		if err := e.Delta.Validate(); err != nil {
			return err
		}
		d := e.Delta
		if d.SessionID != e.Session || d.AgentDID != e.Actor || d.Timestamp != e.Time.String() {
			return fmt.Errorf("delta %s: session_id, agent_did and timestamp must be the event's session, actor and time", d.DeltaID)
		}
	}
	if e.Action != nil && e.Action.Envelope != "" && !ValidEnvelopeID(e.Action.Envelope) {
		return fmt.Errorf("action envelope %q is not an envelope id", e.Action.Envelope)
	}
	return nil
}

func (a *ActorRecord) validate() error {
	if !ValidActorID(a.ID) {
		return fmt.Errorf("actor id %q is not valid (lower-case letters, digits, '-', at most 64)", a.ID)
	}
	if a.Kind != Human && a.Kind != Agent {
		return fmt.Errorf("actor %s: kind %q is neither human nor agent", a.ID, a.Kind)
	}
	if a.Name == "" || len(a.Name) > 256 {
		return fmt.Errorf("actor %s: name must be 1 to 256 bytes", a.ID)
	}
	if !utf8.ValidString(a.Name) || !utf8.ValidString(a.Purpose) {
		return fmt.Errorf("actor %s: name and purpose must be UTF-8", a.ID)
	}
	if len(a.Purpose) > 4096 {
		return fmt.Errorf("actor %s: purpose is longer than 4096 bytes", a.ID)
	}
	if a.Kind == Agent && (a.Creator == "" || a.Purpose == "") {
		return fmt.Errorf("agent %s must declare its creator and purpose", a.ID)
	}
	if a.Creator != "" && !ValidActorID(a.Creator) {
		return fmt.Errorf("actor %s: creator %q is not a valid actor id", a.ID, a.Creator)
	}
	if err := validateTime("actor "+a.ID+" expiry", a.Expires); err != nil {
		return err
	}
	if err := validateGrants("actor "+a.ID, a.Grants); err != nil {
		return err
	}
	if a.Share > MaxEnergy || a.Energy > MaxEnergy {
		return fmt.Errorf("actor %s: share and energy must be at most 2^53", a.ID)
	}
	if a.SigningKey != "" {
		if _, err := ParseSigningKey(a.SigningKey); err != nil {
			return fmt.Errorf("actor %s: %w", a.ID, err)
		}
	}
	if !hexHashPattern.MatchString(a.CredentialSHA256) {
		return fmt.Errorf("actor %s: credential_sha256 is not 64 lower-case hex digits", a.ID)
	}
	return nil
}

// MaxTargetSize bounds an action target.
const MaxTargetSize = 1024

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
		switch {
		case a.Payload != nil || a.PayloadHash != "":
			return fmt.Errorf("action on %q carries a sealed payload and a payload or payload_hash; a sealed payload is in place of them", a.Target)
		case a.Type == Execute:
			return fmt.Errorf("action on %q: an execute payload is read by the rules and cannot be sealed", a.Target)
		}
		if err := a.Sealed.validate(); err != nil {
			return fmt.Errorf("action on %q: %w", a.Target, err)
		}
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
