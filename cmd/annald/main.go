// Command annald runs the Annal kernel: the sole committer of agent actions,
// serving its log as c2sp.org/tlog-tiles and its API over HTTP.
package main

import (
	"fmt"
	"os"
)

func main() {
	if err := newRootCommand().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "annald:", err)
		os.Exit(1)
	}
}
