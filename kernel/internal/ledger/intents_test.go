package ledger

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/annal-dev/annal/kernel/event"
)

// FuzzParseExecute: any payload is either refused or read as exactly one of
// record, intent or result, with an input a valid OID for the latter two;
// a payload under rules 2 is never read as an intent or a result.
func FuzzParseExecute(f *testing.F) {
	oid := `"sha256:` + strings.Repeat("a", 64) + `"`
	for _, s := range []string{
		`{"phase":"intent","input_oid":` + oid + `}`,
		`{"phase":"intent","input_oid":` + oid + `,"exit_code":0}`,
		`{"intent":7,"input_oid":` + oid + `,"output_oid":` + oid + `,"artifact_hash":` + oid + `,"exit_code":0,"output_bytes":512}`,
		`{"intent":0,"input_oid":` + oid + `,"output_oid":` + oid + `,"artifact_hash":` + oid + `,"exit_code":0}`,
		`{"input_oid":` + oid + `,"output_oid":` + oid + `,"artifact_hash":` + oid + `,"exit_code":-1}`,
		`{"phase":1}`, `[]`, `null`, `"x"`,
	} {
		f.Add([]byte(s))
	}
	costs := event.DefaultEnergy.Costs
	f.Fuzz(func(t *testing.T, payload []byte) {
		if !json.Valid(payload) {
			return
		}
		p, err := parseExecute(payload, RulesIntents)
		if err == nil {
			if p.intent && p.result {
				t.Fatalf("%s read as both intent and result", payload)
			}
			if (p.intent || p.result) && !event.ValidOID(p.inputOID) {
				t.Fatalf("%s: input %q", payload, p.inputOID)
			}
			if p.result && p.of == 0 {
				t.Fatalf("%s: result of entry 0", payload)
			}
			if c := p.cost(costs); c > costs.Quote(event.Execute, MaxOutputBytes) {
				t.Fatalf("%s costs %d", payload, c)
			}
		}
		old, err := parseExecute(payload, RulesGoverned)
		if err == nil && (old.intent || old.result) {
			t.Fatalf("%s read as an intent or result under rules 2", payload)
		}
	})
}
