package workload

import (
	"crypto/rand"
	"fmt"
	mrand "math/rand/v2"
	"regexp"
	"slices"
	"sync"

	"golang.org/x/mod/sumdb/note"

	"github.com/annal-dev/annal/client"
)

// The world is what the workload believes about the kernel's objects: a
// small pool of each kind, so that concurrent operations collide on them.
// Beliefs may be stale (another worker froze the agent a moment ago): the
// kernel is the judge, and a refusal is an answer like any other.

// actor is a human or an agent with its credential and signing key.
type actor struct {
	id, name string
	human    bool
	creator  string
	cred     string
	// plain sends unsigned requests; signed signs each with the actor's
	// key (skey; vkey is its verifier key).
	plain, signed *client.Client
	skey, vkey    string
	trust         float64

	// Beliefs, under world.mu.
	seals         bool // the kernel seals its payloads
	keyOn         bool // the kernel holds vkey as the actor's key
	requireSigned bool
	dead          bool // killed or terminated, as far as the workload knows
	frozen        bool
	stopped       bool // by SIGSTOP
	quarantined   bool // in all sessions
}

// The flags an agent's refusals and answers tell about it.
const (
	flagFrozen = iota
	flagStopped
	flagDead
	flagQuarantined
)

// standing finds what a refusal says about an agent's standing.
var standing = regexp.MustCompile(`(?:actor|agent) (agent-[0-9a-f]+) (?:is (frozen|terminated|quarantined)|(is stopped) by SIGSTOP)`)

// learn notes what a refusal's message says about an agent: that it is
// frozen, stopped or terminated, though the workload did not know.
func (w *world) learn(msg string) {
	for _, m := range standing.FindAllStringSubmatch(msg, -1) {
		switch {
		case m[2] == "frozen":
			w.setFlag(m[1], flagFrozen, true)
		case m[2] == "terminated":
			w.markDead(m[1])
		case m[2] == "quarantined":
			w.setFlag(m[1], flagQuarantined, true)
		case m[3] != "":
			w.setFlag(m[1], flagStopped, true)
		}
	}
}

// setFlag sets or clears a flag of the agent id.
func (w *world) setFlag(id string, flag int, on bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, a := range w.agents {
		if a.id == id {
			switch flag {
			case flagFrozen:
				a.frozen = on
			case flagStopped:
				a.stopped = on
			case flagDead:
				a.dead = on
			case flagQuarantined:
				a.quarantined = on
			}
		}
	}
}

// flagged picks a live agent with the flag set, or nil.
func (w *world) flagged(rng *mrand.Rand, flag int) *actor {
	w.mu.Lock()
	defer w.mu.Unlock()
	var xs []*actor
	for _, a := range w.liveAgents() {
		if flag == flagFrozen && a.frozen || flag == flagStopped && a.stopped || flag == flagQuarantined && a.quarantined {
			xs = append(xs, a)
		}
	}
	a, _ := pick(rng, xs)
	return a
}

// client is the client this actor uses for a request: the signed one when
// it believes the kernel requires signatures, and now and then the other
// one, so that both answers are exercised.
func (a *actor) client(w *world, rng *mrand.Rand) *client.Client {
	w.mu.Lock()
	want := a.requireSigned || (a.keyOn && rng.IntN(3) == 0)
	w.mu.Unlock()
	if a.id != "root" && rng.IntN(40) == 0 {
		want = !want
	}
	if want {
		return a.signed
	}
	return a.plain
}

type envelope struct {
	id, holder, issuer, parent string
	holdRules, seals           bool
	revoked                    bool
}

type session struct {
	id, creator  string
	participants []string
	state        string
	// serializable and strong: the session takes intent locks, and
	// acknowledgements (set at creation, never changed).
	serializable, strong bool
}

type saga struct {
	id, owner, session string
	steps              []string
	// cur and running: the step the workload believes is next, and
	// whether it runs (under world.mu).
	cur     int
	running bool
}

