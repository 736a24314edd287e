// Package procmem reads a Linux process's memory from /proc: how much of
// its resident set is the mapped pages of a given file. It reads only;
// on a system without /proc every answer is zero.
package procmem

import (
	"bufio"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// MappedRSS is the resident kB of this process's mappings of files whose
// path's last element is name (/proc/self/smaps).
func MappedRSS(name string) int64 {
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return 0
	}
	defer f.Close()
	return MappedRSSIn(f, name)
}

// MappedRSSIn sums the "Rss:" kB of the mappings in an smaps text whose
// path's last element is name.
func MappedRSSIn(r io.Reader, name string) int64 {
	var sum int64
	in := false
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 5 && strings.Contains(fields[0], "-") && !strings.HasSuffix(fields[0], ":") {
			// A mapping's header: address perms offset dev inode [path].
			in = len(fields) >= 6 && filepath.Base(fields[len(fields)-1]) == name
			continue
		}
		if in && len(fields) >= 2 && fields[0] == "Rss:" {
			n, _ := strconv.ParseInt(fields[1], 10, 64)
			sum += n
		}
	}
	return sum
}
