package session

import (
	"encoding/json"
	"errors"
	"path"
	"strings"
	"testing"
)

func TestSpec11_2_WorkDir(t *testing.T) {
	if got := WorkDir("session-1"); got != "sessions/session-1" {
		t.Fatalf("WorkDir = %q", got)
	}
}

func TestSpec11_4_FailClosed(t *testing.T) {
	if err := IsPathAllowed(nil, "sessions/session-1/x", false); !errors.Is(err, ErrDenied) {
		t.Fatalf("nil scope: %v", err)
	}
	for _, sc := range []*Scope{
		{},
		{Session: "session-1"},
		{Session: "../x", Isolation: Snapshot},
		{Session: "session-1", Isolation: "NONE"},
	} {
		if err := IsPathAllowed(sc, "sessions/session-1/x", false); !errors.Is(err, ErrDenied) {
			t.Errorf("scope %+v: %v", sc, err)
		}
	}
}

func TestSpec11_3_PathAccess(t *testing.T) {
	rc := &Scope{Session: "session-1", Isolation: ReadCommitted, Granted: []string{"session-2", "..", "a/b"}}
	snap := &Scope{Session: "session-1", Isolation: Snapshot, Granted: []string{"session-2"}}
	cases := []struct {
		scope  *Scope
		target string
		write  bool
		ok     bool
	}{
		{snap, "sessions/session-1", false, true},
		{snap, "sessions/session-1", true, true},
		{snap, "sessions/session-1/a/b.txt", true, true},
		{snap, "sessions/session-1/a/../b.txt", true, true},
		{snap, "sessions/session-1/./b", false, true},
		{snap, "./sessions/session-1/b", true, true},
		{snap, "sessions/../sessions/session-1/b", true, true},
		{snap, "sessions/session-2/x", false, false},
		{rc, "sessions/session-2/x", false, true},
		{rc, "sessions/session-2", false, true},
		{rc, "sessions/session-2/x", true, false},
		{rc, "sessions/session-3/x", false, false},
		{rc, "sessions", false, false},
		{rc, "sessions/..", false, false},
		{rc, "sessions/a/b/x", false, false},
		{rc, "workspace/x", false, false},
		{rc, "session-1/x", false, false},
		{rc, "Sessions/session-1/x", false, false},
		{rc, "sessions/SESSION-1/x", false, false},
	}
	for _, c := range cases {
		err := IsPathAllowed(c.scope, c.target, c.write)
		if (err == nil) != c.ok {
			t.Errorf("IsPathAllowed(%s, %q, write=%v) = %v, want allowed=%v", c.scope.Isolation, c.target, c.write, err, c.ok)
		}
		if err != nil && !errors.Is(err, ErrDenied) {
			t.Errorf("%q: error %v does not wrap ErrDenied", c.target, err)
		}
	}
}

func TestAttack_PathTraversal(t *testing.T) {
	own := &Scope{Session: "session-1", Isolation: ReadCommitted}
	for _, target := range []string{
		"sessions/session-1/../session-2/x",
		"sessions/session-10/x",
		"sessions/session-1x",
		"sessions/session-1/./../session-1x",
		"sessions/session-1/../../etc/passwd",
		"sessions/session-1/../../../sessions/session-1/x/../../session-2",
		"../sessions/session-1/x",
		"/sessions/session-1/x",
		"//sessions/session-1/x",
		"sessions//session-1/x",
		"sessions/session-1//x",
		"sessions/session-1/",
		"sessions/session-1\\..\\session-2",
		"sessions\\session-1\\x",
		"sessions/session-1/%2e%2e/session-2",
		"sessions/session-1%2f..%2fsession-2",
		"sessions/session-1/%252e%252e/x",
		"sessions/session-1/x\x00/../../session-2",
		"sessions/session-1/x\n",
		"sessions/session-1/\u0085x",
		"sessions/session-1/\xff",
		"",
		".",
		"..",
		"sessions/session-1/" + strings.Repeat("a/", MaxPathLength),
	} {
		if err := IsPathAllowed(own, target, false); !errors.Is(err, ErrDenied) {
			t.Errorf("IsPathAllowed(%q) = %v, want denied", target, err)
		}
	}
	// A traversal that resolves into a granted session is judged on where it
	// lands: readable under READ_COMMITTED, never writable.
	g := &Scope{Session: "session-1", Isolation: ReadCommitted, Granted: []string{"session-2"}}
	if err := IsPathAllowed(g, "sessions/session-1/../session-2/x", true); !errors.Is(err, ErrDenied) {
		t.Errorf("write into granted session via ..: %v", err)
	}
	if err := IsPathAllowed(g, "sessions/session-1/../session-2/x", false); err != nil {
		t.Errorf("read resolving into a granted session: %v", err)
	}
}

