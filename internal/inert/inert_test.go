package inert

import "testing"

// TestControlsAndBidiAreEscaped: what could run on a terminal or reorder
// what a person reads is shown as an escape; other text is kept.
func TestControlsAndBidiAreEscaped(t *testing.T) {
	for in, want := range map[string]string{
		"workspace/notes.md":       "workspace/notes.md",
		"a\x1b[31mred":             `a\u001b[31mred`,
		"line\nforged: approved":   `line\u000aforged: approved`,
		"evil\u202etxt.exe":        `evil\u202etxt.exe`,
		"\u2066isolate\u2069":      `\u2066isolate\u2069`,
		"c1\u009b":                 `c1\u009b`,
		"ünïcödé, 日本語 and emoji 🙂": "ünïcödé, 日本語 and emoji 🙂",
	} {
		if got := Text(in); got != want {
			t.Errorf("Text(%q) = %q, want %q", in, got, want)
		}
	}
}
