// Command annal is the command line of the thin client: submit actions,
// read receipts, events, checkpoints and proofs, create agents.
//
// The server URL comes from --server or ANNAL_SERVER; the credential from
// --credential, ANNAL_CREDENTIAL, --credential-file or ANNAL_CREDENTIAL_FILE.
package main

import (
	"fmt"
	"os"
	"strings"
)

func main() {
	if err := newRootCommand().Execute(); err != nil {
		msg := err.Error()
		if !strings.HasPrefix(msg, "annal: ") { // the client's errors name themselves
			msg = "annal: " + msg
		}
		fmt.Fprintln(os.Stderr, msg)
		os.Exit(1)
	}
}
