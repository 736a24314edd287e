package vfspath

import (
	"errors"
	"strings"
	"testing"
)

func TestSpec002_VFS_PathsOfTheTree(t *testing.T) {
	for _, c := range []struct {
		uri, dir  string
		isDir     bool
		writable  bool
		wantAgent string
	}{
		{"vfs://a1/", "", true, false, "a1"},
		{"vfs://a1", "", true, false, "a1"},
		{"vfs://a1/mem", "", true, false, "a1"},
		{"vfs://a1/mem/working/", "", true, false, "a1"},
		{"vfs://a1/mem/working/notes.md", Working, false, true, "a1"},
		{"vfs://a1/mem/episodic/2026/11/day-1.json", Episodic, false, true, "a1"},
		{"vfs://a1/mem/semantic/facts", Semantic, false, true, "a1"},
		{"vfs://a1/state/checkpoints/c1", Checkpoints, false, true, "a1"},
		{"vfs://a1/ipc/inbox/hello", Inbox, false, true, "a1"},
		{"vfs://a1/ipc/outbox/b2/hello", Outbox, false, false, "a1"},
		{"vfs://a1/policy/active.json", "", false, false, "a1"},
		{"vfs://a1/policy/history.json", "", false, false, "a1"},
		{"vfs://a1/audit/events.jsonl", "", false, false, "a1"},
	} {
		p, err := ParseURI(c.uri)
		if err != nil {
			t.Errorf("%s: %v", c.uri, err)
			continue
		}
		if p.Agent != c.wantAgent || p.Dir() != c.dir || p.IsDir() != c.isDir || (p.Writable() == nil) != c.writable {
			t.Errorf("%s: agent %s dir %q isDir %v writable %v", c.uri, p.Agent, p.Dir(), p.IsDir(), p.Writable())
		}
		back, ok, err := ParseTarget(p.Target())
		if !ok || err != nil || back.Rel != p.Rel || back.Agent != p.Agent {
			t.Errorf("%s: target %s parses back as %+v, %v, %v", c.uri, p.Target(), back, ok, err)
		}
	}
}

func TestSpec002_VFS_PathsRefused(t *testing.T) {
	for uri, want := range map[string]string{
		"file://a1/mem/working/x":            "does not start with vfs://",
		"vfs:///mem/working/x":               "not an actor id",
		"vfs://A1/mem/working/x":             "not an actor id",
		"vfs://sessions/s1/x":                "files of sessions",
		"vfs://a1/mem/working/../x":          `".." segment`,
		"vfs://a1/mem/working/./x":           `"." segment`,
		"vfs://a1/mem/working//x":            "empty segment",
		"vfs://a1/mem/working/a*":            "A-Z a-z 0-9",
		"vfs://a1/mem/working/a b":           "A-Z a-z 0-9",
		"vfs://a1/tmp/x":                     "not in one of the tree's directories",
		"vfs://a1/policy/other.json":         "not in one of the tree's directories",
		"vfs://a1/mem/x":                     "not in one of the tree's directories",
		"vfs://a1/mem/working/" + long(129):  "more than 128",
		"vfs://a1/mem/working" + deep(9):     "more than 8",
		"vfs://a1/mem/working/" + long(600):  "more than 512",
		"vfs://a1/mem/working/x\x00":         "A-Z a-z 0-9",
		"vfs://a1/audit/events.jsonl/x":      "not in one of the tree's directories",
		"vfs://a1/mem/working/\u00e9t\u00e9": "A-Z a-z 0-9",
	} {
		_, err := ParseURI(uri)
		if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an ErrInvalid saying %q", uri, err, want)
		}
	}
}

func TestSpec002_VFS_ReadOnlyPathsSayWhy(t *testing.T) {
	for uri, want := range map[string]string{
		"vfs://a1/policy/active.json":  "view of the log",
		"vfs://a1/audit/events.jsonl":  "view of the log",
		"vfs://a1/mem/working":         "is a directory",
		"vfs://a1/ipc/outbox/b2/hello": "write to vfs://<agent>/ipc/inbox",
		"vfs://a1/policy/history.json": "view of the log",
	} {
		p, err := ParseURI(uri)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Writable(); !errors.Is(err, ErrReadOnly) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want ErrReadOnly saying %q", uri, err, want)
		}
	}
}

func TestParseTarget_OutsideTheNamespace(t *testing.T) {
	if _, ok, err := ParseTarget("workspace/vfs/a1"); ok || err != nil {
		t.Errorf("a target outside vfs/ is not the tree's: ok %v err %v", ok, err)
	}
	if _, ok, err := ParseTarget("vfs/a1/tmp"); !ok || err == nil {
		t.Errorf("vfs/a1/tmp: ok %v err %v, want refused", ok, err)
	}
}

func long(n int) string { return strings.Repeat("x", n) }

func deep(n int) string { return strings.Repeat("/d", n) }

// FuzzParseURI: whatever the input, a parsed path spells itself back the
// same way through both spellings, and a writable one lies in a
// writable directory with a name of the allowed bytes.
func FuzzParseURI(f *testing.F) {
	for _, s := range []string{"vfs://a1/", "vfs://a1/mem/working/notes.md", "vfs://a1/ipc/outbox/b2/m",
		"vfs://a1/policy/active.json", "vfs://a1/mem/working/../x", "vfs://sessions/s/x", "vfs://a1//", "vfs://a1/mem/working/a/b/c/d/e/f/g/h"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, uri string) {
		p, err := ParseURI(uri)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("%q: error %v does not wrap ErrInvalid", uri, err)
			}
			return
		}
		again, err := ParseURI(p.URI())
		if err != nil || again != p {
			t.Fatalf("%q → %q → %+v, %v", uri, p.URI(), again, err)
		}
		byTarget, ok, err := ParseTarget(p.Target())
		if !p.IsDir() && (!ok || err != nil || byTarget != p) {
			t.Fatalf("%q: target %q → %+v, %v, %v", uri, p.Target(), byTarget, ok, err)
		}
		if p.Writable() == nil {
			if strings.Contains(p.Rel, "..") && strings.Contains("/"+p.Rel+"/", "/../") || strings.Contains(p.Rel, "//") {
				t.Fatalf("%q: writable path %q has a bad segment", uri, p.Rel)
			}
			if d := p.Dir(); d == "" || d == Outbox || len(p.Rel) > MaxPath {
				t.Fatalf("%q: writable path %q in directory %q", uri, p.Rel, d)
			}
		}
	})
}
