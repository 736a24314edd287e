package workload

import (
	"context"
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
	r := reads[wk.rng.IntN(len(reads))]
	err := r.send(ctx, wk, h, a)
	wk.done(r.name, r.name+" by "+h.id, err, nil, expect{})
}

// reads are the reads read draws from, each as likely: its operation's
// name, and how to send it as a human h or an agent a (h when there is
// none).
var reads = []struct {
	name string
	send func(ctx context.Context, wk *worker, h, a *actor) error
}{
	{"read.history", func(ctx context.Context, wk *worker, h, a *actor) error {
		q := url.Values{"limit": {"50"}}
		if wk.chance(2) {
			q.Set("actor", a.id)
		}
		_, err := h.plain.History(ctx, q)
		return err
	}},
	{"read.holds", func(ctx context.Context, wk *worker, h, a *actor) error {
		hs, err := h.plain.Holds(ctx, "pending")
		for _, x := range hs {
			if wk.chance(4) {
				wk.w.addHold(&hold{id: x.ID, agent: x.Actor, envelope: x.Envelope})
			}
		}
		return err
	}},
	{"read.actor", func(ctx context.Context, wk *worker, h, a *actor) error {
		_, err := h.plain.Actor(ctx, a.id)
		return err
	}},
	{"read.envelopes", func(ctx context.Context, wk *worker, h, a *actor) error {
		_, err := a.plain.Envelopes(ctx)
		return err
	}},
	{"read.sessions", func(ctx context.Context, wk *worker, h, a *actor) error {
		_, err := h.plain.Sessions(ctx)
		return err
	}},
	{"read.session", func(ctx context.Context, wk *worker, h, a *actor) error {
		s := wk.w.session(wk.rng)
		if s == nil {
			return nil
		}
		_, err := h.plain.Session(ctx, s.id)
		return err
	}},
	{"read.sagas", func(ctx context.Context, wk *worker, h, a *actor) error {
		_, err := a.plain.Sagas(ctx)
		return err
	}},
	{"read.may-ever", func(ctx context.Context, wk *worker, h, a *actor) error {
		_, err := a.plain.MayEver(ctx, []api.ActionName{{Type: "mutate", Target: "workspace/a.md"}, {Type: "execute", Target: "exec/deploy/x"}}, wk.chance(2))
		return err
	}},
	{"read.rings", func(ctx context.Context, wk *worker, h, a *actor) error {
		_, err := h.plain.Rings(ctx)
		return err
	}},
	{"read.quarantines", func(ctx context.Context, wk *worker, h, a *actor) error {
		_, err := h.plain.Quarantines(ctx)
		return err
	}},
	{"read.signals", func(ctx context.Context, wk *worker, h, a *actor) error {
		_, err := a.plain.Signals(ctx)
		return err
	}},
	{"read.policies", func(ctx context.Context, wk *worker, h, a *actor) error {
		_, err := a.plain.BindingPolicies(ctx)
		return err
	}},
	{"read.deltas", func(ctx context.Context, wk *worker, h, a *actor) error {
		s := wk.w.session(wk.rng)
		if s == nil {
			return nil
		}
		_, err := h.plain.Deltas(ctx, s.id)
		return err
	}},
	{"read.info", func(ctx context.Context, wk *worker, h, a *actor) error {
		_, err := h.plain.Info(ctx)
		return err
	}},
	{"read.whoami", func(ctx context.Context, wk *worker, h, a *actor) error {
		_, err := a.plain.WhoAmI(ctx)
		return err
	}},
	{"read.descriptors", func(ctx context.Context, wk *worker, h, a *actor) error {
		_, err := h.plain.Descriptors(ctx)
		return err
	}},
}
