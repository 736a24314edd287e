package ring

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func strp(s string) *string { return &s }

func validDescriptor() Descriptor {
	return Descriptor{
		ActionID:      "files.write",
		Name:          "Write a file",
		ExecuteAPI:    "/api/files/write",
		UndoAPI:       strp("/api/files/restore"),
		Reversibility: Full,
		IsReadOnly:    false,
		IsAdmin:       false,
	}
}

func TestSpec22_2_ActionClassification(t *testing.T) {
	for _, tc := range []struct {
		name     string
		rev      Reversibility
		readOnly bool
		admin    bool
		want     Ring
	}{
		{"is_admin=true", Full, false, true, Root},
		{"reversibility=NONE, is_read_only=false", None, false, false, Privileged},
		{"is_read_only=true", Full, true, false, Sandbox},
		{"reversibility=FULL, is_read_only=false", Full, false, false, Standard},
	} {
		d := Descriptor{Reversibility: tc.rev, IsReadOnly: tc.readOnly, IsAdmin: tc.admin}
		if got := d.RequiredRing(); got != tc.want {
			t.Errorf("%s: RequiredRing() = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestSpec5_2_RequiredRingDerivation covers every combination of §5.2's
// inputs, including an unknown reversibility, which counts as NONE.
func TestSpec5_2_RequiredRingDerivation(t *testing.T) {
	for _, rev := range []Reversibility{Full, Partial, None, "", "none", "BOGUS"} {
		for _, ro := range []bool{false, true} {
			for _, admin := range []bool{false, true} {
				var want Ring
				switch {
				case admin:
					want = Root
				case (rev == None || !rev.Valid()) && !ro:
					want = Privileged
				case ro:
					want = Sandbox
				default:
					want = Standard
				}
				d := Descriptor{Reversibility: rev, IsReadOnly: ro, IsAdmin: admin}
				if got := d.RequiredRing(); got != want {
					t.Errorf("RequiredRing(%q, read-only %v, admin %v) = %v, want %v", rev, ro, admin, got, want)
				}
			}
		}
	}
	// Hand-checked points, independent of the formula above.
	if (Descriptor{Reversibility: "x"}).RequiredRing() != Privileged {
		t.Error("an unknown reversibility does not fail closed to Privileged")
	}
	if (Descriptor{Reversibility: None, IsReadOnly: true}).RequiredRing() != Sandbox {
		t.Error("a read-only irreversible action is not Sandbox")
	}
	if (Descriptor{Reversibility: Partial}).RequiredRing() != Standard {
		t.Error("a partially reversible action is not Standard")
	}
}

func TestSpec5_3_DescriptorValidation(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*Descriptor)
		ok     bool
	}{
		{"valid", func(*Descriptor) {}, true},
		{"no undo api", func(d *Descriptor) { d.UndoAPI = nil }, true},
		{"undo window max", func(d *Descriptor) { d.UndoWindowSeconds = 86400 }, true},
		{"compensation", func(d *Descriptor) { d.CompensationMethod = strp("restore_snapshot") }, true},
		{"name 256 runes", func(d *Descriptor) { d.Name = strings.Repeat("é", 256) }, true},
		{"bad action id", func(d *Descriptor) { d.ActionID = "files.write\n" }, false},
		{"empty name", func(d *Descriptor) { d.Name = "" }, false},
		{"name 257 runes", func(d *Descriptor) { d.Name = strings.Repeat("é", 257) }, false},
		{"name with newline", func(d *Descriptor) { d.Name = "Write\nApproved by admin" }, false},
		{"empty execute api", func(d *Descriptor) { d.ExecuteAPI = "" }, false},
		{"long execute api", func(d *Descriptor) { d.ExecuteAPI = strings.Repeat("a", 2049) }, false},
		{"empty undo api", func(d *Descriptor) { d.UndoAPI = strp("") }, false},
		{"undo api NUL", func(d *Descriptor) { d.UndoAPI = strp("/x\x00") }, false},
		{"reversibility lower case", func(d *Descriptor) { d.Reversibility = "full" }, false},
		{"reversibility empty", func(d *Descriptor) { d.Reversibility = "" }, false},
		{"undo window negative", func(d *Descriptor) { d.UndoWindowSeconds = -1 }, false},
		{"undo window 86401", func(d *Descriptor) { d.UndoWindowSeconds = 86401 }, false},
		{"empty compensation", func(d *Descriptor) { d.CompensationMethod = strp("") }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := validDescriptor()
			tc.change(&d)
			err := d.Validate()
			if (err == nil) != tc.ok {
				t.Fatalf("Validate() = %v, want ok %v", err, tc.ok)
			}
			if err != nil && !errors.Is(err, ErrInvalidValue) {
				t.Fatalf("error %v does not wrap ErrInvalidValue", err)
			}
		})
	}
}

const goodJSON = `{"action_id":"files.write","name":"Write a file","execute_api":"/api/files/write",` +
	`"undo_api":"/api/files/restore","reversibility":"FULL","undo_window_seconds":60,` +
	`"compensation_method":null,"is_read_only":false,"is_admin":false}`

func TestParseDescriptor(t *testing.T) {
	d, err := ParseDescriptor([]byte(goodJSON))
	if err != nil {
		t.Fatal(err)
	}
	want := Descriptor{ActionID: "files.write", Name: "Write a file", ExecuteAPI: "/api/files/write",
		UndoAPI: strp("/api/files/restore"), Reversibility: Full, UndoWindowSeconds: 60}
	if d.ActionID != want.ActionID || d.Name != want.Name || d.ExecuteAPI != want.ExecuteAPI ||
		d.UndoAPI == nil || *d.UndoAPI != *want.UndoAPI || d.Reversibility != Full ||
		d.UndoWindowSeconds != 60 || d.CompensationMethod != nil || d.IsAdmin || d.IsReadOnly {
		t.Fatalf("ParseDescriptor = %+v", d)
	}
	// The JSON form round-trips with the specification's names.
	out, _ := roundTrip(t, d)
	for _, field := range []string{`"action_id"`, `"execute_api"`, `"undo_api"`, `"reversibility"`, `"undo_window_seconds"`, `"is_read_only"`, `"is_admin"`} {
		if !strings.Contains(string(out), field) {
			t.Errorf("JSON %s lacks %s", out, field)
		}
	}
	// Optional members may be left out.
	min := `{"action_id":"a","name":"n","execute_api":"/x","reversibility":"NONE","is_read_only":true,"is_admin":false}`
	if d, err := ParseDescriptor([]byte(min)); err != nil || d.UndoWindowSeconds != 0 || d.UndoAPI != nil {
		t.Fatalf("ParseDescriptor(%s) = %+v, %v", min, d, err)
	}
}

// TestSpec17_3_DescriptorTypeMismatch checks that a value of the wrong JSON
// type is a TypeError (ErrTypeMismatch) naming the field, and a value of the
// right type out of range a ValueError (ErrInvalidValue).
func TestSpec17_3_DescriptorTypeMismatch(t *testing.T) {
	replace := func(old, new string) string {
		if !strings.Contains(goodJSON, old) {
			t.Fatalf("goodJSON lacks %s", old)
		}
		return strings.Replace(goodJSON, old, new, 1)
	}
	for _, tc := range []struct {
		name  string
		json  string
		want  error
		field string
	}{
		{"is_admin string", replace(`"is_admin":false`, `"is_admin":"false"`), ErrTypeMismatch, "is_admin"},
		{"is_admin null", replace(`"is_admin":false`, `"is_admin":null`), ErrTypeMismatch, "is_admin"},
		{"is_admin number", replace(`"is_admin":false`, `"is_admin":0`), ErrTypeMismatch, "is_admin"},
		{"is_read_only array", replace(`"is_read_only":false`, `"is_read_only":[]`), ErrTypeMismatch, "is_read_only"},
		{"action_id number", replace(`"action_id":"files.write"`, `"action_id":7`), ErrTypeMismatch, "action_id"},
		{"name object", replace(`"name":"Write a file"`, `"name":{}`), ErrTypeMismatch, "name"},
		{"undo_api bool", replace(`"undo_api":"/api/files/restore"`, `"undo_api":true`), ErrTypeMismatch, "undo_api"},
		{"window string", replace(`"undo_window_seconds":60`, `"undo_window_seconds":"60"`), ErrTypeMismatch, "undo_window_seconds"},
		{"window fraction", replace(`"undo_window_seconds":60`, `"undo_window_seconds":60.5`), ErrTypeMismatch, "undo_window_seconds"},
		{"window float form", replace(`"undo_window_seconds":60`, `"undo_window_seconds":60.0`), ErrTypeMismatch, "undo_window_seconds"},
		{"window exponent", replace(`"undo_window_seconds":60`, `"undo_window_seconds":6e1`), ErrTypeMismatch, "undo_window_seconds"},
		{"window null", replace(`"undo_window_seconds":60`, `"undo_window_seconds":null`), ErrTypeMismatch, "undo_window_seconds"},
		{"window negative", replace(`"undo_window_seconds":60`, `"undo_window_seconds":-1`), ErrInvalidValue, "undo_window_seconds"},
		{"window huge", replace(`"undo_window_seconds":60`, `"undo_window_seconds":99999999999999999999999`), ErrInvalidValue, "undo_window_seconds"},
		{"window 86401", replace(`"undo_window_seconds":60`, `"undo_window_seconds":86401`), ErrInvalidValue, "undo_window_seconds"},
		{"reversibility lower", replace(`"FULL"`, `"full"`), ErrInvalidValue, "reversibility"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseDescriptor([]byte(tc.json))
			if !errors.Is(err, tc.want) {
				t.Fatalf("ParseDescriptor(%s) = %v, want %v", tc.json, err, tc.want)
			}
			if !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("error %q does not name the field %s", err, tc.field)
			}
		})
	}
}

