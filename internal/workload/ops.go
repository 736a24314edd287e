package workload

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/annal-dev/annal/api"
	"github.com/annal-dev/annal/client"
)

// op is one kind of operation a worker picks, with its weight.
type op struct {
	name   string
	weight int
	fn     func(*worker)
}

// ops are the operations and their weights. Actions dominate; every
// other request kind comes often enough to meet them; the races
// (races.go) send their requests at the same instant on purpose.
var ops = []op{
	{"act", 300, (*worker).act},
	{"hold.answer", 70, (*worker).answerHold},
	{"agent.create", 25, (*worker).createAgent},
	{"human.create", 4, (*worker).createHuman},
	{"actor.status", 12, (*worker).setStatus},
	{"envelope.issue", 30, (*worker).issueEnvelope},
	{"envelope.delegate", 25, (*worker).delegateEnvelope},
	{"envelope.revoke", 10, (*worker).revokeEnvelope},
	{"key.set", 25, (*worker).setKey},
	{"ring.assign", 15, (*worker).assignRing},
	{"rings.config", 3, (*worker).configureRings},
	{"descriptor.register", 3, (*worker).registerDescriptor},
	{"elevation", 15, (*worker).elevate},
	{"elevation.revoke", 6, (*worker).revokeElevation},
	{"session.create", 4, (*worker).createSession},
	{"session.change", 45, (*worker).changeSession},
	{"session.delta", 20, (*worker).appendDelta},
	{"session.coordinate", 15, (*worker).coordinate},
	{"quarantine", 7, (*worker).quarantine},
	{"release", 12, (*worker).release},
	{"signal", 14, (*worker).signal},
	{"signal.mask", 6, (*worker).mask},
	{"saga.start", 15, (*worker).startSaga},
	{"saga.step", 30, (*worker).reportStep},
	{"policy.set", 6, (*worker).setPolicy},
	{"policy.attach", 12, (*worker).attachPolicy},
	{"erase", 5, (*worker).erase},
	{"kill", 4, (*worker).kill},
	{"read", 40, (*worker).read},
	{"race.shares", 3, (*worker).raceShares},
	{"race.approve-vs-key", 10, (*worker).raceApproveVsKey},
	{"race.kill-handoff", 8, (*worker).raceKillHandoff},
	{"race.approve-vs-control", 14, (*worker).raceApproveVsControl},
	{"race.budget", 4, (*worker).raceBudget},
}

// OpNames lists the operations a Config may name in Only and Skip.
func OpNames() []string {
	var names []string
	for _, o := range ops {
		names = append(names, o.name)
	}
	return names
}

// selectOps is the operations a run draws from: Only's (all when empty),
// less Skip's.
func selectOps(only, skip []string) ([]op, error) {
	known := map[string]bool{}
	for _, o := range ops {
		known[o.name] = true
	}
	for _, n := range append(slices.Clone(only), skip...) {
		if !known[n] {
			return nil, fmt.Errorf("workload: no operation %q (there are %s)", n, strings.Join(OpNames(), ", "))
		}
	}
	var sel []op
	for _, o := range ops {
		if (len(only) == 0 || slices.Contains(only, o.name)) && !slices.Contains(skip, o.name) {
			sel = append(sel, o)
		}
	}
	if len(sel) == 0 {
		return nil, errors.New("workload: no operation left to run")
	}
	return sel, nil
}

// step runs one operation: a new agent when too few are alive, else one
// drawn by weight.
func (wk *worker) step() {
	if wk.w.liveCount() < minAgents {
		wk.createAgent()
		return
	}
	n := wk.rng.IntN(wk.r.weight)
	for _, o := range wk.r.ops {
		if n < o.weight {
			o.fn(wk)
			return
		}
		n -= o.weight
	}
}

// oneOf returns one of xs.
func oneOf[T any](wk *worker, xs ...T) T { return xs[wk.rng.IntN(len(xs))] }

func (wk *worker) chance(n int) bool { return wk.rng.IntN(n) == 0 }

