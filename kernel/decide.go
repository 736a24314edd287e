package kernel

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/annal-dev/annal/kernel/event"
	"github.com/annal-dev/annal/kernel/internal/ledger"
	"github.com/annal-dev/annal/kernel/internal/logstore"
	"github.com/annal-dev/annal/kernel/ring"
	"github.com/transparency-dev/tessera"
)

// builder builds the event a request asks for from the ledger as it is
// (the caller holds k.mu): its kind, actor and parts. It chooses what the
// kernel chooses (new ids, the envelope an agent acts under, the envelopes
// a kill revokes) and refuses only what the log cannot show (a request's
// form, a descriptor named but not logged). Every rule the log can show is
// the ledger's, which decide runs on what builder returns.
type builder func(l *ledger.Ledger, now event.Instant) (*event.Event, error)

// decided is an event the kernel decided, appended and folded.
type decided struct {
	ev    *event.Event
	entry []byte
	index uint64
}

// decide is the one path every event takes to the log:
//
//  1. under k.mu, build the event at the kernel's time now;
//  2. take its claims (ledger.Claims), or wait until they are free and
//     start again, so that no event it does not commute with is in flight;
//  3. run its kind's rule (ledger.Check) against the ledger it will be
//     folded onto: the durable ledger less the energy decided events hold;
//  4. hold the energy it draws, encode it and append it; the group
//     committer folds it before decide returns, and releases its claims
//     and energy in the same critical section;
//  5. if the sequencer kept the entry out of the log (its fold on the
//     state after every entry before it failed: a claim was missing), wait
//     until the durable ledger has folded what the sequencer had seen, and
//     start again; the caller gets the decision taken on that state.
//
// A refusal is a *Denial naming stage (the operation's, or for an action
// the pipeline stage of the gate) and the gate.
func (k *Kernel) decide(ctx context.Context, stage string, build builder) (*decided, error) {
	id, err := newEventID()
	if err != nil {
		return nil, err
	}
	d := &decision{k: k, ctx: ctx, stage: stage, id: id, traceID: traceIDOf(ctx)}
	for {
		ev, held, err := d.checkOnce(build)
		if err != nil {
			return nil, err
		}
		out, err := d.commit(ev, held)
		if errors.Is(err, errDecideAgain) {
			continue
		}
		return out, err
	}
}

// checkOnce runs check until the event's claims are free, as one decide
// stage (tracing.go): the checked event, or the refusal.
func (d *decision) checkOnce(build builder) (*event.Event, *checked, error) {
	span := d.k.startStage(d.ctx, SpanDecide, time.Time{})
	waits := 0
	for {
		ev, held, err := d.check(build)
		if ev == nil && err == nil {
			waits++ // its claims were busy and are free now: build again
			continue
		}
		if waits > 0 {
			span.waited(waits)
		}
		span.decided(d.built, err)
		return ev, held, err
	}
}

// decision is one call of decide, across its attempts.
type decision struct {
	k     *Kernel
	ctx   context.Context
	stage string
	id    string
	// waiting are the claims this decision is registered as waiting for:
	// readers of them yield until it has taken them or given up.
	waiting []ledger.Claim
	// redecided counts the attempts the sequencer kept out of the log.
	redecided int
	// traceID is the trace id of the request (traceIDOf), which the event
	// records; built is the event check last built, for its trace.
	traceID string
	built   *event.Event
}

// checked is what a checked event holds until it is folded: its claims,
// the energy it draws, and the request signature it carries.
type checked struct {
	claims    []ledger.Claim
	draw      ledger.Draw
	signature *RequestSignature
	// released is set once the claims and the draw are released (commit),
	// under k.mu; it is read without it.
	released atomic.Bool
}

// errDecideAgain: build, check and append the event again.
var errDecideAgain = errors.New("decide again")

func (d *decision) unlock() { d.k.mu.Unlock(); d.k.deciding.Unlock() }

// stopWaiting withdraws the decision's wait on claims (under k.mu).
func (d *decision) stopWaiting() {
	if d.waiting != nil {
		d.k.claims.wait(d.waiting, true)
		d.waiting = nil
	}
}

