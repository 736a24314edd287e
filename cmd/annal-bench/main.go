// Command annal-bench measures the kernel end to end and prints a table.
//
// In one run it measures, on the same disk: raw Tessera POSIX Add (the
// baseline: no kernel, no HTTP), then annald's POST /v1/actions over HTTP at
// several concurrencies, the receipt latency of one sequential client, and
// the proof latency at the largest log size the run built. Every phase is
// bounded in time and count; servers listen on 127.0.0.1 only.
package main

import (
	"fmt"
	"os"

	"github.com/annal-dev/annal/internal/cli"
)

func main() {
	cmd := newCommand()
	cli.Setup(cmd)
	if err := cmd.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "annal-bench:", err)
		os.Exit(1)
	}
}
