package ring

import (
	"slices"
	"strings"
	"testing"
	"unicode"
)

func TestSpec7_2_DefaultConstraints(t *testing.T) {
	m := DefaultConstraints()
	for _, tc := range []struct {
		r       Ring
		network bool
		only    bool
		scope   FSScope
		write   bool
		sub     bool
		tools   int
	}{
		{Root, true, false, ScopeFull, true, true, 32},
		{Privileged, true, false, ScopeFull, true, true, 16},
		{Standard, true, true, ScopeScoped, true, true, 8},
		{Sandbox, false, false, ScopeNone, false, false, 2},
	} {
		c, ok := m[tc.r]
		if !ok {
			t.Fatalf("no constraints for %v", tc.r)
		}
		if c.NetworkAllowed != tc.network || c.NetworkAllowlistOnly != tc.only || c.FilesystemScope != tc.scope ||
			c.FilesystemWritable != tc.write || c.SubprocessAllowed != tc.sub || c.MaxConcurrentTools != tc.tools || len(c.NetworkAllowlist) != 0 {
			t.Errorf("%v: %+v", tc.r, c)
		}
	}
	if len(m) != 4 {
		t.Errorf("%d rings in DefaultConstraints", len(m))
	}
	m[Sandbox] = Constraints{MaxConcurrentTools: 99}
	if DefaultConstraints()[Sandbox].MaxConcurrentTools != 2 {
		t.Error("DefaultConstraints shares its map between calls")
	}
}

func TestSpec6_4_UnknownRingFallback(t *testing.T) {
	m := DefaultConstraints()
	for _, r := range []Ring{Ring(-1), Ring(4), Ring(100)} {
		if got := ConstraintsFor(m, r); got.FilesystemScope != ScopeNone || got.NetworkAllowed || got.MaxConcurrentTools != 2 {
			t.Errorf("ConstraintsFor(%v) = %+v, want Sandbox's", r, got)
		}
	}
	// An invalid ring present in the map still gets Sandbox.
	m[Ring(-1)] = m[Root]
	if got := ConstraintsFor(m, Ring(-1)); got.MaxConcurrentTools != 2 {
		t.Errorf("ConstraintsFor(-1) = %+v, want Sandbox's", got)
	}
	// A ring missing from a custom map falls back to its Sandbox.
	custom := map[Ring]Constraints{Sandbox: {MaxConcurrentTools: 1, FilesystemScope: ScopeNone}}
	if got := ConstraintsFor(custom, Standard); got.MaxConcurrentTools != 1 {
		t.Errorf("ConstraintsFor(custom, Standard) = %+v", got)
	}
	// A map without Sandbox falls back to the default Sandbox.
	if got := ConstraintsFor(map[Ring]Constraints{}, Standard); got.MaxConcurrentTools != 2 || got.NetworkAllowed {
		t.Errorf("ConstraintsFor(empty, Standard) = %+v", got)
	}
	if got := ConstraintsFor(m, Privileged); got.MaxConcurrentTools != 16 {
		t.Errorf("ConstraintsFor(Privileged) = %+v", got)
	}
}

