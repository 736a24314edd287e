package event

import (
	"errors"
	"fmt"
	"unicode/utf8"
)

// The kinds of event about the log itself.
const (
	// KindGenesis is entry 0 of every log: the log's origin and its root human.
	KindGenesis Kind = "log.genesis"
	// KindRulesAdopted records the kernel adopting a newer rules version
	// for a log written under an older one (LogInfo.Rules).
	KindRulesAdopted Kind = "log.rules"
)

// LogInfo is carried by the genesis event.
type LogInfo struct {
	Origin   string `json:"origin"`
	Software string `json:"software"`
	// Energy is the energy model of the log; absent means DefaultEnergy.
	Energy *EnergyConfig `json:"energy,omitempty"`
	// Rules is the version of the rules the log is written under; absent
	// means 1, the rules of the first releases (kernel/internal/ledger).
	Rules int `json:"rules,omitempty"`
}

func (l *LogInfo) check(e *Event) error {
	if l.Energy != nil {
		if err := l.Energy.validate(); err != nil {
			return err
		}
	}
	if l.Rules < 0 || l.Rules > 1000 || (e.Kind == KindRulesAdopted && l.Rules == 0) {
		return fmt.Errorf("rules version %d is not valid", l.Rules)
	}
	if l.Origin == "" || l.Software == "" {
		return errors.New("log origin and software must be set")
	}
	if !utf8.ValidString(l.Origin) || !utf8.ValidString(l.Software) {
		return errors.New("log origin and software must be UTF-8")
	}
	return nil
}

// The parts of its kinds (parts.go).
func init() {
	kinds[KindGenesis] = carries(must("log"), must("subject"))
	kinds[KindRulesAdopted] = carries(must("log"))
}