// hold is a held action waiting for a human.
type hold struct {
	id, agent, envelope string
	// intent is set when the held action is an execute intent: its
	// approval's index is what the result names.
	intent *intent
}

// intent is an execute intent that may still take its result.
type intent struct {
	agent                            *actor
	index                            uint64
	target, envelope, session, input string
}

type world struct {
	url string

	mu        sync.Mutex
	root      *actor
	humans    []*actor // root first
	agents    []*actor
	envelopes []*envelope
	sessions  []*session
	sagas     []*saga
	holds     []*hold
	intents   []*intent
	subjects  []string
	policies  []string
	elevs     []string
	next      uint64
}

// Pool bounds: small, so that operations meet on the same objects.
const (
	maxHumans    = 6
	maxAgents    = 16
	minAgents    = 6
	maxEnvelopes = 40
	maxSessions  = 6
	maxSagas     = 12
	maxHolds     = 48
	maxIntents   = 32
	maxSubjects  = 4
	maxPolicies  = 6
	maxElevs     = 8
)

// newKey makes a signing key for an actor.
func newKey(name string) (skey, vkey string, err error) {
	return note.GenerateKey(rand.Reader, "workload-"+name)
}

// newActor makes the clients of an actor with its signing key.
func newActor(url, id, name, cred string, human bool, creator, skey, vkey string) (*actor, error) {
	plain, err := client.New(url, cred)
	if err != nil {
		return nil, err
	}
	signed, err := client.New(url, cred)
	if err != nil {
		return nil, err
	}
	if _, err := signed.WithSigningKey(skey); err != nil {
		return nil, err
	}
	return &actor{id: id, name: name, human: human, creator: creator, cred: cred, plain: plain, signed: signed, skey: skey, vkey: vkey}, nil
}

// name returns a new name with prefix, unique in the run.
func (w *world) name(prefix string) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.next++
	return fmt.Sprintf("%s-%d", prefix, w.next)
}

// hot picks an index below n, most often the first ones: the workload's
// bias to many operations on the same few objects.
func hot(rng *mrand.Rand, n int) int {
	f := rng.Float64()
	return int(f * f * float64(n))
}

func pick[T any](rng *mrand.Rand, xs []T) (T, bool) {
	var zero T
	if len(xs) == 0 {
		return zero, false
	}
	return xs[hot(rng, len(xs))], true
}

func (w *world) human(rng *mrand.Rand) *actor {
	w.mu.Lock()
	defer w.mu.Unlock()
	h, _ := pick(rng, w.humans)
	return h
}

// humanNotRoot is a human other than root, if there is one.
func (w *world) humanNotRoot(rng *mrand.Rand) *actor {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.humans) < 2 {
		return nil
	}
	h, _ := pick(rng, w.humans[1:])
	return h
}

// agent picks an agent, nearly always one believed alive.
func (w *world) agent(rng *mrand.Rand) *actor {
	w.mu.Lock()
	defer w.mu.Unlock()
	live := w.liveAgents()
	if len(live) == 0 || rng.IntN(50) == 0 {
		a, _ := pick(rng, w.agents)
		return a
	}
	a, _ := pick(rng, live)
	return a
}

// agentOf picks a live agent that creator created, or nil.
func (w *world) agentOf(rng *mrand.Rand, creator string) *actor {
	w.mu.Lock()
	defer w.mu.Unlock()
	var mine []*actor
	for _, a := range w.liveAgents() {
		if a.creator == creator {
			mine = append(mine, a)
		}
	}
	a, _ := pick(rng, mine)
	return a
}

func (w *world) liveAgents() []*actor {
	var live []*actor
	for _, a := range w.agents {
		if !a.dead {
			live = append(live, a)
		}
	}
	return live
}

func (w *world) liveCount() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.liveAgents())
}

func (w *world) actorByID(id string) *actor {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, a := range w.humans {
		if a.id == id {
			return a
		}
	}
	for _, a := range w.agents {
		if a.id == id {
			return a
		}
	}
	return nil
}