// TestSpec6_3_ResourceTypes checks which resource types each ring allows
// at all (§6.3): a use of a type the ring refuses is denied for the type
// itself, whatever the destination or path; TOOL_EXECUTION is always
// allowed within the ring's count.
func TestSpec6_3_ResourceTypes(t *testing.T) {
	m := DefaultConstraints()
	own := []string{"sessions/s-1"}
	uses := map[Resource]Use{
		Network:       {Network: []string{"api.example.com:443"}},
		Filesystem:    {FilesystemRead: []string{"sessions/s-1/x"}},
		Subprocess:    {Subprocess: true},
		ToolExecution: {Tools: 1},
	}
	for _, tc := range []struct {
		r    Ring
		res  Resource
		want bool
	}{
		{Sandbox, Network, false}, {Sandbox, Filesystem, false}, {Sandbox, Subprocess, false}, {Sandbox, ToolExecution, true},
		{Standard, Network, true}, {Standard, Filesystem, true}, {Standard, Subprocess, true}, {Standard, ToolExecution, true},
		{Privileged, Network, true}, {Privileged, Filesystem, true}, {Privileged, Subprocess, true}, {Privileged, ToolExecution, true},
		{Root, Network, true}, {Root, Filesystem, true}, {Root, Subprocess, true}, {Root, ToolExecution, true},
	} {
		c := m[tc.r]
		if tc.r == Standard {
			c.NetworkAllowlist = []string{"api.example.com:443"} // Standard's allowlist binds, even empty
		}
		if got := len(c.CheckUse(uses[tc.res], own)) == 0; got != tc.want {
			t.Errorf("%v allows %s = %v, want %v", tc.r, tc.res, got, tc.want)
		}
	}
	if got := (Constraints{FilesystemScope: "everything"}).CheckUse(uses[Filesystem], own); len(got) != 1 || got[0].Resource != Filesystem {
		t.Errorf("an unknown scope allows the filesystem: %+v", got)
	}
}

func resources(ds []Denied) string {
	var s []string
	for _, d := range ds {
		s = append(s, string(d.Resource)+":"+d.Target)
	}
	return strings.Join(s, ",")
}

// TestSpec21_2_ResourceConstraintEnforcement covers §7 per ring with the
// default mapping.
func TestSpec21_2_ResourceConstraintEnforcement(t *testing.T) {
	own := []string{"sessions/s-1", "agents/a-1"}
	m := DefaultConstraints()
	std := m[Standard]
	std.NetworkAllowlist = []string{"api.example.com:443", "*.cdn.example.net"}
	m[Standard] = std
	for _, tc := range []struct {
		name string
		r    Ring
		use  Use
		want string // the denied resources, in order
	}{
		{"sandbox nothing", Sandbox, Use{}, ""},
		{"sandbox one tool", Sandbox, Use{Tools: 2}, ""},
		{"sandbox three tools", Sandbox, Use{Tools: 3}, "TOOL_EXECUTION:"},
		{"sandbox network", Sandbox, Use{Network: []string{"api.example.com:443"}}, "NETWORK:api.example.com:443"},
		{"sandbox read", Sandbox, Use{FilesystemRead: []string{"sessions/s-1/x"}}, "FILESYSTEM:sessions/s-1/x"},
		{"sandbox write", Sandbox, Use{FilesystemWrite: []string{"sessions/s-1/x"}}, "FILESYSTEM:sessions/s-1/x"},
		{"sandbox subprocess", Sandbox, Use{Subprocess: true}, "SUBPROCESS:"},
		{"standard allowlisted", Standard, Use{Network: []string{"api.example.com:443", "img.cdn.example.net"}}, ""},
		{"standard wrong port", Standard, Use{Network: []string{"api.example.com:80"}}, "NETWORK:api.example.com:80"},
		{"standard no port for port entry", Standard, Use{Network: []string{"api.example.com"}}, "NETWORK:api.example.com"},
		{"standard not listed", Standard, Use{Network: []string{"evil.com"}}, "NETWORK:evil.com"},
		{"standard write own", Standard, Use{FilesystemWrite: []string{"sessions/s-1/out.txt", "agents/a-1"}}, ""},
		{"standard read other", Standard, Use{FilesystemRead: []string{"sessions/s-2/x"}}, "FILESYSTEM:sessions/s-2/x"},
		{"standard subprocess and 8 tools", Standard, Use{Subprocess: true, Tools: 8}, ""},
		{"standard 9 tools", Standard, Use{Tools: 9}, "TOOL_EXECUTION:"},
		{"privileged anything", Privileged, Use{Network: []string{"evil.com:8443"}, FilesystemWrite: []string{"/etc/passwd"}, Subprocess: true, Tools: 16}, ""},
		{"privileged bad destination", Privileged, Use{Network: []string{"https://evil.com"}}, "NETWORK:https://evil.com"},
		{"privileged 17 tools", Privileged, Use{Tools: 17}, "TOOL_EXECUTION:"},
		{"root 32 tools", Root, Use{Tools: 32}, ""},
		{"negative tools", Root, Use{Tools: -1}, "TOOL_EXECUTION:"},
		{"order", Sandbox, Use{Network: []string{"a.b"}, FilesystemWrite: []string{"w"}, FilesystemRead: []string{"r"}, Subprocess: true, Tools: 3},
			"NETWORK:a.b,FILESYSTEM:w,FILESYSTEM:r,SUBPROCESS:,TOOL_EXECUTION:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := m[tc.r].CheckUse(tc.use, own)
			if s := resources(got); s != tc.want {
				t.Fatalf("CheckUse = %q, want %q (%+v)", s, tc.want, got)
			}
			for _, d := range got {
				if d.Reason == "" {
					t.Fatalf("denial without a reason: %+v", d)
				}
			}
		})
	}
}