func TestAttack_DescriptorStrictJSON(t *testing.T) {
	for _, tc := range []struct {
		name string
		json string
	}{
		{"duplicate is_admin", strings.Replace(goodJSON, `"is_admin":false`, `"is_admin":true,"is_admin":false`, 1)},
		{"case-folded member", strings.Replace(goodJSON, `"is_admin":false`, `"is_admin":true,"IS_ADMIN":false`, 1)},
		{"case-folded only", strings.Replace(goodJSON, `"is_admin"`, `"Is_Admin"`, 1)},
		{"long s (U+017F), which folds to s", strings.Replace(goodJSON, `"reversibility"`, `"reverſibility"`, 1)},
		{"escaped long s beside the exact member", strings.Replace(goodJSON, `"undo_window_seconds":60`, `"undo_window_seconds":60,"undo_window_\u017feconds":0`, 1)},
		{"unknown member", strings.Replace(goodJSON, `}`, `,"ring":0}`, 1)},
		{"missing is_admin", strings.Replace(goodJSON, `,"is_admin":false`, ``, 1)},
		{"missing is_read_only", strings.Replace(goodJSON, `"is_read_only":false,`, ``, 1)},
		{"missing reversibility", strings.Replace(goodJSON, `"reversibility":"FULL",`, ``, 1)},
		{"missing action_id", strings.Replace(goodJSON, `"action_id":"files.write",`, ``, 1)},
		{"trailing data", goodJSON + `{}`},
		{"trailing garbage", goodJSON + `x`},
		{"array", `[` + goodJSON + `]`},
		{"null", `null`},
		{"empty", ``},
		{"truncated", goodJSON[:len(goodJSON)-1]},
		{"invalid UTF-8", strings.Replace(goodJSON, "Write a file", "Write \xff file", 1)},
		{"lone surrogate", strings.Replace(goodJSON, "Write a file", `Write \ud800 file`, 1)},
		{"NUL escape in id", strings.Replace(goodJSON, "files.write", `files.write\u0000`, 1)},
		{"newline escape in id", strings.Replace(goodJSON, "files.write", `files.write\n`, 1)},
		{"too large", strings.Replace(goodJSON, "Write a file", strings.Repeat(" ", MaxDescriptorSize), 1)},
		{"deep nesting", strings.Replace(goodJSON, `"is_admin":false`, `"is_admin":`+strings.Repeat("[", 5000), 1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if d, err := ParseDescriptor([]byte(tc.json)); err == nil {
				t.Fatalf("ParseDescriptor accepted %.200q as %+v", tc.json, d)
			}
		})
	}
	// A valid surrogate pair and ordinary escapes are accepted.
	ok := strings.Replace(goodJSON, "Write a file", `Write \ud83d\ude00 \"file\" \\u0041`, 1)
	d, err := ParseDescriptor([]byte(ok))
	if err != nil {
		t.Fatalf("ParseDescriptor refused escapes: %v", err)
	}
	if d.Name != "Write \U0001F600 \"file\" \\u0041" {
		t.Fatalf("name = %q", d.Name)
	}
	// Whitespace around the object is fine.
	if _, err := ParseDescriptor([]byte(" \n" + goodJSON + "\n ")); err != nil {
		t.Fatalf("ParseDescriptor refused surrounding whitespace: %v", err)
	}
}