// addAgent adds a to the pool, in the place of one believed dead when the
// pool is full; a full pool of live agents keeps them (the same few
// objects) and a goes on without the world.
func (w *world) addAgent(a *actor) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.agents) >= maxAgents {
		i := slices.IndexFunc(w.agents, func(a *actor) bool { return a.dead })
		if i < 0 {
			return
		}
		w.agents = slices.Delete(w.agents, i, i+1)
	}
	w.agents = append(w.agents, a)
}

func (w *world) addHuman(h *actor) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.humans) < maxHumans {
		w.humans = append(w.humans, h)
	}
}

func (w *world) markDead(id string) { w.setFlag(id, flagDead, true) }

func (w *world) setKey(a *actor, on, require bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	a.keyOn, a.requireSigned = on, require
}

func (w *world) addEnvelope(e *envelope) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.envelopes = append(w.envelopes, e)
	if len(w.envelopes) > maxEnvelopes {
		if i := slices.IndexFunc(w.envelopes, func(e *envelope) bool { return e.revoked }); i >= 0 {
			w.envelopes = slices.Delete(w.envelopes, i, i+1)
		} else {
			w.envelopes = w.envelopes[1:]
		}
	}
}

// envelopeOf picks an envelope held by holder (holdRules: only one with
// hold rules), or nil.
func (w *world) envelopeOf(rng *mrand.Rand, holder string, holdRules bool) *envelope {
	w.mu.Lock()
	defer w.mu.Unlock()
	var mine []*envelope
	for _, e := range w.envelopes {
		if e.holder == holder && !e.revoked && (!holdRules || e.holdRules) {
			mine = append(mine, e)
		}
	}
	e, _ := pick(rng, mine)
	return e
}

func (w *world) envelopeByID(id string) *envelope {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, e := range w.envelopes {
		if e.id == id {
			return e
		}
	}
	return nil
}

func (w *world) anyEnvelope(rng *mrand.Rand) *envelope {
	w.mu.Lock()
	defer w.mu.Unlock()
	e, _ := pick(rng, w.envelopes)
	return e
}

func (w *world) revokeEnvelope(id string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, e := range w.envelopes {
		if e.id == id || e.parent == id {
			e.revoked = true
		}
	}
}

func (w *world) addSession(s *session) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.sessions = append(w.sessions, s)
	if len(w.sessions) > maxSessions {
		// Forget the ended first, then the oldest not yet started, so that
		// the active ones stay.
		i := -1
		for _, state := range []string{"ARCHIVED", "TERMINATING", "CREATED"} {
			if i = slices.IndexFunc(w.sessions, func(s *session) bool { return s.state == state }); i >= 0 {
				break
			}
		}
		w.sessions = slices.Delete(w.sessions, max(i, 0), max(i, 0)+1)
	}
}

// session picks a session, most often one not yet ending.
func (w *world) session(rng *mrand.Rand) *session {
	w.mu.Lock()
	defer w.mu.Unlock()
	var open []*session
	for _, s := range w.sessions {
		if s.state != "ARCHIVED" && (s.state != "TERMINATING" || rng.IntN(3) == 0) {
			open = append(open, s)
		}
	}
	if len(open) == 0 || rng.IntN(10) == 0 {
		open = w.sessions
	}
	s, _ := pick(rng, open)
	return s
}

// activeSession picks a session believed ACTIVE with participants, most
// often, else any.
func (w *world) activeSession(rng *mrand.Rand) *session {
	return w.activeSessionWhere(rng, func(*session) bool { return true })
}

// coordinatedSession picks, most often, a session believed ACTIVE with
// participants that takes intent locks or acknowledgements, else any.
func (w *world) coordinatedSession(rng *mrand.Rand) *session {
	return w.activeSessionWhere(rng, func(s *session) bool { return s.serializable || s.strong })
}

