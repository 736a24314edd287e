package ledger

import (
	"github.com/annal-dev/annal/kernel/event"
)

// Apply folds the event at index into the ledger. index MUST be l.Size:
// events are folded in log order, each once. On error nothing changes.
func (l *Ledger) Apply(index uint64, ev *event.Event) error {
	if index != l.Size {
		return inconsistent(index, "the ledger expects entry %d next", l.Size)
	}
	if index == 0 && ev.Kind != event.KindGenesis {
		return inconsistent(index, "the first entry is %s, not the genesis", ev.Kind)
	}
	if index > 0 && ev.Kind == event.KindGenesis {
		return inconsistent(index, "a second genesis")
	}
	if ev.Actor != event.KernelActor && index > 0 {
		if _, ok := l.Actors[ev.Actor]; !ok {
			return inconsistent(index, "actor %s does not exist", ev.Actor)
		}
	}
	var err error
	switch ev.Kind {
	case event.KindGenesis:
		err = l.applyGenesis(index, ev)
	case event.KindActorCreated:
		err = l.applyActorCreated(index, ev)
	case event.KindActorStatus:
		err = l.applyStatus(index, ev)
	case event.KindEnvelopeIssued:
		err = l.applyEnvelopeIssued(index, ev)
	case event.KindEnvelopeRevoked:
		err = l.applyEnvelopeRevoked(index, ev)
	case event.KindEnergyProduced:
		err = l.applyProduction(index, ev)
	case event.KindAction:
		err = l.applyAction(index, ev)
	case event.KindActionDenied:
		l.Denials++
	case event.KindHoldRequested:
		err = l.applyHoldRequested(index, ev)
	case event.KindHoldAnswered:
		err = l.applyHoldAnswered(index, ev)
	default:
		err = l.applyControl(index, ev)
	}
	if err != nil {
		return err
	}
	l.Size++
	l.dirty["meta"] = true
	return nil
}

func (l *Ledger) touchActor(a *Actor)       { l.dirty["actor/"+a.ID] = true }
func (l *Ledger) touchEnvelope(v *Envelope) { l.dirty["envelope/"+v.ID] = true }
func (l *Ledger) touchHold(h *Hold)         { l.dirty["hold/"+h.ID] = true }

// TakeDirty returns the keys ("meta", "actor/<id>", "envelope/<id>",
// "hold/<id>") changed since the last call, for persistence.
func (l *Ledger) TakeDirty() []string {
	keys := make([]string, 0, len(l.dirty))
	for k := range l.dirty {
		keys = append(keys, k)
	}
	clear(l.dirty)
	return keys
}

func (l *Ledger) applyGenesis(index uint64, ev *event.Event) error {
	l.Energy = event.DefaultEnergy
	if ev.Log.Energy != nil {
		l.Energy = *ev.Log.Energy
	}
	root := &Actor{ActorRecord: *ev.Subject, Status: event.StatusActive, CreatedAt: index, Balance: l.Energy.Genesis}
	l.Actors[root.ID] = root
	l.byCredential[root.CredentialSHA256] = root.ID
	l.touchActor(root)
	return nil
}

func (l *Ledger) applyActorCreated(index uint64, ev *event.Event) error {
	rec := *ev.Subject
	if _, ok := l.Actors[rec.ID]; ok {
		return inconsistent(index, "actor %s already exists", rec.ID)
	}
	if _, ok := l.byCredential[rec.CredentialSHA256]; ok {
		return inconsistent(index, "actor %s reuses another actor's credential", rec.ID)
	}
	creator := l.Actors[ev.Actor]
	if rec.Creator != creator.ID {
		return inconsistent(index, "actor %s names creator %s but was created by %s", rec.ID, rec.Creator, creator.ID)
	}
	if creator.Kind != event.Human {
		return inconsistent(index, "agent %s created an actor; only humans create actors (Remark 4.3)", creator.ID)
	}
	if rec.Kind == event.Human && creator.ID != RootID {
		return inconsistent(index, "only root creates humans")
	}
	if rec.Energy > creator.Available() {
		return inconsistent(index, "creator %s gives %d energy but has %d available", creator.ID, rec.Energy, creator.Available())
	}
	creator.Balance -= rec.Energy
	a := &Actor{ActorRecord: rec, Status: event.StatusActive, CreatedAt: index, Balance: rec.Energy}
	l.Actors[a.ID] = a
	l.byCredential[a.CredentialSHA256] = a.ID
	l.touchActor(creator)
	l.touchActor(a)
	return nil
}

func (l *Ledger) applyStatus(index uint64, ev *event.Event) error {
	sc := ev.Status
	a, ok := l.Actors[sc.Actor]
	if !ok {
		return inconsistent(index, "status change of unknown actor %s", sc.Actor)
	}
	switch {
	case l.Actors[ev.Actor].Kind != event.Human:
		return inconsistent(index, "agent %s changed an actor's status; only humans may", ev.Actor)
	case a.Kind == event.Human:
		return inconsistent(index, "human %s cannot be frozen or terminated (Axiom 4.1)", a.ID)
	case a.Status == event.StatusTerminated:
		return inconsistent(index, "actor %s is terminated; that is final", a.ID)
	}
	a.Status = sc.Status
	l.touchActor(a)
	return nil
}

