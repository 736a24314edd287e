package ring

import (
	"errors"
	"math"
	"strings"
	"testing"
)

func mustScore(t testing.TB, f float64) Score {
	t.Helper()
	s, err := ScoreFromFloat(f)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSpec3_1_ExactlyFourRings(t *testing.T) {
	for v := -2; v <= 5; v++ {
		r, err := ParseRing(v)
		want := v >= 0 && v <= 3
		if (err == nil) != want {
			t.Errorf("ParseRing(%d) error = %v, want valid %v", v, err, want)
		}
		if err != nil {
			if !errors.Is(err, ErrInvalidValue) {
				t.Errorf("ParseRing(%d) error %v does not wrap ErrInvalidValue", v, err)
			}
			if r != Default {
				t.Errorf("ParseRing(%d) = %v on error, want Default", v, r)
			}
		} else if int(r) != v {
			t.Errorf("ParseRing(%d) = %d", v, r)
		}
		if Ring(v).Valid() != want {
			t.Errorf("Ring(%d).Valid() = %v", v, !want)
		}
	}
	for _, tc := range []struct {
		r    Ring
		want string
	}{
		{Root, "ring 0 (root)"}, {Privileged, "ring 1 (privileged)"}, {Standard, "ring 2 (standard)"},
		{Sandbox, "ring 3 (sandbox)"}, {Ring(7), "ring 7 (invalid)"}, {Ring(-1), "ring -1 (invalid)"},
	} {
		if got := tc.r.String(); got != tc.want {
			t.Errorf("Ring(%d).String() = %q, want %q", int(tc.r), got, tc.want)
		}
	}
}

func TestSpec3_2_RingOrdering(t *testing.T) {
	for a := Ring(-1); a <= 4; a++ {
		for b := Ring(-1); b <= 4; b++ {
			want := a.Valid() && b.Valid() && a < b
			if got := a.MorePrivilegedThan(b); got != want {
				t.Errorf("%v.MorePrivilegedThan(%v) = %v, want %v", a, b, got, want)
			}
		}
	}
}

func TestSpec3_3_DefaultRing(t *testing.T) {
	if Default != Sandbox {
		t.Fatalf("Default = %v, want Sandbox", Default)
	}
}

func TestScoreFromFloat(t *testing.T) {
	for _, tc := range []struct {
		f    float64
		want Score
		ok   bool
	}{
		{0, 0, true}, {1, 10000, true}, {0.97, 9700, true}, {0.95, 9500, true}, {0.6, 6000, true},
		{0.12345, 1235, true}, {0.123449, 1234, true}, {0.95000001, 9500, true},
		{-0.0001, 0, false}, {1.0001, 0, false}, {math.NaN(), 0, false}, {math.Inf(1), 0, false}, {math.Inf(-1), 0, false},
	} {
		got, err := ScoreFromFloat(tc.f)
		if (err == nil) != tc.ok || (tc.ok && got != tc.want) {
			t.Errorf("ScoreFromFloat(%v) = %d, %v; want %d, ok %v", tc.f, got, err, tc.want, tc.ok)
		}
		if err != nil && !errors.Is(err, ErrInvalidValue) {
			t.Errorf("ScoreFromFloat(%v) error does not wrap ErrInvalidValue", tc.f)
		}
	}
	if f := Score(9700).Float(); f != 0.97 {
		t.Errorf("Score(9700).Float() = %v", f)
	}
	if Score(10001).Valid() || !Score(10000).Valid() {
		t.Error("Valid disagrees with 0..10000")
	}
	if s := Score(9700).String(); s != "0.9700" {
		t.Errorf("String() = %q", s)
	}
}

// TestSpec4_1_ScoreBasedAssignment covers §4.1 with its strict comparisons
// at each threshold.
func TestSpec4_1_ScoreBasedAssignment(t *testing.T) {
	for _, tc := range []struct {
		s         Score
		consensus bool
		want      Ring
	}{
		{10000, true, Privileged}, {9501, true, Privileged}, {9500, true, Standard},
		{10000, false, Standard}, {9501, false, Standard},
		{6001, false, Standard}, {6000, false, Sandbox}, {6000, true, Sandbox}, {0, true, Sandbox},
		{10001, true, Sandbox}, {65535, true, Sandbox}, // invalid scores fail closed
	} {
		if got := FromEffScore(tc.s, tc.consensus); got != tc.want {
			t.Errorf("FromEffScore(%d, %v) = %v, want %v", tc.s, tc.consensus, got, tc.want)
		}
	}
	for s := 0; s <= 65535; s++ {
		for _, c := range []bool{false, true} {
			if FromEffScore(Score(s), c) == Root {
				t.Fatalf("FromEffScore(%d, %v) = Root; Ring 0 is never assigned by score", s, c)
			}
		}
	}
}

func TestSpec4_3_Demotion(t *testing.T) {
	for _, tc := range []struct {
		current   Ring
		s         Score
		consensus bool
		want      bool
	}{
		{Privileged, 9700, true, false},
		{Privileged, 9700, false, true}, // consensus lapsed
		{Privileged, 9000, true, true},
		{Standard, 6001, false, false},
		{Standard, 6000, false, true},
		{Standard, 9700, true, false}, // would be promoted, not demoted
		{Sandbox, 0, false, false},
		{Root, 0, false, false}, // Root is never demoted by score
		{Ring(-1), 10000, true, true},
		{Ring(9), 10000, true, true},
	} {
		if got := ShouldDemote(tc.current, tc.s, tc.consensus); got != tc.want {
			t.Errorf("ShouldDemote(%v, %d, %v) = %v, want %v", tc.current, tc.s, tc.consensus, got, tc.want)
		}
	}
}

func TestSpec22_1_RingAssignment(t *testing.T) {
	for _, tc := range []struct {
		f         float64
		consensus bool
		want      Ring
	}{
		{0.97, true, Privileged},
		{0.80, false, Standard},
		{0.40, false, Sandbox},
	} {
		if got := FromEffScore(mustScore(t, tc.f), tc.consensus); got != tc.want {
			t.Errorf("from_eff_score(%v, %v) = %v, want %v", tc.f, tc.consensus, got, tc.want)
		}
	}
}

// TestSpec21_2_IdentifierValidation covers §5.3 and §17.1.
func TestSpec21_2_IdentifierValidation(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    string
		ok   bool
	}{
		{"one char", "a", true},
		{"digits", "0", true},
		{"did", "did:annal:agent-1", true},
		{"all separators", "a.b_c:d-e", true},
		{"256 bytes", strings.Repeat("a", 256), true},
		{"257 bytes", strings.Repeat("a", 257), false},
		{"empty", "", false},
		{"trailing newline", "abc\n", false},
		{"trailing CRLF", "abc\r\n", false},
		{"leading newline", "\nabc", false},
		{"inner newline", "ab\nc", false},
		{"NUL", "ab\x00c", false},
		{"trailing NUL", "abc\x00", false},
		{"space", "a b", false},
		{"leading dot", ".abc", false},
		{"trailing dash", "abc-", false},
		{"trailing colon", "abc:", false},
		{"slash", "a/b", false},
		{"cyrillic a", "\u0430bc", false},
		{"fullwidth digit", "a\uff11", false},
		{"latin-1 e acute", "caf\u00e9", false},
		{"invalid UTF-8", "ab\xffc", false},
		{"zero width space", "a\u200bb", false},
		{"unicode 256 runes", strings.Repeat("é", 128), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidIdentifier(tc.s)
			if (err == nil) != tc.ok {
				t.Fatalf("ValidIdentifier(%q) = %v, want ok %v", tc.s, err, tc.ok)
			}
			if err != nil && !errors.Is(err, ErrInvalidValue) {
				t.Fatalf("error %v does not wrap ErrInvalidValue", err)
			}
		})
	}
	// An error does not echo a huge input.
	err := ValidIdentifier(strings.Repeat("x", 1<<20))
	if err == nil || len(err.Error()) > 300 {
		t.Fatalf("error for a 1 MiB identifier is %d bytes", len(err.Error()))
	}
}

