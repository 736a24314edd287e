package event

import (
	"testing"

	"github.com/gowebpki/jcs"
)

// sortMembers sorts members at every depth and drops whitespace, and
// leaves to the full transform what it does not judge.
func TestSortMembers(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"content_oid":"sha256:aa","bytes":12}`, `{"bytes":12,"content_oid":"sha256:aa"}`},
		{" { \"b\" : [ {\"z\":1, \"y\":\"\\n\"} , -3 ] ,\n\"a\":null } ", `{"a":null,"b":[{"y":"\n","z":1},-3]}`},
		{`{"b":{"d":1,"c":2},"a":{"f":{},"e":[]}}`, `{"a":{"e":[],"f":{}},"b":{"c":2,"d":1}}`},
		{`{"a":1,"b":2}`, `{"a":1,"b":2}`},
	} {
		got, ok := sortMembers([]byte(tc.in))
		if !ok || string(got) != tc.want {
			t.Errorf("sortMembers(%q) = %q, %v; want %q", tc.in, got, ok, tc.want)
		}
		if want, err := jcs.Transform([]byte(tc.in)); err != nil || string(want) != tc.want {
			t.Errorf("RFC 8785 of %q is %q (%v), not %q", tc.in, want, err, tc.want)
		}
	}
	for _, in := range []string{`{"b":1,"a":2,"b":3}`, `{"a":1.5}`, `{"a":"\/"}`, `{"\u0061":1}`, `{"a":1}x`, `{"a":-0}`, `{"é":1}`} {
		if got, ok := sortMembers([]byte(in)); ok {
			t.Errorf("sortMembers(%q) = %q, want it left to the full transform", in, got)
		}
	}
}