func (l *Ledger) applyEnvelopeIssued(index uint64, ev *event.Event) error {
	e := *ev.Envelope
	if _, ok := l.Envelopes[e.ID]; ok {
		return inconsistent(index, "envelope %s already exists", e.ID)
	}
	if e.Issuer != ev.Actor {
		return inconsistent(index, "envelope %s names issuer %s but %s issued it", e.ID, e.Issuer, ev.Actor)
	}
	holder, ok := l.Actors[e.Holder]
	if !ok || holder.Kind != event.Agent {
		return inconsistent(index, "envelope %s is for %s, which is not an agent", e.ID, e.Holder)
	}
	if e.Parent != "" {
		chain, err := l.Chain(e.Parent)
		if err != nil {
			return inconsistent(index, "envelope %s: %v", e.ID, err)
		}
		if len(chain) >= MaxChain {
			return inconsistent(index, "envelope %s is delegated more than %d deep", e.ID, MaxChain)
		}
		parent := chain[0]
		if parent.Holder != e.Issuer {
			return inconsistent(index, "envelope %s delegates %s, which %s does not hold", e.ID, parent.ID, e.Issuer)
		}
		if e.Budget > parent.Remaining() {
			return inconsistent(index, "envelope %s budget %d exceeds what %s has left (%d)", e.ID, e.Budget, parent.ID, parent.Remaining())
		}
	} else if l.Actors[e.Issuer].Kind != event.Human {
		return inconsistent(index, "agent %s issued envelope %s without delegating one it holds", e.Issuer, e.ID)
	}
	v := &Envelope{Envelope: e, IssuedAt: index}
	l.Envelopes[v.ID] = v
	l.byHolder[v.Holder] = append(l.byHolder[v.Holder], v.ID)
	l.touchEnvelope(v)
	return nil
}

func (l *Ledger) applyEnvelopeRevoked(index uint64, ev *event.Event) error {
	v, ok := l.Envelopes[ev.EnvelopeEnd.ID]
	if !ok {
		return inconsistent(index, "revocation of unknown envelope %s", ev.EnvelopeEnd.ID)
	}
	if v.Revoked {
		return inconsistent(index, "envelope %s is already revoked", v.ID)
	}
	v.Revoked = true
	l.touchEnvelope(v)
	return nil
}

func (l *Ledger) applyProduction(index uint64, ev *event.Event) error {
	if ev.Actor != event.KernelActor {
		return inconsistent(index, "energy produced by %s; only the kernel produces energy", ev.Actor)
	}
	var total uint64
	for _, c := range ev.Production.Credits {
		a, ok := l.Actors[c.Actor]
		if !ok {
			return inconsistent(index, "energy credited to unknown actor %s", c.Actor)
		}
		if a.Balance+c.Amount > event.MaxEnergy {
			return inconsistent(index, "actor %s would hold more than 2^53 energy", a.ID)
		}
		total += c.Amount
	}
	if want := ev.Production.Ticks * l.Energy.PerTick; total > want {
		return inconsistent(index, "%d ticks produce %d energy, the credits add up to %d", ev.Production.Ticks, want, total)
	}
	for _, c := range ev.Production.Credits {
		a := l.Actors[c.Actor]
		a.Balance += c.Amount
		l.touchActor(a)
	}
	return nil
}

// spend checks that actor and every envelope of chain can settle amount,
// given that release is first returned from their reservations.
func (l *Ledger) canSpend(index uint64, a *Actor, chain []*Envelope, amount, release uint64) error {
	if a.Reserved < release || a.Balance < amount || a.Balance-amount < a.Reserved-release {
		return inconsistent(index, "actor %s cannot settle %d (balance %d, reserved %d)", a.ID, amount, a.Balance, a.Reserved)
	}
	for _, v := range chain {
		if v.Reserved < release || v.Consumed+amount+v.Reserved-release > v.Budget {
			return inconsistent(index, "envelope %s cannot settle %d (budget %d, consumed %d, reserved %d)", v.ID, amount, v.Budget, v.Consumed, v.Reserved)
		}
	}
	return nil
}

func (l *Ledger) settle(a *Actor, chain []*Envelope, amount, release uint64) {
	a.Reserved -= release
	a.Balance -= amount
	a.Consumed += amount
	l.touchActor(a)
	for _, v := range chain {
		v.Reserved -= release
		v.Consumed += amount
		l.touchEnvelope(v)
	}
}

func (l *Ledger) actingChain(index uint64, a *Actor, envelope string) ([]*Envelope, error) {
	if envelope == "" {
		return nil, nil
	}
	chain, err := l.Chain(envelope)
	if err != nil {
		return nil, inconsistent(index, "%v", err)
	}
	if chain[0].Holder != a.ID {
		return nil, inconsistent(index, "actor %s acted under envelope %s, held by %s", a.ID, envelope, chain[0].Holder)
	}
	return chain, nil
}