// TestSpec21_2_APIPathValidation covers §17.2 and Annal's refusal of
// control and format characters.
func TestSpec21_2_APIPathValidation(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    string
		ok   bool
	}{
		{"plain", "/api/v1/files/write", true},
		{"with query", "/api/v1/x?a=b&c=d", true},
		{"unicode letters", "/api/données", true},
		{"2048 bytes", "/" + strings.Repeat("a", 2047), true},
		{"2049 bytes", "/" + strings.Repeat("a", 2048), false},
		{"empty", "", false},
		{"newline", "/api/x\n", false},
		{"log forging", "/api/x\nINFO granted", false},
		{"tab", "/api/\tx", false},
		{"NUL", "/api/x\x00.txt", false},
		{"ESC", "/api/\x1b[2Jx", false},
		{"DEL", "/api/x\x7f", false},
		{"C1", "/api/x\u0085", false},
		{"bidi override", "/api/\u202ex", false},
		{"line separator", "/api/\u2028x", false},
		{"invalid UTF-8", "/api/\xff", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidAPIPath(tc.s)
			if (err == nil) != tc.ok {
				t.Fatalf("ValidAPIPath(%q) = %v, want ok %v", tc.s, err, tc.ok)
			}
			if err != nil && !errors.Is(err, ErrInvalidValue) {
				t.Fatalf("error %v does not wrap ErrInvalidValue", err)
			}
		})
	}
}