// check is steps 1 to 3 of decide, under k.mu: it builds the event, takes
// its claims and runs its rule, and holds the energy it draws. It returns
// with k.mu released: the checked event, or nil and no error when its
// claims were busy and are free now.
func (d *decision) check(build builder) (*event.Event, *checked, error) {
	k := d.k
	now := event.At(k.cfg.Now())
	k.deciding.Lock()
	k.mu.Lock()
	if k.failed != nil {
		err := k.stoppedDenial(d.stage)
		d.stopWaiting()
		d.unlock()
		return nil, nil, err
	}
	ev, err := build(k.ledger, now)
	if err != nil {
		d.stopWaiting()
		d.unlock()
		return nil, nil, err
	}
	ev.V, ev.Time = event.Version, now
	if ev.ID == "" {
		ev.ID = d.id
	}
	if ev.TraceID == "" {
		ev.TraceID = d.traceID
	}
	d.built = ev
	signature := attachSignature(d.ctx, ev)
	want := k.ledger.Claims(ev)
	if k.cfg.claimsOff {
		want = nil
	}
	if busy := k.claims.tryTake(want); busy != nil {
		return nil, nil, d.awaitClaims(want, busy)
	}
	d.stopWaiting()
	if err := k.ledger.Check(ev, k.checkOptions()); err != nil {
		k.claims.release(want)
		d.unlock()
		return nil, nil, k.denial(d.stage, ev, err)
	}
	held := &checked{claims: want, draw: k.ledger.Draw(ev), signature: signature}
	k.pending.Hold(held.draw)
	d.unlock()
	return ev, held, nil
}

// awaitClaims waits, with k.mu released, until the claims want are free
// (nil: build again) or the caller gives up.
func (d *decision) awaitClaims(want []ledger.Claim, busy <-chan struct{}) error {
	k := d.k
	if !slices.Equal(d.waiting, want) {
		d.stopWaiting()
		k.claims.wait(want, false)
		d.waiting = want
	}
	d.unlock()
	select {
	case <-busy:
		return nil
	case <-d.ctx.Done():
	}
	k.mu.Lock()
	d.stopWaiting()
	k.mu.Unlock()
	return denyAt(d.stage, "", ErrUnavailable, "waiting for events in flight: %v", d.ctx.Err())
}

// commit is steps 4 and 5 of decide: it appends the checked event, which
// the group committer folds, releasing what it held in the same critical
// section, before commit returns. errDecideAgain: the sequencer kept it
// out of the log.
func (d *decision) commit(ev *event.Event, held *checked) (*decided, error) {
	k := d.k
	release := func() { // under k.mu
		if !held.released.Load() {
			held.released.Store(true)
			k.pending.Release(held.draw)
			k.claims.release(held.claims)
		}
	}
	span := k.startStage(d.ctx, SpanAppend, time.Time{})
	index, entry, written, err := k.appendDecided(d.ctx, d.stage, ev, release)
	span.appended(index, entry, written, err)
	if err == nil {
		k.startStage(d.ctx, SpanFold, written).folded(index)
	}
	// The fold released what the decision held, in its critical section,
	// unless the entry never reached it: the lock is taken again only then
	// (a second lock per action made requests queue on it).
	if !held.released.Load() {
		k.mu.Lock()
		release()
		k.mu.Unlock()
	}
	if err != nil {
		if refusal := (*sequenceRefusal)(nil); errors.As(err, &refusal) {
			return nil, d.again(refusal)
		}
		return nil, err
	}
	if held.signature != nil {
		held.signature.used.Store(true)
	}
	return &decided{ev: ev, entry: entry, index: index}, nil
}

// again answers an entry the sequencer kept out of the log (written
// nowhere): once the durable ledger has folded what the sequencer had
// seen, errDecideAgain, so that the caller gets the decision taken on that
// state; past maxRedecisions, or on a stale sequencer, a retryable refusal.
func (d *decision) again(refusal *sequenceRefusal) error {
	d.redecided++
	if refusal.stale || d.redecided >= maxRedecisions {
		return redecision(d.stage, refusal, d.redecided)
	}
	if err := d.k.awaitFolded(d.ctx, refusal.at); err != nil {
		return denyAt(d.stage, "", ErrUnavailable, "the entry was not written, and the kernel could not decide it again: %v", err)
	}
	return errDecideAgain
}

// stoppedDenial is the answer of a kernel that takes no writes (the
// caller holds k.mu).
func (k *Kernel) stoppedDenial(stage string) error {
	if !k.resumable {
		d := denyAt(stage, "", ErrUnavailable, "the kernel has stopped taking writes until an operator acts: %v", k.failed)
		d.Stopped = true
		return d
	}
	return denyAt(stage, "", ErrUnavailable, "the kernel has stopped taking work: %v", k.failed)
}

