package api

import "encoding/json"

// EventSummary is what a history view shows of a logged event: when, who,
// its kind, the action it carries and the hold it answers, if any. Every
// other field of the event stays in HistoryItem.Event, exactly as logged.
type EventSummary struct {
	Time   string `json:"time"`
	Actor  string `json:"actor"`
	Kind   string `json:"kind"`
	Action *struct {
		Type   string `json:"type"`
		Target string `json:"target"`
	} `json:"action"`
	Hold *struct {
		ID         string `json:"id"`
		Decision   string `json:"decision"`
		AnsweredBy string `json:"answered_by"`
		Reason     string `json:"reason"`
	} `json:"hold"`
}

// Summary reads the item's event into an EventSummary; the fields it does
// not name are ignored.
func (h HistoryItem) Summary() (EventSummary, error) {
	var s EventSummary
	err := json.Unmarshal(h.Event, &s)
	return s, err
}