// inside is an independent statement of the property: the cleaned target is
// dir or below it, compared on whole segments.
func inside(clean, dir string) bool {
	return clean == dir || strings.HasPrefix(clean, dir+"/")
}

func FuzzIsPathAllowed(f *testing.F) {
	for _, s := range []string{
		"sessions/session-1/x", "sessions/session-1/../session-2/x", "sessions/session-10/x",
		"sessions/session-1/./../session-1x", "sessions/session-2", "../x", "/a", "sessions/session-1/%2e%2e",
		"sessions/session-1/a/../../session-2/b", "sessions/./session-1/x",
	} {
		f.Add(s, "session-1", "session-2", false, true)
		f.Add(s, "session-1", "session-2", true, false)
	}
	f.Fuzz(func(t *testing.T, target, own, granted string, write, rc bool) {
		iso := Snapshot
		if rc {
			iso = ReadCommitted
		}
		sc := &Scope{Session: own, Isolation: iso, Granted: []string{granted}}
		err := IsPathAllowed(sc, target, write)
		if err != nil {
			if !errors.Is(err, ErrDenied) {
				t.Fatalf("error %v does not wrap ErrDenied", err)
			}
			return
		}
		clean := path.Clean(target)
		if !validID(own) || strings.ContainsAny(target, "\\%\x00") || strings.HasPrefix(target, "/") {
			t.Fatalf("allowed %q under scope %+v", target, sc)
		}
		if inside(clean, WorkDir(own)) {
			return
		}
		if write || !rc || !validID(granted) || !inside(clean, WorkDir(granted)) {
			t.Fatalf("allowed %q (clean %q, write=%v) outside own %q and granted %q (rc=%v)", target, clean, write, own, granted, rc)
		}
	})
}

func FuzzParseConfig(f *testing.F) {
	for _, s := range []string{
		`{}`, `{"max_participants":10}`, `{"max_participants":"10"}`, `{"max_participants":10.5}`,
		`{"min_eff_score":0.6}`, `{"min_eff_score":1e400}`, `{"isolation":"READ_COMMITTED","consistency_mode":"STRONG"}`,
		`{"enable_audit":true,"enable_audit":false}`, `[]`, `{"x":1}`,
		`{"max_participants":10,"Max_Participants":1000}`, `{"iſolation":"SERIALIZABLE"}`, `{"ENABLE_AUDIT":false}`,
	} {
		f.Add([]byte(s))
	}
	apiNames := map[string]bool{"consistency_mode": true, "max_participants": true, "max_duration_seconds": true,
		"min_eff_score": true, "enable_audit": true, "enable_blockchain_commitment": true, "isolation": true}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseConfig(data)
		if err != nil {
			if c != (Config{}) {
				t.Fatalf("error %v with a non-zero config %+v", err, c)
			}
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("ParseConfig accepted %q giving an invalid %+v: %v", data, c, err)
		}
		var members map[string]json.RawMessage // exact keys
		if err := json.Unmarshal(data, &members); err != nil {
			t.Fatalf("ParseConfig accepted %q, which is not an object: %v", data, err)
		}
		for name := range members {
			if !apiNames[name] {
				t.Fatalf("ParseConfig accepted %q with the member %q", data, name)
			}
		}
	})
}
