package kernel

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/annal-dev/annal/kernel/event"
	"github.com/annal-dev/annal/kernel/saga"
)

// §15.2: a failed step's retry waits the linear backoff, retry n n × 1 s
// after the failure, by the kernel's clock: a start before it is refused
// and changes nothing; the log's times show each wait.
func TestSpec004_15_2_RetryWaitsLinearBackoff(t *testing.T) {
	g := openGov(t)
	ctx := context.Background()
	a := g.ringAgent(ptr(0.8), false)
	step := saga.NewStepSpec("push", "push", "unpush")
	step.MaxRetries = 3
	if _, _, err := g.StartSaga(ctx, a, "flaky", "", []saga.StepSpec{step}); err != nil {
		t.Fatal(err)
	}
	report := func(tr string) (*Receipt, error) {
		return g.ReportSagaStep(ctx, a, "flaky", SagaReport{Step: "push", Transition: tr, Reason: "test"})
	}
	var starts []uint64
	var failedAt []time.Time
	for attempt := 1; attempt <= 3; attempt++ {
		rc, err := report(event.SagaStart)
		if err != nil {
			t.Fatalf("attempt %d: %v", attempt, err)
		}
		starts = append(starts, rc.Index)
		if _, err := report(event.SagaFailed); err != nil {
			t.Fatal(err)
		}
		failedAt = append(failedAt, g.clock.Now())
		wait := time.Duration(attempt) * time.Second
		v, _ := g.SagaStatus("flaky")
		if v.RetryAfterSeconds != wait.Seconds() || v.RetryAt == nil || !v.RetryAt.Time.Equal(g.clock.Now().Add(wait)) {
			t.Fatalf("after failure %d: retry after %v at %v", attempt, v.RetryAfterSeconds, v.RetryAt)
		}
		size := g.size()
		g.clock.advance(wait - time.Millisecond)
		if _, err := report(event.SagaStart); !errors.Is(err, ErrConflict) {
			t.Fatalf("retry %d started %v before its backoff ended: %v", attempt, wait-time.Millisecond, err)
		}
		if g.size() != size {
			t.Fatal("a refused retry was logged")
		}
		g.clock.advance(time.Millisecond)
	}
	rc, err := report(event.SagaStart)
	if err != nil {
		t.Fatal(err)
	}
	starts = append(starts, rc.Index)
	// The log shows the waits: each start is n s after the failure before it.
	for n := 1; n < len(starts); n++ {
		entry, err := g.Entry(ctx, starts[n])
		if err != nil {
			t.Fatal(err)
		}
		ev, err := event.Parse(entry)
		if err != nil {
			t.Fatal(err)
		}
		if got := ev.Time.Time.Sub(failedAt[n-1]); got != time.Duration(n)*time.Second {
			t.Errorf("start %d is %v after the failure before it, want %v", n+1, got, time.Duration(n)*time.Second)
		}
	}
}
