package kernel

import "github.com/annal-dev/annal/kernel/event"

// CostTable is the energy cost of each action type (paper §4.4, Remark
// 4.4). Execute costs ExecuteBase plus one unit per ExecuteBytesPerUnit
// bytes of output.
type CostTable struct {
	Observe, Create, Mutate, ExecuteBase uint64
	ExecuteBytesPerUnit                  uint64
}

// DefaultCosts are the reference implementation's costs: 0/10/15/25+⌊output_bytes/256⌋.
var DefaultCosts = CostTable{Observe: 0, Create: 10, Mutate: 15, ExecuteBase: 25, ExecuteBytesPerUnit: 256}

// Quote returns the cost of an action of type t; outputBytes counts only
// for execute.
func (c CostTable) Quote(t event.ActionType, outputBytes uint64) uint64 {
	switch t {
	case event.Observe:
		return c.Observe
	case event.Create:
		return c.Create
	case event.Mutate:
		return c.Mutate
	case event.Execute:
		return c.ExecuteBase + outputBytes/c.ExecuteBytesPerUnit
	}
	return 0
}
