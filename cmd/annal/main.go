// Command annal is the command line of the thin client: submit actions,
// read receipts, events, checkpoints and proofs, create agents.
//
// The server URL comes from --server or ANNAL_SERVER; the credential from
// --credential, ANNAL_CREDENTIAL, --credential-file or ANNAL_CREDENTIAL_FILE.
package main

import (
	"errors"
	"fmt"
	"os"
	"strings"
)

func main() {
	if err := newRootCommand().Execute(); err != nil {
		var exit *exitError
		if errors.As(err, &exit) { // annal exec: the command's exit code, or one of its own
			if exit.msg != "" {
				fmt.Fprintln(os.Stderr, exit.msg)
			}
			os.Exit(exit.code)
		}
		msg := err.Error()
		if !strings.HasPrefix(msg, "annal: ") { // the client's errors name themselves
			msg = "annal: " + msg
		}
		fmt.Fprintln(os.Stderr, msg)
		os.Exit(1)
	}
}
