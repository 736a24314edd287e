// Command annal-verify checks what an Annal log hands out, offline: a
// tlog-proof for an entry, a consistency proof between two checkpoints,
// equivocation evidence, an audit bundle, or one session's delta chain.
// It needs only the log's verifier key, makes no network connection, and
// exits non-zero naming the first check that failed.
//
// It is built on the verifier package alone, which shares no code with the
// kernel it verifies.
package main

import (
	"fmt"
	"io"
	"os"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run executes the command line and returns the exit status: 0 verified,
// 1 verification failed or unreadable input, 2 misuse.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	cmd := newRootCommand(stdin)
	cmd.SetArgs(args)
	cmd.SetOut(stdout)
	cmd.SetErr(stderr)
	err := cmd.Execute()
	if err == nil {
		return 0
	}
	fmt.Fprintln(stderr, "annal-verify:", err)
	if _, misuse := err.(usageError); misuse {
		return 2
	}
	return 1
}