// appendDecided encodes a checked event and appends it; written is when
// its group was written (zero if it was not).
func (k *Kernel) appendDecided(ctx context.Context, stage string, ev *event.Event, folded func()) (index uint64, entry []byte, written time.Time, err error) {
	if ev.Kind == event.KindAction || ev.Kind == event.KindHoldRequested {
		stage = StageAppend
	}
	// The event's own form (kernel/event) is the form gate of what the
	// request built: checked once, here, where it is encoded.
	if entry, err = event.Encode(ev); err != nil {
		// The error's targets are declared where an error is: errors.As
		// takes their address, which put them on the heap for every event.
		if tooLarge := (*event.TooLargeError)(nil); errors.As(err, &tooLarge) {
			return 0, nil, time.Time{}, denyAt(stage, GateForm, ErrTooLarge, "%v", err)
		}
		return 0, nil, time.Time{}, denyAt(stage, GateForm, ErrInvalid, "%s", strings.TrimPrefix(err.Error(), "event "+ev.ID+": "))
	}
	res := k.log.Append(ctx, entry, ev, folded)
	err = res.Err
	if err == nil {
		return res.Index, entry, res.Written, nil
	}
	switch refusal := (*sequenceRefusal)(nil); {
	case errors.As(err, &refusal):
		return 0, nil, res.Written, err
	case errors.Is(err, tessera.ErrPushback):
		return 0, nil, res.Written, denyAt(StageAppend, "", ErrUnavailable, "the log is busy, retry: %v", err)
	case errors.Is(err, logstore.ErrNotWritten):
		// The log refused it before committing anything (the fence, a
		// database unreachable before the transaction): a definite
		// refusal, to be sent again.
		d := denyAt(StageAppend, "", ErrUnavailable, "log append refused, and the entry was not written: %v; send it again", err)
		d.Retryable = true
		return 0, nil, res.Written, d
	}
	d := denyAt(StageAppend, "", ErrUnavailable, "log append failed, and the entry may be in the log (look it up before sending it again): %v", err)
	d.OutcomeUnknown = true
	return 0, nil, res.Written, d
}

// checkOptions are what the kernel alone knows, for ledger.Check. The
// caller holds k.mu. They are made once, at the first decision, when
// the kernel's limiter and stores are set for good: made for every
// decision, their functions were three allocations each.
func (k *Kernel) checkOptions() ledger.Options {
	if k.checkOpts == nil {
		o := ledger.Options{Pending: k.pending, MaxPendingHolds: k.cfg.MaxPendingHolds, Open: k.sealed.OpenPayload}
		if limiter := k.limiter; limiter != nil {
			o.Admit = func(agent string, eff ring.Ring) error { return limiter.Allow(agent, eff) }
			o.AdmitPolicy = limiter.AllowPolicy
		}
		k.checkOpts = &o
	}
	return *k.checkOpts
}

// denial turns a rule's refusal into the kernel's answer. An action's
// denial names the pipeline stage of its gate; any other operation's names
// the operation.
func (k *Kernel) denial(stage string, ev *event.Event, err error) error {
	var d *Denial
	if errors.As(err, &d) {
		return d
	}
	var v *ledger.Violation
	if !errors.As(err, &v) {
		return denyAt(stage, "", ErrUnavailable, "%v", err)
	}
	if ev.Kind == event.KindAction || ev.Kind == event.KindHoldRequested {
		stage = v.Stage
	}
	return &Denial{Stage: stage, Gate: v.Gate, Class: classOf(v.Class), Reason: v.Reason, Policy: v.Policy, Code: v.Code}
}

func classOf(c ledger.Class) error {
	switch c {
	case ledger.Invalid:
		return ErrInvalid
	case ledger.NotFound:
		return ErrNotFound
	case ledger.Conflict:
		return ErrConflict
	case ledger.NoEnergy:
		return ErrInsufficientEnergy
	case ledger.RateLimited:
		return ErrRateLimited
	case ledger.Unauthenticated:
		return ErrUnauthenticated
	}
	return ErrForbidden
}

// receiptOf is the receipt of a decided event.
func receiptOf(d *decided, t event.ActionType, target string) *Receipt {
	return &Receipt{Status: StatusCommitted, EventID: d.ev.ID, Index: d.index, LeafHash: event.HashHex(event.LeafHash(d.entry)),
		Time: d.ev.Time.String(), Actor: d.ev.Actor, Type: t, Target: target, TraceID: d.ev.TraceID}
}

// formError is a refusal of what only the kernel judges: a request's form.
func formError(stage string, format string, args ...any) *Denial {
	return denyAt(stage, GateForm, ErrInvalid, "%s", fmt.Sprintf(format, args...))
}
