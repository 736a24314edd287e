package main

import (
	"bytes"
	"context"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// The growth mode fills one annald to each stage, measures it, checks
// proofs with the verifier package (over HTTP and in process: a proof
// that does not verify fails the run), serves the same log with a
// baseline annald, and prints a row a stage of at least the stage's size.
func TestGrowth_SmallStages(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs annald")
	}
	o := testOptions(t)
	g := growthOptions{stages: []int{300, 900}, clients: 8, verifyN: 20,
		// The annald the run builds serves as its own baseline here.
		baseline: filepath.Join(o.dir, "bin", "annald")}
	var out bytes.Buffer
	if err := runGrowth(context.Background(), o, g, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	text := out.String()
	for _, want := range []string{"append @8", "receipt p50 @1 / fdatasync", "server-side proof p50", "baseline: append", "annald CPU a proof", "last/first stage: proofs/s",
		"anon / file / state.db map", "heap live / in use / GC goal / retained", "peak RSS / state.db map", "state.db on disk"} {
		if !strings.Contains(text, want) {
			t.Errorf("no %q in\n%s", want, text)
		}
	}
	rows := regexp.MustCompile(`(?m)^(\d+) +\d+/s `).FindAllStringSubmatch(text, -1)
	if len(rows) != len(g.stages) {
		t.Fatalf("%d rows, want %d:\n%s", len(rows), len(g.stages), text)
	}
	for i, r := range rows {
		if size, _ := strconv.Atoi(r[1]); size < g.stages[i] {
			t.Errorf("stage %d measured at size %d", g.stages[i], size)
		}
	}
	// Each stage's row of memory ends with the state file's size, the
	// baseline's too.
	if sizes := regexp.MustCompile(`(?m)^\d+ .* MiB +([1-9]\d* KiB|[\d.]+ MiB)$`).FindAllString(text, -1); len(sizes) != len(g.stages) {
		t.Errorf("%d rows that end with the state file's size, want %d:\n%s", len(sizes), len(g.stages), text)
	}
	// Each stage's receipt p50 comes with the same run's fdatasync p50
	// and their ratio, the baseline's too.
	if ratios := regexp.MustCompile(`\d ms / [\d.]+ ms = [\d.]+x`).FindAllString(text, -1); len(ratios) != 2*len(g.stages) {
		t.Errorf("%d receipt/fdatasync ratios, want %d:\n%s", len(ratios), 2*len(g.stages), text)
	}
}

// Stages must ascend: a later stage smaller than an earlier one is
// refused before anything starts.
func TestGrowth_StagesRefused(t *testing.T) {
	for _, stages := range [][]int{{1000, 500}, {0}, {100, 100}} {
		err := runGrowth(context.Background(), testOptions(t), growthOptions{stages: stages, clients: 1}, &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), "ascending") {
			t.Errorf("stages %v: %v, want a refusal", stages, err)
		}
	}
}
