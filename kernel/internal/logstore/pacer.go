package logstore

import (
	"context"
	"time"

	"github.com/annal-dev/annal/internal/ctxsleep"
)

// pacer keeps a loop's work to a share of its time.
type pacer struct {
	share  float64
	now    func() time.Time
	sleep  func(context.Context, time.Duration) error
	since  time.Time     // when the current stretch of work began
	worked time.Duration // work since the last rest
}

func newPacer(share float64) *pacer {
	return &pacer{share: share, now: time.Now, sleep: ctxsleep.Sleep, since: time.Now()}
}

// paceStretch is the work between rests: long enough that a rest's timer
// costs nothing beside it, short enough that a rest is not noticed.
const paceStretch = 20 * time.Millisecond

// rest ends a step of work; once the steps since the last rest make a
// stretch, it sleeps so that they are share of the time. It says why the
// loop must stop: ctx ended.
func (p *pacer) rest(ctx context.Context) error {
	if err := ctx.Err(); err != nil || p.share >= 1 {
		return err
	}
	now := p.now()
	p.worked += now.Sub(p.since)
	p.since = now
	if p.worked < paceStretch {
		return nil
	}
	pause := time.Duration(float64(p.worked) * (1/p.share - 1))
	p.worked = 0
	if err := p.sleep(ctx, pause); err != nil {
		return err
	}
	p.since = p.now()
	return nil
}