// The grants of humans, agents and the envelopes issued to agents.
var (
	humanGrants = []api.Grant{
		{Pattern: "workspace/**", Actions: []string{"*"}},
		{Pattern: "sessions/**", Actions: []string{"*"}},
		{Pattern: "exec/**", Actions: []string{"*"}},
		{Pattern: "crm/**", Actions: []string{"*"}},
		{Pattern: "payments/**", Actions: []string{"*"}},
	}
	agentGrants = []api.Grant{
		{Pattern: "workspace/**", Actions: []string{"observe", "create", "mutate", "execute"}},
		{Pattern: "sessions/**", Actions: []string{"observe", "create", "mutate"}},
		{Pattern: "exec/**", Actions: []string{"execute"}},
		{Pattern: "crm/**", Actions: []string{"create", "mutate"}},
		{Pattern: "payments/**", Actions: []string{"mutate"}},
	}
	envelopeGrants = []api.Grant{
		{Pattern: "workspace/**", Actions: []string{"create", "mutate", "execute"}},
		{Pattern: "sessions/**", Actions: []string{"create", "mutate"}},
		{Pattern: "exec/**", Actions: []string{"execute"}},
		{Pattern: "crm/**", Actions: []string{"create", "mutate"}},
		{Pattern: "payments/**", Actions: []string{"mutate"}},
	}
	holdRules = []api.Grant{
		{Pattern: "workspace/release/*", Actions: []string{"mutate"}},
		{Pattern: "exec/deploy/*", Actions: []string{"execute"}},
	}
	delegatedGrants = []api.Grant{
		{Pattern: "workspace/**", Actions: []string{"mutate"}},
		{Pattern: "exec/**", Actions: []string{"execute"}},
		{Pattern: "crm/**", Actions: []string{"create"}},
	}
)

func oid(s string) string {
	h := sha256.Sum256([]byte(s))
	return "sha256:" + hex.EncodeToString(h[:])
}

// overseer is who acts on an agent: most often its creator, else root,
// now and then another human (refused).
func (wk *worker) overseer(a *actor) *actor {
	switch n := wk.rng.IntN(10); {
	case n < 5:
		if c := wk.w.actorByID(a.creator); c != nil {
			return c
		}
		return wk.w.root
	case n < 9:
		return wk.w.root
	default:
		return wk.w.human(wk.rng)
	}
}

// ctl sends one change whose answer is a receipt and records it.
func (wk *worker) ctl(op, desc string, by *actor, kind string, f func(ctx context.Context, c *client.Client) (*api.Receipt, error)) (*api.Receipt, string) {
	return wk.ctlWith(by.client(wk.w, wk.rng), op, desc, by, kind, f)
}

// ctlWith is ctl with the client chosen; it draws nothing from the
// worker's source, so races may call it from their goroutines.
func (wk *worker) ctlWith(c *client.Client, op, desc string, by *actor, kind string, f func(ctx context.Context, c *client.Client) (*api.Receipt, error)) (*api.Receipt, string) {
	ctx, cancel := wk.ctx()
	defer cancel()
	rc, err := f(ctx, c)
	if err != nil {
		rc = nil
	}
	return rc, wk.done(op, desc+" by "+by.id, err, rc, expect{kinds: kinds(kind), actors: actors(by.id)})
}

// ctlC is ctl for a change answered with a Controlled.
func (wk *worker) ctlC(op, desc string, by *actor, kind string, f func(ctx context.Context, c *client.Client) (*api.Controlled, error)) (*api.Controlled, string) {
	return wk.ctlCWith(by.client(wk.w, wk.rng), op, desc, by, kind, f)
}

// ctlCWith is ctlC with the client chosen (for races).
func (wk *worker) ctlCWith(c *client.Client, op, desc string, by *actor, kind string, f func(ctx context.Context, c *client.Client) (*api.Controlled, error)) (*api.Controlled, string) {
	var cc *api.Controlled
	rc, out := wk.ctlWith(c, op, desc, by, kind, func(ctx context.Context, c *client.Client) (*api.Receipt, error) {
		var err error
		cc, err = f(ctx, c)
		if err != nil {
			return nil, err
		}
		return &cc.Receipt, nil
	})
	if rc == nil {
		cc = nil
	}
	return cc, out
}
