package workload

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
)

// WriteTable writes the operations by kind and outcome (ok, held, the HTTP
// status of each refusal, fail), then what the checks found.
func (r *Report) WriteTable(w io.Writer) {
	r.writeOps(w)
	fmt.Fprintf(w, "\nseed %d, %d workers, %v", r.Seed, r.Workers, r.Elapsed.Round(1e6))
	if r.Stopped != "" {
		fmt.Fprintf(w, "; the workers stopped early: %s", r.Stopped)
	}
	fmt.Fprintln(w)
	if r.LogSize > 0 {
		var ks []string
		for _, k := range slices.Sorted(maps.Keys(r.LogKinds)) {
			ks = append(ks, fmt.Sprintf("%s %d", k, r.LogKinds[k]))
		}
		fmt.Fprintf(w, "log: %d entries (%s)\n", r.LogSize, strings.Join(ks, ", "))
		fmt.Fprintf(w, "read back after the restart: %d acknowledged answers\n", r.Acks)
	}
	if r.Audit != "" {
		fmt.Fprintf(w, "audit: %s\n", r.Audit)
	}
	if !r.Failed() {
		fmt.Fprintln(w, "no failures")
		return
	}
	r.writeFailures(w)
}

// writeOps writes the table of operations: a row for each kind, a column
// for each outcome seen, the totals last.
func (r *Report) writeOps(w io.Writer) {
	cols := map[string]bool{}
	for _, outs := range r.Ops {
		for o := range outs {
			cols[o] = true
		}
	}
	columns := slices.SortedFunc(maps.Keys(cols), func(a, b string) int { return outcomeOrder(a) - outcomeOrder(b) })
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "operation\t%s\ttotal\t\n", strings.Join(columns, "\t"))
	totals := map[string]int{}
	all := 0
	for _, op := range slices.Sorted(maps.Keys(r.Ops)) {
		var row []string
		sum := 0
		for _, c := range columns {
			n := r.Ops[op][c]
			totals[c] += n
			sum += n
			row = append(row, cell(n))
		}
		all += sum
		fmt.Fprintf(tw, "%s\t%s\t%d\t\n", op, strings.Join(row, "\t"), sum)
	}
	var row []string
	for _, c := range columns {
		row = append(row, cell(totals[c]))
	}
	fmt.Fprintf(tw, "all\t%s\t%d\t\n", strings.Join(row, "\t"), all)
	tw.Flush()
}

// outcomeOrder places an outcome's column: ok, held, the HTTP statuses in
// order, any other outcome, fail last.
func outcomeOrder(o string) int {
	switch o {
	case "ok":
		return 0
	case "held":
		return 1
	case "fail":
		return 10_000
	}
	if n, err := strconv.Atoi(o); err == nil {
		return n
	}
	return 9_999
}

// writeFailures writes what failed: the count by kind, the first
// failures, the kernel's first errors and warnings, and how to repeat the
// run.
func (r *Report) writeFailures(w io.Writer) {
	fmt.Fprintf(w, "\nFAILED: %d failures\n", r.FailureCount)
	for _, k := range slices.Sorted(maps.Keys(r.FailureKinds)) {
		fmt.Fprintf(w, "  %6d  %s\n", r.FailureKinds[k], k)
	}
	fmt.Fprintln(w, "first failures:")
	for _, f := range r.Failures {
		fmt.Fprintf(w, "  %s\n", f)
	}
	if len(r.KernelLog) > 0 {
		fmt.Fprintf(w, "the kernel's first distinct errors and warnings (%d lines in all):\n", r.KernelLogCount)
		for _, l := range r.KernelLog {
			fmt.Fprintf(w, "  %s\n", l)
		}
	}
	if r.DataDir != "" {
		fmt.Fprintf(w, "data folder: %s\n", r.DataDir)
	}
	fmt.Fprintf(w, "the workers' choices repeat with seed %d\n", r.Seed)
}

func cell(n int) string {
	if n == 0 {
		return "."
	}
	return strconv.Itoa(n)
}
