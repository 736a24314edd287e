package testvectors

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the expected values in the vector files from the values computed now")

// load reads a vector file strictly: a misspelt field in a hand-edited file
// must fail rather than be read as an empty expected value.
func load(t *testing.T, file string, v any) {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
}

// save writes v back to file under -update, and only then.
func save(t *testing.T, file string, v any) {
	t.Helper()
	if !*update || t.Failed() {
		return
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("rewrote %s", file)
}

// expect compares a value stored in a vector file with the value computed
// now. Under -update the computed value replaces the stored one; otherwise a
// difference fails the test and shows where the two part.
func expect(t *testing.T, file, vector, field string, stored *string, computed string) {
	t.Helper()
	if *stored == computed {
		return
	}
	if *update {
		*stored = computed
		return
	}
	t.Errorf("%s: vector %q: %s in the file differs from the value computed now; %s\n"+
		"If the format change is intended, run: go test ./testvectors -update",
		file, vector, field, describeDiff(*stored, computed))
}

// expectList is expect for a list of values.
func expectList(t *testing.T, file, vector, field string, stored *[]string, computed []string) {
	t.Helper()
	if *update && len(*stored) != len(computed) {
		*stored = make([]string, len(computed))
	}
	if len(*stored) != len(computed) {
		t.Errorf("%s: vector %q: %s has %d values in the file, %d computed now", file, vector, field, len(*stored), len(computed))
		return
	}
	for i := range computed {
		expect(t, file, vector, fmt.Sprintf("%s[%d]", field, i), &(*stored)[i], computed[i])
	}
}

func describeDiff(stored, computed string) string {
	i := 0
	for i < len(stored) && i < len(computed) && stored[i] == computed[i] {
		i++
	}
	return fmt.Sprintf("first difference at byte %d (line %d):\n    file:     %s\n    computed: %s",
		i, strings.Count(stored[:i], "\n")+1, around(stored, i), around(computed, i))
}

// around quotes the bytes of s near offset i, marking where i falls.
func around(s string, i int) string {
	from, to := max(0, i-30), min(len(s), i+30)
	return fmt.Sprintf("%q ^ %q", s[from:i], s[i:to])
}

func TestDescribeDiff(t *testing.T) {
	got := describeDiff("line one\nline two", "line one\nline 2")
	for _, want := range []string{"byte 14", "line 2", `"line one\nline " ^ "two"`, `"line one\nline " ^ "2"`} {
		if !strings.Contains(got, want) {
			t.Errorf("describeDiff = %q, lacks %q", got, want)
		}
	}
}
