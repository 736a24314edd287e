package workload

import (
	"net/url"

	"github.com/annal-dev/annal/api"
)

// read sends one of the reads: they change nothing, and must not fail.
func (wk *worker) read() {
	ctx, cancel := wk.ctx()
	defer cancel()
	h := wk.w.human(wk.rng)
	a := wk.w.agent(wk.rng)
	if a == nil {
		a = h
	}
	var err error
	name := ""
	switch wk.rng.IntN(16) {
	case 0:
		name = "read.history"
		q := url.Values{"limit": {"50"}}
		if wk.chance(2) {
			q.Set("actor", a.id)
		}
		_, err = h.plain.History(ctx, q)
	case 1:
		name = "read.holds"
		var hs []api.Hold
		hs, err = h.plain.Holds(ctx, "pending")
		for _, x := range hs {
			if wk.chance(4) {
				wk.w.addHold(&hold{id: x.ID, agent: x.Actor, envelope: x.Envelope})
			}
		}
	case 2:
		name = "read.actor"
		_, err = h.plain.Actor(ctx, a.id)
	case 3:
		name = "read.envelopes"
		_, err = a.plain.Envelopes(ctx)
	case 4:
		name = "read.sessions"
		_, err = h.plain.Sessions(ctx)
	case 5:
		name = "read.session"
		if s := wk.w.session(wk.rng); s != nil {
			_, err = h.plain.Session(ctx, s.id)
		}
	case 6:
		name = "read.sagas"
		_, err = a.plain.Sagas(ctx)
	case 7:
		name = "read.may-ever"
		_, err = a.plain.MayEver(ctx, []api.ActionName{{Type: "mutate", Target: "workspace/a.md"}, {Type: "execute", Target: "exec/deploy/x"}}, wk.chance(2))
	case 8:
		name = "read.rings"
		_, err = h.plain.Rings(ctx)
	case 9:
		name = "read.quarantines"
		_, err = h.plain.Quarantines(ctx)
	case 10:
		name = "read.signals"
		_, err = a.plain.Signals(ctx)
	case 11:
		name = "read.policies"
		_, err = a.plain.BindingPolicies(ctx)
	case 12:
		name = "read.deltas"
		if s := wk.w.session(wk.rng); s != nil {
			_, err = h.plain.Deltas(ctx, s.id)
		}
	case 13:
		name = "read.info"
		_, err = h.plain.Info(ctx)
	case 14:
		name = "read.whoami"
		_, err = a.plain.WhoAmI(ctx)
	default:
		name = "read.descriptors"
		_, err = h.plain.Descriptors(ctx)
	}
	wk.done(name, name+" by "+h.id, err, nil, expect{})
}