// TestAttack_Ring2EmptyAllowlist: in Annal a Standard agent with the default
// (empty) allowlist reaches nothing, while §7.1's "empty = all" still holds
// for a constraint that does not set NetworkAllowlistOnly.
func TestAttack_Ring2EmptyAllowlist(t *testing.T) {
	std := DefaultConstraints()[Standard]
	if d := std.CheckUse(Use{Network: []string{"evil.com"}}, nil); len(d) != 1 || d[0].Resource != Network {
		t.Fatalf("Standard with an empty allowlist allowed evil.com: %+v", d)
	}
	open := Constraints{NetworkAllowed: true, FilesystemScope: ScopeNone, MaxConcurrentTools: 1}
	if d := open.CheckUse(Use{Network: []string{"evil.com"}}, nil); len(d) != 0 {
		t.Fatalf("an empty, non-binding allowlist refused: %+v", d)
	}
	open.NetworkAllowlist = []string{"good.com"}
	if d := open.CheckUse(Use{Network: []string{"evil.com"}}, nil); len(d) != 1 {
		t.Fatalf("a non-empty allowlist did not bind: %+v", d)
	}
}

func TestAttack_FilesystemEscape(t *testing.T) {
	scoped := Constraints{FilesystemScope: ScopeScoped, FilesystemWritable: true}
	session := Constraints{FilesystemScope: ScopeSession, FilesystemWritable: true}
	own := []string{"sessions/s-1/"}
	for _, tc := range []struct {
		path string
		ok   bool
	}{
		{"sessions/s-1", true},
		{"sessions/s-1/", true},
		{"sessions/s-1/a/b.txt", true},
		{"./sessions/s-1/a", true},
		{"sessions/s-1/a/../b", true},
		{"sessions//s-1/a", true},
		{"sessions/s-1/../s-2/secret", false},
		{"sessions/s-1/../../etc/passwd", false},
		{"../sessions/s-1/a", false},
		{"..", false},
		{".", false},
		{"sessions", false},
		{"sessions/s-10/a", false},
		{"sessions/s-1x", false},
		{"sessions/s-", false},
		{"/sessions/s-1/a", false},
		{"/etc/passwd", false},
		{"sessions/s-1/..\\..\\x", false},
		{"sessions/s-1/a\x00.txt", false},
		{"sessions/s-1/a\n", false},
		{"", false},
	} {
		for _, c := range []Constraints{scoped, session} {
			got := c.CheckUse(Use{FilesystemRead: []string{tc.path}, FilesystemWrite: []string{tc.path}}, own)
			if (len(got) == 0) != tc.ok {
				t.Errorf("scope %s, path %q: denied %+v, want ok %v", c.FilesystemScope, tc.path, got, tc.ok)
			}
			if !tc.ok && len(got) != 2 {
				t.Errorf("scope %s, path %q: %d denials, want 2 (read and write)", c.FilesystemScope, tc.path, len(got))
			}
		}
	}
	// Own directories that would widen the scope are ignored.
	for _, dir := range []string{"", ".", "./", "/", "..", "../x", "/etc", "a/../..", "x\x00"} {
		if got := scoped.CheckUse(Use{FilesystemRead: []string{"etc/passwd"}}, []string{dir}); len(got) != 1 {
			t.Errorf("own dir %q opened etc/passwd: %+v", dir, got)
		}
	}
	// Writes need filesystem_writable even inside the scope.
	ro := Constraints{FilesystemScope: ScopeScoped}
	if got := ro.CheckUse(Use{FilesystemWrite: []string{"sessions/s-1/a"}, FilesystemRead: []string{"sessions/s-1/a"}}, own); len(got) != 1 || !strings.Contains(got[0].Reason, "writes") {
		t.Errorf("read-only scoped write: %+v", got)
	}
	// Full allows absolute paths but not malformed ones; an unknown scope allows nothing.
	full := Constraints{FilesystemScope: ScopeFull, FilesystemWritable: true}
	if got := full.CheckUse(Use{FilesystemWrite: []string{"/etc/passwd", "../x"}}, nil); len(got) != 0 {
		t.Errorf("full scope refused: %+v", got)
	}
	if got := full.CheckUse(Use{FilesystemWrite: []string{"/etc/x\n"}}, nil); len(got) != 1 {
		t.Errorf("full scope accepted a control character: %+v", got)
	}
	if got := (Constraints{FilesystemScope: "FULL", FilesystemWritable: true}).CheckUse(Use{FilesystemRead: []string{"a"}}, []string{"a"}); len(got) != 1 {
		t.Errorf("unknown scope allowed a read: %+v", got)
	}
}

