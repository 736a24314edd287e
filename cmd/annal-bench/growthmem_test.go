package main

import (
	"strings"
	"testing"
)

const metricsText = `# HELP go_memstats_heap_inuse_bytes Number of heap bytes that are in use.
# TYPE go_memstats_heap_inuse_bytes gauge
go_memstats_heap_inuse_bytes 5.791744e+06
go_gc_duration_seconds{quantile="0"} 0
go_gc_gogc_percent 1000
go_memstats_next_gc_bytes 4.194304e+06
`

// parseGauges finds the unlabelled metrics asked, in the order asked,
// and says which are missing.
func TestParseGauges(t *testing.T) {
	got, err := parseGauges(strings.NewReader(metricsText), "go_memstats_next_gc_bytes", "go_gc_gogc_percent", "go_memstats_heap_inuse_bytes")
	if err != nil {
		t.Fatal(err)
	}
	if got[0] != 4194304 || got[1] != 1000 || got[2] != 5791744 {
		t.Fatalf("got %v", got)
	}
	if _, err := parseGauges(strings.NewReader(metricsText), "go_gc_gogc_percent", "go_memstats_stack_sys_bytes"); err == nil {
		t.Fatal("a missing metric was not an error")
	}
	if _, err := parseGauges(strings.NewReader("go_gc_gogc_percent many\n"), "go_gc_gogc_percent"); err == nil {
		t.Fatal("a value that is no number was not an error")
	}
}

// parseGauges reads annald's /metrics: any text gives values or an
// error, never a panic.
func FuzzParseGauges(f *testing.F) {
	f.Add(metricsText)
	f.Add("go_gc_gogc_percent\n")
	f.Add("go_gc_gogc_percent 1 2\ngo_gc_gogc_percent 3\n")
	f.Fuzz(func(t *testing.T, text string) {
		vals, err := parseGauges(strings.NewReader(text), "go_gc_gogc_percent", "go_memstats_next_gc_bytes")
		if err == nil && len(vals) != 2 {
			t.Fatalf("%d values for 2 names", len(vals))
		}
	})
}
