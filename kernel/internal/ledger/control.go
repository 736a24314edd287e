package ledger

import (
	"time"

	"github.com/annal-dev/annal/kernel/event"
	"github.com/annal-dev/annal/kernel/policy"
	"github.com/annal-dev/annal/kernel/ring"
	"github.com/annal-dev/annal/kernel/saga"
	"github.com/annal-dev/annal/kernel/session"
)

// Control is the execution control state (Agent Hypervisor Execution
// Control 1.0, Agent OS policies): what the fold of agent.ring,
// elevation.*, session.*, quarantine.*, agent.killed, saga.*, policy.* and
// signal.* events gives. Like the rest of the ledger it reads no clock:
// whether an elevation or a quarantine has run out by now is the
// kernel's question, answered from the expiry recorded here.
type Control struct {
	RingConfig  event.RingConfig       `json:"ring_config"`
	Descriptors map[string]*Descriptor `json:"descriptors"`
	Elevations  map[string]*Elevation  `json:"elevations"`
	Sessions    map[string]*Session    `json:"sessions"`
	// Quarantines are keyed by QuarantineKey(agent, session).
	Quarantines map[string]*Quarantine `json:"quarantines"`
	Sagas       map[string]*Saga       `json:"sagas"`
	Policies    map[string]*Policy     `json:"policies"`
	Kills       uint64                 `json:"kills"`
}

func newControl() Control {
	return Control{
		Descriptors: map[string]*Descriptor{}, Elevations: map[string]*Elevation{}, Sessions: map[string]*Session{},
		Quarantines: map[string]*Quarantine{}, Sagas: map[string]*Saga{}, Policies: map[string]*Policy{},
	}
}

// Descriptor is a registered action descriptor and what it classifies.
type Descriptor struct {
	event.DescriptorRegistration
	Version      uint64 `json:"version"`
	RegisteredAt uint64 `json:"registered_at"`
}

// Elevation is a granted elevation; Ended is empty while it holds.
type Elevation struct {
	event.Elevation
	Session   string `json:"session,omitempty"`
	GrantedAt uint64 `json:"granted_at"`
	Ended     string `json:"ended,omitempty"`
	EndedAt   uint64 `json:"ended_at,omitempty"`
}

// Session is a session, its chain of deltas and where they are in the log.
type Session struct {
	session.Session
	CreatedIndex uint64 `json:"created_index"`
	// DeltaHead is the delta_hash of the last delta (ZeroHash before any).
	DeltaHead string `json:"delta_head"`
	// DeltaIndices are the log indices of the session's deltas, in order.
	DeltaIndices []uint64 `json:"delta_indices,omitempty"`
	// Files are the session's files (path → content hash) after its last
	// delta: what the next delta's changes must fit.
	Files map[string]string `json:"files,omitempty"`
	// Turns maps each turn id of the chain to its delta's log index.
	Turns map[string]uint64 `json:"turns,omitempty"`
}

// Quarantine is a quarantine record; Ended is empty while it holds.
type Quarantine struct {
	event.Quarantine
	Session string `json:"session,omitempty"`
	Ended   string `json:"ended,omitempty"`
}

// QuarantineKey keys a quarantine: one agent in one session, or in every
// session when session is empty.
func QuarantineKey(agent, session string) string {
	if session == "" {
		return agent
	}
	return agent + "/" + session
}

// Saga is a saga and when its steps started.
type Saga struct {
	saga.Saga
	StartedAt uint64 `json:"started_at"`
	// StepStarted is the event time each step (or its compensation) last
	// started, for the step timeout (§15.2).
	StepStarted map[string]string `json:"step_started,omitempty"`
}

// Policy is the latest version of a named policy.
type Policy struct {
	policy.Policy
	Version uint64 `json:"version"`
	SetAt   uint64 `json:"set_at"`
}

// QueuedSignal is a signal handed to an agent's own handler.
type QueuedSignal struct {
	Index  uint64 `json:"index"`
	Signal string `json:"signal"`
	Reason string `json:"reason,omitempty"`
}

// MaxQueuedSignals bounds what the ledger keeps of an agent's queue.
const MaxQueuedSignals = 32

// BaseRing is the agent's assigned ring, Ring 3 until a human assigns one
// (§3.3). Humans stand outside the rings.
func (a *Actor) BaseRing() ring.Ring {
	if a.Ring == nil {
		return ring.Default
	}
	return ring.Ring(*a.Ring)
}

// ActiveElevation returns the agent's elevation in session (or for all
// sessions, "") that holds at time at: not ended, and not run out by then.
// An elevation can have run out before the kernel records its end, so an
// agent may have an ended-in-all-but-name one beside the one that holds;
// every one is looked at.
func (l *Ledger) ActiveElevation(agent, sess string, at time.Time) *Elevation {
	for _, id := range l.elevationsOf[agent] {
		if v := l.Elevations[id]; v.Ended == "" && v.Session == sess && !expiredBy(v.Expires, at) {
			return v
		}
	}
	return nil
}

// ElevationsOf lists the agent's elevations that have not ended.
func (l *Ledger) ElevationsOf(agent string) []*Elevation {
	var out []*Elevation
	for _, id := range l.elevationsOf[agent] {
		if v := l.Elevations[id]; v.Ended == "" {
			out = append(out, v)
		}
	}
	return out
}

func (l *Ledger) touch(key string) { l.dirty[key] = true }
