package signal

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// FuzzParse checks that Parse never panics, returns only valid signals,
// and that what it accepts is a name or short name in some case.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{"SIGSTOP", "stop", "Sigkill", "SIG", "", "ſtop", "SIG\u212aILL", "sigpolicy ", "9"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, name string) {
		s, err := Parse(name)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("Parse(%q): %v does not wrap ErrInvalid", name, err)
			}
			return
		}
		if !s.Valid() {
			t.Fatalf("Parse(%q) = %d, not a signal", name, int(s))
		}
		canon := s.String()
		if u := strings.ToUpper(name); u != canon && "SIG"+u != canon {
			t.Fatalf("Parse(%q) = %s", name, canon)
		}
	})
}

// FuzzMaskUnmarshalJSON checks that what UnmarshalJSON accepts is a valid
// mask whose MarshalJSON reads back to the same mask, and that a refusal
// leaves the mask unchanged.
func FuzzMaskUnmarshalJSON(f *testing.F) {
	for _, seed := range []string{`[]`, `["SIGSTOP"]`, `["SIGTERM","SIGCONT","SIGINT","SIGSTOP"]`, `["SIGKILL"]`,
		`["SIGSTOP","SIGSTOP"]`, `null`, `["stop"]`, `[1]`, `{}`, `["SIGSTOP"] x`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m := Mask(1 << SIGCONT)
		if err := m.UnmarshalJSON(data); err != nil {
			if m != 1<<SIGCONT {
				t.Fatalf("UnmarshalJSON(%q) failed but changed the mask", data)
			}
			return
		}
		if !m.Valid() {
			t.Fatalf("UnmarshalJSON(%q) = %#x, not a valid mask", data, uint16(m))
		}
		out, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		var back Mask
		if err := json.Unmarshal(out, &back); err != nil || back != m {
			t.Fatalf("%q: %s reads back as %#x, %v", data, out, uint16(back), err)
		}
		for _, s := range All() {
			if _, _, err := Deliver(Running, m, s); err != nil {
				t.Fatalf("Deliver(running, %s, %s): %v", out, s, err)
			}
		}
	})
}