func (l *Ledger) applyAction(index uint64, ev *event.Event) error {
	a := l.Actors[ev.Actor]
	chain, err := l.actingChain(index, a, ev.Action.Envelope)
	if err != nil {
		return err
	}
	amount, release := ev.Decision.Settled, uint64(0)
	var h *Hold
	if ev.Hold != nil {
		h, err = l.pendingHold(index, ev.Hold.ID)
		if err != nil {
			return err
		}
		if h.Actor != a.ID || h.Envelope != ev.Action.Envelope || h.Action.Type != ev.Action.Type || h.Action.Target != ev.Action.Target || h.Session != ev.Session {
			return inconsistent(index, "the action does not match hold %s", h.ID)
		}
		if amount != h.Reserved {
			return inconsistent(index, "approved hold %s reserved %d but settles %d", h.ID, h.Reserved, amount)
		}
		if answerer, ok := l.Actors[ev.Hold.AnsweredBy]; !ok || answerer.Kind != event.Human {
			return inconsistent(index, "hold %s answered by %s, who is not a human", h.ID, ev.Hold.AnsweredBy)
		}
		release = h.Reserved
	}
	if err := l.canSpend(index, a, chain, amount, release); err != nil {
		return err
	}
	l.settle(a, chain, amount, release)
	if h != nil {
		h.Status, h.AnsweredBy, h.AnsweredAt, h.Settled = HoldApproved, ev.Hold.AnsweredBy, index, amount
		l.pendingHolds[h.Envelope]--
		l.touchHold(h)
	}
	return nil
}

func (l *Ledger) pendingHold(index uint64, id string) (*Hold, error) {
	h, ok := l.Holds[id]
	if !ok {
		return nil, inconsistent(index, "hold %s does not exist", id)
	}
	if h.Status != HoldPending {
		return nil, inconsistent(index, "hold %s is already %s", id, h.Status)
	}
	return h, nil
}

func (l *Ledger) applyHoldRequested(index uint64, ev *event.Event) error {
	a := l.Actors[ev.Actor]
	hr := ev.Hold
	if _, ok := l.Holds[hr.ID]; ok {
		return inconsistent(index, "hold %s already exists", hr.ID)
	}
	if ev.Action.Envelope != hr.Envelope {
		return inconsistent(index, "hold %s names envelope %s, its action %s", hr.ID, hr.Envelope, ev.Action.Envelope)
	}
	chain, err := l.actingChain(index, a, hr.Envelope)
	if err != nil {
		return err
	}
	if hr.Reserved > a.Available() {
		return inconsistent(index, "hold %s reserves %d, actor %s has %d available", hr.ID, hr.Reserved, a.ID, a.Available())
	}
	for _, v := range chain {
		if hr.Reserved > v.Remaining() {
			return inconsistent(index, "hold %s reserves %d, envelope %s has %d left", hr.ID, hr.Reserved, v.ID, v.Remaining())
		}
	}
	a.Reserved += hr.Reserved
	l.touchActor(a)
	for _, v := range chain {
		v.Reserved += hr.Reserved
		l.touchEnvelope(v)
	}
	h := &Hold{ID: hr.ID, Actor: a.ID, Envelope: hr.Envelope, Session: ev.Session, Action: *ev.Action, Reserved: hr.Reserved,
		Deadline: hr.Deadline, RequestedAt: index, Status: HoldPending}
	l.pendingHolds[h.Envelope]++
	l.Holds[h.ID] = h
	l.touchHold(h)
	return nil
}

func (l *Ledger) applyHoldAnswered(index uint64, ev *event.Event) error {
	ha := ev.Hold
	h, err := l.pendingHold(index, ha.ID)
	if err != nil {
		return err
	}
	switch ha.Decision {
	case event.HoldTimeout:
		if ev.Actor != event.KernelActor || ha.AnsweredBy != event.KernelActor {
			return inconsistent(index, "hold %s timed out by %s; only the kernel times holds out", h.ID, ev.Actor)
		}
	default:
		if ha.AnsweredBy != ev.Actor || l.Actors[ev.Actor].Kind != event.Human {
			return inconsistent(index, "hold %s answered by %s, who is not a human", h.ID, ev.Actor)
		}
	}
	if ha.Settled > h.Reserved {
		return inconsistent(index, "hold %s settles %d, more than the %d it reserved", h.ID, ha.Settled, h.Reserved)
	}
	a := l.Actors[h.Actor]
	chain, err := l.actingChain(index, a, h.Envelope)
	if err != nil {
		return err
	}
	if err := l.canSpend(index, a, chain, ha.Settled, h.Reserved); err != nil {
		return err
	}
	l.settle(a, chain, ha.Settled, h.Reserved)
	switch ha.Decision {
	case event.HoldReject:
		h.Status = HoldRejected
	case event.HoldTimeout:
		h.Status = HoldTimedOut
	case event.HoldApprove:
		h.Status = HoldFailed
	}
	l.pendingHolds[h.Envelope]--
	h.AnsweredBy, h.AnsweredAt, h.Settled = ha.AnsweredBy, index, ha.Settled
	l.touchHold(h)
	return nil
}
