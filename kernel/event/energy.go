package event

import "fmt"

// KindEnergyProduced records energy production: ticks and the credits
// they gave each actor (Def. 4.15–4.16).
const KindEnergyProduced Kind = "energy.produced"

// MaxEnergy is the largest energy figure an event can carry: RFC 8785
// writes numbers as IEEE 754 doubles, which hold every integer up to 2^53
// and would round larger ones.
const MaxEnergy = 1 << 53

// EnergyConfig is the energy model a log runs under, fixed in its genesis
// event so that replay never reads a configuration file.
type EnergyConfig struct {
	Costs Costs `json:"costs"`
	// PerTick is the energy produced each tick (λ·Δt, Def. 4.15).
	PerTick uint64 `json:"per_tick"`
	// TickMillis is the tick length Δt.
	TickMillis uint64 `json:"tick_ms"`
	// CommitmentPercent of a hold's reservation is charged when it is
	// rejected or times out (Def. 4.22: 20).
	CommitmentPercent uint64 `json:"commitment_percent"`
	// Genesis is the energy root holds at the start.
	Genesis uint64 `json:"genesis"`
}

// Costs is the cost function (Def. 4.17, Remark 4.4).
type Costs struct {
	Observe             uint64 `json:"observe"`
	Create              uint64 `json:"create"`
	Mutate              uint64 `json:"mutate"`
	ExecuteBase         uint64 `json:"execute_base"`
	ExecuteBytesPerUnit uint64 `json:"execute_bytes_per_unit"`
}

// DefaultEnergy is the energy model of a log whose genesis names none: the
// paper's costs 0/10/15/25+⌊output_bytes/256⌋ (Remark 4.4), 100 units per
// one-second tick, the 20% commitment cost (Def. 4.22), and a million units
// for root to fund its agents with.
var DefaultEnergy = EnergyConfig{
	Costs:             Costs{Observe: 0, Create: 10, Mutate: 15, ExecuteBase: 25, ExecuteBytesPerUnit: 256},
	PerTick:           100,
	TickMillis:        1000,
	CommitmentPercent: 20,
	Genesis:           1_000_000,
}

// Quote is the cost of an action of type t (Def. 4.17); outputBytes counts
// only for execute.
func (c Costs) Quote(t ActionType, outputBytes uint64) uint64 {
	switch t {
	case Observe:
		return c.Observe
	case Create:
		return c.Create
	case Mutate:
		return c.Mutate
	case Execute:
		return c.ExecuteBase + outputBytes/c.ExecuteBytesPerUnit
	}
	return 0
}

// Commitment is what a hold that reserved r costs when it is rejected or
// times out: ⌈percent × r / 100⌉ (Def. 4.22), in integers.
func (c EnergyConfig) Commitment(reserved uint64) uint64 {
	return (reserved*c.CommitmentPercent + 99) / 100
}

// Validate checks an energy model as a genesis event would carry it.
func (c EnergyConfig) Validate() error { return c.validate() }

func (c *EnergyConfig) validate() error {
	k := c.Costs
	switch {
	case !(k.Observe <= k.Create && k.Create <= k.Mutate && k.Mutate <= k.ExecuteBase):
		return fmt.Errorf("energy costs must be ordered observe <= create <= mutate <= execute (Def. 4.17)")
	case k.ExecuteBytesPerUnit == 0:
		return fmt.Errorf("energy costs: execute_bytes_per_unit must be positive")
	case c.PerTick < k.ExecuteBase:
		return fmt.Errorf("energy per tick %d is below the execute base cost %d (Axiom 4.4)", c.PerTick, k.ExecuteBase)
	case c.TickMillis == 0:
		return fmt.Errorf("energy tick length must be positive")
	case c.CommitmentPercent > 100:
		return fmt.Errorf("commitment percent %d is more than 100", c.CommitmentPercent)
	case c.Genesis > MaxEnergy || c.PerTick > MaxEnergy || k.ExecuteBase > MaxEnergy:
		return fmt.Errorf("energy figures must be at most 2^53")
	}
	return nil
}

// MaxCredits bounds the credits of one energy.produced event, so that it
// fits in one entry.
const MaxCredits = 1024

// Production is carried by energy.produced.
type Production struct {
	Ticks   uint64   `json:"ticks"`
	Credits []Credit `json:"credits"`
}

// Credit is the energy one actor received.
type Credit struct {
	Actor  string `json:"actor"`
	Amount uint64 `json:"amount"`
}

func (p *Production) check(*Event) error {
	if p.Ticks == 0 {
		return fmt.Errorf("energy production covers no tick")
	}
	if len(p.Credits) > MaxCredits {
		return fmt.Errorf("energy production has %d credits, more than %d", len(p.Credits), MaxCredits)
	}
	for i, c := range p.Credits {
		if !ValidActorID(c.Actor) || c.Amount == 0 || c.Amount > MaxEnergy {
			return fmt.Errorf("energy credit %d: actor %q amount %d is not valid", i+1, c.Actor, c.Amount)
		}
		if i > 0 && p.Credits[i-1].Actor >= c.Actor {
			return fmt.Errorf("energy credits must be sorted by actor, each actor once")
		}
	}
	return nil
}

// The parts of its kinds (parts.go).
func init() {
	kinds[KindEnergyProduced] = carries(must("production"))
}
