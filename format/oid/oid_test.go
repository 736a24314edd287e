package oid

import (
	"strings"
	"testing"
)

func TestOf_KnownAnswers(t *testing.T) {
	for data, want := range map[string]string{
		"":    "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
		"abc": "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
	} {
		if got := Of([]byte(data)); got != want || !Valid(got) {
			t.Errorf("Of(%q) = %s (valid %v), want %s", data, got, Valid(got), want)
		}
	}
}

func TestValid_Rejects(t *testing.T) {
	good := Of([]byte("x"))
	for _, bad := range []string{
		"",
		"sha256:",
		strings.TrimPrefix(good, Prefix),
		"sha512:" + strings.TrimPrefix(good, Prefix),
		strings.ToUpper(good),
		good[:len(good)-1],
		good + "0",
		"sha256:" + strings.Repeat("g", 64),
		"sha256:../../" + strings.Repeat("0", 58),
	} {
		if Valid(bad) {
			t.Errorf("Valid(%q) = true", bad)
		}
	}
}
