package procmem

import (
	"strings"
	"testing"
)

// The resident kB of every mapping of the named file are summed, and no
// other mapping's; a header line with no path ends the file's mapping.
func TestMappedRSSIn(t *testing.T) {
	smaps := `7f3a10000000-7f3a14000000 r--s 00000000 fe:00 1234                       /tmp/x/state.db
Size:              65536 kB
Rss:               20480 kB
Pss:               20480 kB
7f3a14000000-7f3a14021000 rw-p 00000000 00:00 0 
Size:                132 kB
Rss:                 100 kB
7f3a20000000-7f3a20001000 r--p 00000000 fe:00 99                         /usr/lib/libc.so.6
Rss:                   4 kB
7f3a30000000-7f3a38000000 r--s 00000000 fe:00 1234                       /tmp/x/state.db
Rss:                1024 kB
7f3a38000000-7f3a38001000 r--s 00000000 fe:00 777                        /tmp/x/state.db.damaged
Rss:                   8 kB
`
	if got := MappedRSSIn(strings.NewReader(smaps), "state.db"); got != 20480+1024 {
		t.Errorf("mappedRSSIn = %d kB, want %d", got, 20480+1024)
	}
	if got := MappedRSSIn(strings.NewReader(smaps), "nothing.db"); got != 0 {
		t.Errorf("mappedRSSIn of an unmapped file = %d kB, want 0", got)
	}
}

// FuzzMappedRSSIn: any text is read without a panic, to a sum of zero or
// more.
func FuzzMappedRSSIn(f *testing.F) {
	f.Add("7f3a10000000-7f3a14000000 r--s 00000000 fe:00 1234 /tmp/x/state.db\nRss: 20480 kB\n")
	f.Add("a-b c d e f state.db\nRss: -5 kB\nRss:\n")
	f.Fuzz(func(t *testing.T, s string) {
		if got := MappedRSSIn(strings.NewReader(s), "state.db"); got < 0 && !strings.Contains(s, "-") {
			t.Fatalf("negative sum %d from text with no minus sign", got)
		}
	})
}
