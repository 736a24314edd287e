package event

import "fmt"

// KindTolerated records root accepting entries of the log that break a
// rule (annald tolerate): the fold passes over each one, changing nothing,
// once this entry names it. The entries stay in the log as evidence; an
// earlier release could write one, and a kernel that met it stopped.
const KindTolerated Kind = "log.tolerated"

// MaxToleratedEntries bounds the entries one log.tolerated names.
const MaxToleratedEntries = 64

// Toleration is carried by log.tolerated.
type Toleration struct {
	// Entries are the tolerated entries, by increasing index.
	Entries []ToleratedEntry `json:"entries"`
	// Reason is the operator's: why the entries are accepted.
	Reason string `json:"reason"`
}

// ToleratedEntry names one tolerated entry and the rule it breaks, as the
// fold reports it: the rule (gate) and its reason.
type ToleratedEntry struct {
	Gate  string `json:"gate"`
	Index uint64 `json:"index"`
	// LeafHash is the entry's RFC 6962 leaf hash, lower-case hex.
	LeafHash string `json:"leaf_hash"`
	Reason   string `json:"reason"`
}

func (t *Toleration) check(*Event) error {
	if len(t.Entries) == 0 || len(t.Entries) > MaxToleratedEntries {
		return fmt.Errorf("log.tolerated names %d entries, not 1 to %d", len(t.Entries), MaxToleratedEntries)
	}
	for i, e := range t.Entries {
		switch {
		case i > 0 && e.Index <= t.Entries[i-1].Index:
			return fmt.Errorf("log.tolerated: entry %d follows entry %d: the entries go by increasing index", e.Index, t.Entries[i-1].Index)
		case !hexHashPattern.MatchString(e.LeafHash):
			return fmt.Errorf("log.tolerated: leaf hash %q of entry %d is not 64 lower-case hex digits", e.LeafHash, e.Index)
		case e.Gate == "" || len(e.Gate) > 64:
			return fmt.Errorf("log.tolerated: entry %d names no rule", e.Index)
		}
		if err := validateText(fmt.Sprintf("log.tolerated: reason of entry %d", e.Index), e.Reason, 1024); err != nil {
			return err
		}
	}
	if t.Reason == "" {
		return fmt.Errorf("log.tolerated: the operator gives no reason")
	}
	return validateText("log.tolerated: reason", t.Reason, 1024)
}

// The parts of its kinds (parts.go).
func init() {
	kinds[KindTolerated] = carries(must("toleration"))
}