// activeSessionWhere picks, most often, a session believed ACTIVE with
// participants for which keep says yes, else any.
func (w *world) activeSessionWhere(rng *mrand.Rand, keep func(*session) bool) *session {
	w.mu.Lock()
	var active []*session
	for _, s := range w.sessions {
		if s.state == "ACTIVE" && len(s.participants) > 0 && keep(s) {
			active = append(active, s)
		}
	}
	w.mu.Unlock()
	if len(active) == 0 || rng.IntN(10) == 0 {
		return w.session(rng)
	}
	s, _ := pick(rng, active)
	return s
}

// sessionOf picks a session the agent believes it takes part in.
func (w *world) sessionOf(rng *mrand.Rand, agent string) *session {
	w.mu.Lock()
	defer w.mu.Unlock()
	var in []*session
	for _, s := range w.sessions {
		if slices.Contains(s.participants, agent) {
			in = append(in, s)
		}
	}
	s, _ := pick(rng, in)
	return s
}

func (w *world) sessionState(s *session, state string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	s.state = state
}

func (w *world) joined(s *session, agent string, in bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	i := slices.Index(s.participants, agent)
	switch {
	case in && i < 0:
		s.participants = append(s.participants, agent)
	case !in && i >= 0:
		s.participants = slices.Delete(s.participants, i, i+1)
	}
}

func (w *world) participant(rng *mrand.Rand, s *session) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	p, _ := pick(rng, s.participants)
	return p
}

func (w *world) addSaga(g *saga) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.sagas = keepNewest(w.sagas, g, maxSagas)
}

func (w *world) saga(rng *mrand.Rand) *saga {
	w.mu.Lock()
	defer w.mu.Unlock()
	g, _ := pick(rng, w.sagas)
	return g
}

func (w *world) addHold(h *hold) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.holds = keepNewest(w.holds, h, maxHolds)
}

func (w *world) hold(rng *mrand.Rand) *hold {
	w.mu.Lock()
	defer w.mu.Unlock()
	// The newest holds are the likeliest still pending.
	if len(w.holds) == 0 {
		return nil
	}
	return w.holds[len(w.holds)-1-hot(rng, len(w.holds))]
}

func (w *world) dropHold(id string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.holds = slices.DeleteFunc(w.holds, func(h *hold) bool { return h.id == id })
}

func (w *world) addIntent(in *intent) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.intents = keepNewest(w.intents, in, maxIntents)
}

// takeIntent picks an open intent; most often it is removed (its result
// goes in once), now and then left to have a second result refused.
func (w *world) takeIntent(rng *mrand.Rand) *intent {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.intents) == 0 {
		return nil
	}
	i := hot(rng, len(w.intents))
	in := w.intents[i]
	if rng.IntN(8) != 0 {
		w.intents = slices.Delete(w.intents, i, i+1)
	}
	return in
}

// subject picks a data subject for a sealed payload; new ones replace
// erased ones.
func (w *world) subject(rng *mrand.Rand) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.subjects) < maxSubjects || rng.IntN(20) == 0 {
		w.next++
		w.subjects = keepNewest(w.subjects, fmt.Sprintf("subj-%d", w.next), maxSubjects)
	}
	s, _ := pick(rng, w.subjects)
	return s
}

func (w *world) erased(subject string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.subjects = slices.DeleteFunc(w.subjects, func(s string) bool { return s == subject })
}

func (w *world) addPolicy(name string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !slices.Contains(w.policies, name) {
		w.policies = keepNewest(w.policies, name, maxPolicies)
	}
}

func (w *world) policy(rng *mrand.Rand) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	p, _ := pick(rng, w.policies)
	return p
}

func (w *world) addElevation(id string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.elevs = keepNewest(w.elevs, id, maxElevs)
}

func (w *world) elevation(rng *mrand.Rand) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	e, _ := pick(rng, w.elevs)
	return e
}

// keepNewest appends v to s and drops the oldest element past max: the
// world keeps a bounded set of recent objects of each kind.
func keepNewest[T any](s []T, v T, max int) []T {
	s = append(s, v)
	if len(s) > max {
		s = s[1:]
	}
	return s
}
