package kernel

import (
	"context"
	"math/bits"
	"slices"
	"time"

	"github.com/annal-dev/annal/kernel/event"
)

// idleProductionTicks is how many ticks an idle kernel lets accumulate
// before it logs them: energy exists only once its energy.produced event is
// durable, and a log that grows by one entry a second while nothing
// happens helps nobody.
const idleProductionTicks = 60

// producer logs energy production (Def. 4.15–4.16): every tick produces
// PerTick units, shared among the active actors with a share by their
// shares. Ticks accumulate and are logged in one event when the kernel has
// done anything since the last one, or after idleProductionTicks.
type producer struct {
	pending uint64 // ticks not yet logged
}

// credits splits ticks × perTick among the active actors with a share: each
// gets the floor of its proportion, and the units left over go one each to
// actors in id order, so the split is exact and the same on every replay.
// The caller holds k.mu.
func (k *Kernel) credits(ticks uint64) []event.Credit {
	type holder struct {
		id    string
		share uint64
	}
	var hs []holder
	var total uint64
	for id, a := range k.ledger.Actors {
		if a.Active() && a.Share > 0 {
			hs = append(hs, holder{id, a.Share})
			total += a.Share
		}
	}
	if total == 0 {
		return nil
	}
	slices.SortFunc(hs, func(a, b holder) int {
		if a.id < b.id {
			return -1
		}
		return 1
	})
	if len(hs) > event.MaxCredits {
		hs = hs[:event.MaxCredits]
		k.logger.Warn("more actors with a share than one energy event can credit; the rest get nothing this time", "max", event.MaxCredits)
	}
	produced := ticks * k.ledger.Energy.PerTick
	out := make([]event.Credit, len(hs))
	var given uint64
	for i, h := range hs {
		// ⌊produced × share / total⌋ in 128 bits: share ≤ total, so the
		// quotient fits.
		hi, lo := bits.Mul64(produced, h.share)
		amt, _ := bits.Div64(hi, lo, total)
		out[i] = event.Credit{Actor: h.id, Amount: amt}
		given += amt
	}
	for i := 0; given < produced; i = (i + 1) % len(out) {
		out[i].Amount++
		given++
	}
	return slices.DeleteFunc(out, func(c event.Credit) bool { return c.Amount == 0 })
}

// produceLoop ticks until stop is closed.
func (k *Kernel) produceLoop(stop <-chan struct{}) {
	tick := time.Duration(k.ledger.Energy.TickMillis) * time.Millisecond
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			k.produce(context.Background(), false)
		}
	}
}

// produce counts one tick and logs the ticks pending when it is time, or
// at once if force is set.
func (k *Kernel) produce(ctx context.Context, force bool) {
	k.mu.Lock()
	if !force {
		k.prod.pending++
	}
	ticks := k.prod.pending
	busy := k.ledger.Size != k.lastProducedAt+1
	if ticks == 0 || k.failed != nil || (!force && !busy && ticks < idleProductionTicks) {
		k.mu.Unlock()
		return
	}
	credits := k.credits(ticks)
	k.prod.pending = 0
	k.mu.Unlock()
	if len(credits) == 0 {
		return
	}
	id, err := newEventID()
	if err != nil {
		return
	}
	ev := &event.Event{V: event.Version, ID: id, Time: event.FormatTime(k.cfg.Now()), Kind: event.KindEnergyProduced,
		Actor: event.KernelActor, Production: &event.Production{Ticks: ticks, Credits: credits}}
	index, err := k.appendEvent(ctx, ev)
	if err != nil {
		k.logger.Error("log energy production", "err", err)
		return
	}
	k.mu.Lock()
	k.lastProducedAt = index
	k.mu.Unlock()
}