// TestSpec16_RiskWeight checks that the weight of each reversibility level
// is the midpoint (§16.2) of its range (§16.1), and that any other value is
// weighed as NONE.
func TestSpec16_RiskWeight(t *testing.T) {
	for _, tc := range []struct {
		r      Reversibility
		lo, hi float64 // §16.1
		weight float64
		bp     int
	}{
		{Full, 0.1, 0.3, 0.2, 2000},
		{Partial, 0.5, 0.8, 0.65, 6500},
		{None, 0.9, 1.0, 0.95, 9500},
		{"bogus", 0.9, 1.0, 0.95, 9500},
		{"full", 0.9, 1.0, 0.95, 9500},
	} {
		if w := RiskWeight(tc.r); w != tc.weight {
			t.Errorf("RiskWeight(%q) = %v, want %v", tc.r, w, tc.weight)
		}
		if mid := (tc.lo + tc.hi) / 2; mid-RiskWeight(tc.r) > 1e-12 || RiskWeight(tc.r)-mid > 1e-12 {
			t.Errorf("RiskWeight(%q) = %v is not the midpoint %v of [%v, %v] (§16.2)", tc.r, RiskWeight(tc.r), mid, tc.lo, tc.hi)
		}
		if bp := RiskWeightBasisPoints(tc.r); bp != tc.bp {
			t.Errorf("RiskWeightBasisPoints(%q) = %d, want %d", tc.r, bp, tc.bp)
		}
	}
}

// roundTrip encodes d, parses it back, and checks that the second
// encoding is the first; it returns the encoding and the parsed copy.
func roundTrip(t testing.TB, d Descriptor) ([]byte, Descriptor) {
	t.Helper()
	out, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	d2, err := ParseDescriptor(out)
	if err != nil {
		t.Fatalf("re-parsing %s: %v", out, err)
	}
	out2, _ := json.Marshal(d2)
	if string(out) != string(out2) {
		t.Fatalf("round trip changed %s into %s", out, out2)
	}
	return out, d2
}
