package quarantine

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

const goodRecord = `{"agent_did":"a","session_id":"s","reason":"ring_breach","started_at":"2026-01-02T02:04:05Z","expires_at":"2026-01-02T02:04:06Z","is_active":true}`

// TestAttack_RecordCaseVariantMember: a record's members are matched
// exactly; encoding/json would have let "Agent_DID" or "ſession_id"
// (U+017F) override the member spelt right.
func TestAttack_RecordCaseVariantMember(t *testing.T) {
	for _, tc := range []struct{ name, in, member string }{
		{"case variant after the exact one", strings.Replace(goodRecord, `"is_active":true`, `"is_active":true,"Agent_DID":"b"`, 1), "Agent_DID"},
		{"case variant alone", strings.Replace(goodRecord, `"agent_did"`, `"AGENT_DID"`, 1), "AGENT_DID"},
		{"long s", strings.Replace(goodRecord, `"session_id"`, `"\u017fession_id"`, 1), "ſession_id"},
		{"Kelvin sign", strings.Replace(goodRecord, `"is_active":true`, "\"is_active\":true,\"\u212a\":1", 1), "\u212a"},
		{"unknown", strings.Replace(goodRecord, `"is_active":true`, `"is_active":true,"extra":1`, 1), "extra"},
		{"duplicate", strings.Replace(goodRecord, `"is_active":true`, `"is_active":true,"is_active":false`, 1), "is_active"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Record{Agent: "untouched"}
			err := json.Unmarshal([]byte(tc.in), &r)
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.member) {
				t.Fatalf("error %v, want ErrInvalid naming %q", err, tc.member)
			}
			if r.Agent != "untouched" {
				t.Fatalf("refused record changed the destination: %+v", r)
			}
		})
	}
	var r Record
	if err := json.Unmarshal([]byte(goodRecord), &r); err != nil || r.Agent != "a" || r.Session != "s" {
		t.Fatalf("good record: %+v %v", r, err)
	}
}

// FuzzRecordUnmarshalJSON: whatever UnmarshalJSON accepts has a known
// reason and writes back the same record.
func FuzzRecordUnmarshalJSON(f *testing.F) {
	for _, s := range []string{
		goodRecord, `{}`, `null`, `[]`,
		strings.Replace(goodRecord, `"agent_did"`, `"Agent_did"`, 1),
		strings.Replace(goodRecord, `"ring_breach"`, `"bogus"`, 1),
		strings.Replace(goodRecord, `02:04:05Z`, `02:04:05.123456789+01:00`, 1),
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var r Record
		if err := r.UnmarshalJSON(data); err != nil {
			return
		}
		if !r.Reason.Valid() {
			t.Fatalf("%q accepted with reason %q", data, r.Reason)
		}
		out, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		var back Record
		if err := back.UnmarshalJSON(out); err != nil {
			t.Fatalf("%q accepted, but its encoding %s is not: %v", data, out, err)
		}
		again, _ := json.Marshal(back)
		if !bytes.Equal(out, again) {
			t.Fatalf("%s reads back as %s", out, again)
		}
	})
}
