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

// MayMatchPrivileged reports whether p matches some privileged target: "**",
// "*/x", "system/*" and "s*/a" do, "workspace/**" does not. A grant whose
// pattern may match one still gives no right to it: only root writes there.
//
// p matches a target starting with root exactly when reading the segment
// root leaves it some active position: every later position can be
// completed, a "**" by nothing and a glob by itself with each '*' replaced by
// some character. It errs towards true for a target that would pass the
// 1024-byte limit.
func MayMatchPrivileged(p Pattern) bool {
	if p.IsZero() {
		return false
	}
	start := p.start()
	for _, root := range privilegedRoots {
		if p.advance(start, p.globsMatching(start, root)) != 0 {
			return true
		}
	}
	return false
}