// controlOrFormat's ASCII shortcut answers as the Unicode tables do, for
// every ASCII rune; and checkText refuses what it names, ASCII or not.
func TestControlOrFormat_AgreesWithTheTables(t *testing.T) {
	for r := rune(0); r < 0x80; r++ {
		want := unicode.IsControl(r) || unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp)
		if got := controlOrFormat(r); got != want {
			t.Errorf("controlOrFormat(%U) = %v, the tables say %v", r, got, want)
		}
	}
	for _, r := range []rune{0x85, 0xAD, 0x200B, 0x200E, 0x2028, 0x2029, 0xFEFF} {
		if !controlOrFormat(r) || checkText("path", "a"+string(r)+"b") == nil {
			t.Errorf("%U is not refused", r)
		}
	}
	for _, s := range []string{"a\tb", "a\x7fb", "a\x00b", "\nb"} {
		if checkText("path", s) == nil {
			t.Errorf("%q is not refused", s)
		}
	}
	for _, s := range []string{"/work/notes.md", "/tmp/é ü ✓", "a b~!@#$%^&*()"} {
		if err := checkText("path", s); err != nil {
			t.Errorf("%q: %v", s, err)
		}
	}
}

// cleanDirs keeps a list that is clean already as it is, and otherwise
// gives what cleaning each dir and dropping the unusable ones gives.
func TestSpec7_CleanDirsKeepsACleanListAndCleansOthers(t *testing.T) {
	filter := func(dirs []string) []string {
		var out []string
		for _, d := range dirs {
			if c, ok := cleanDir(d); ok {
				out = append(out, c)
			}
		}
		return out
	}
	for _, dirs := range [][]string{
		nil,
		{"agents/a"},
		{"agents/a", "sessions/s/work"},
		{"agents/a", "/sessions/s/work"},
		{"agents/a/../b", "sessions/s/work"},
		{"agents/a", "..", "sessions/s/work"},
		{".", "agents/a"},
		{"agents/a", "a\\b", "x/./y"},
	} {
		got, want := cleanDirs(dirs), filter(dirs)
		if len(got) != len(want) || (len(want) > 0 && !slices.Equal(got, want)) {
			t.Errorf("cleanDirs(%q) = %q, want %q", dirs, got, want)
		}
	}
	clean := []string{"agents/a", "sessions/s/work"}
	if got := cleanDirs(clean); &got[0] != &clean[0] {
		t.Error("a clean list was copied")
	}
}
