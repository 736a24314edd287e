package kernel

// energyLedger reserves and settles energy for actions (paper §4.4). The
// pipeline calls reserve before validate_payload and settle before append.
type energyLedger interface {
	reserve(actor *Actor, cost uint64) (reservation, error)
}

// reservation is energy locked for one action until it is settled or
// released.
type reservation interface {
	// settle turns the locked energy into consumption and returns it.
	settle() uint64
	// release returns the locked energy unspent.
	release()
}

// unmeteredLedger records costs without budgets: every actor may spend. It
// is the ledger until envelopes and energy production exist; the pipeline
// already quotes, reserves and settles through it, so budgets slot in
// behind the same two calls.
type unmeteredLedger struct{}

func (unmeteredLedger) reserve(_ *Actor, cost uint64) (reservation, error) {
	return &unmeteredReservation{cost: cost}, nil
}

type unmeteredReservation struct{ cost uint64 }

func (r *unmeteredReservation) settle() uint64 { return r.cost }
func (r *unmeteredReservation) release()       {}
