// Command annal is the command line of the thin client: submit actions,
// read receipts, events, checkpoints and proofs, create agents.
//
// The server URL comes from --server or ANNAL_SERVER; the credential from
// --credential, ANNAL_CREDENTIAL, --credential-file or ANNAL_CREDENTIAL_FILE.
package main

import (
	"fmt"
	"os"
)

func main() {
	if err := newRootCommand().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "annal:", err)
		os.Exit(1)
	}
}
