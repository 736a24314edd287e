package kernel

import (
	"context"
	"errors"
	"time"

	"github.com/annal-dev/annal/kernel/event"
	"github.com/annal-dev/annal/kernel/internal/ledger"
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
	k.prod.pending = 0
	k.mu.Unlock()
	d, err := k.decide(ctx, "produce", func(l *ledger.Ledger, _ event.Instant) (*event.Event, error) {
		credits := l.Credits(ticks)
		if len(credits) == 0 {
			return nil, errNothingProduced
		}
		return &event.Event{Kind: event.KindEnergyProduced, Actor: event.KernelActor, Production: &event.Production{Ticks: ticks, Credits: credits}}, nil
	})
	if err != nil {
		if !errors.Is(err, errNothingProduced) {
			k.logger.Error("log energy production", "err", err)
		}
		return
	}
	k.mu.Lock()
	k.lastProducedAt = d.index
	k.mu.Unlock()
}

// errNothingProduced: no active actor holds a share, so there is nothing
// to log.
var errNothingProduced = errors.New("no actor holds a share of production")
