package capability

import "strings"

// privilegedRoots are the first segments of privileged targets: the kernel's
// own records, which only root may write.
var privilegedRoots = []string{"system", "ledger"}

// IsPrivileged reports whether target's first segment is "system" or
// "ledger" ("system" itself, "system/a", "ledger/x/y"). It looks at the first
// segment only and does not validate the rest.
func IsPrivileged(target string) bool {
	first, _, _ := strings.Cut(target, "/")
	for _, root := range privilegedRoots {
		if first == root {
			return true
		}
	}
	return false
}
