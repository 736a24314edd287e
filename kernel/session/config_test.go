package session

import (
	"errors"
	"strings"
	"testing"
)

func TestSpec10_2_Defaults(t *testing.T) {
	c := DefaultConfig()
	want := Config{Eventual, 10, 3600, 6000, true, false, Snapshot}
	if c != want {
		t.Fatalf("DefaultConfig() = %+v, want %+v", c, want)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	got, err := ParseConfig([]byte(`{}`))
	if err != nil || got != want {
		t.Fatalf("ParseConfig({}) = %+v, %v; want defaults", got, err)
	}
}

func TestSpec17_3_ConfigParse(t *testing.T) {
	got, err := ParseConfig([]byte(`{"consistency_mode":"STRONG","max_participants":1000,"max_duration_seconds":604800,"min_eff_score":0.6,"enable_audit":false,"enable_blockchain_commitment":true,"isolation":"READ_COMMITTED"}`))
	if err != nil {
		t.Fatal(err)
	}
	want := Config{Strong, 1000, 604800, 6000, false, true, ReadCommitted}
	if got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	for in, bp := range map[string]uint16{"0": 0, "1": 10000, "0.0": 0, "1.0": 10000, "0.60005": 6001, "0.12344": 1234, "0.85": 8500, "1e-4": 1, "-0": 0} {
		c, err := ParseConfig([]byte(`{"min_eff_score":` + in + `}`))
		if err != nil || c.MinEffScore != bp {
			t.Errorf("min_eff_score %s → %d, %v; want %d bp", in, c.MinEffScore, err, bp)
		}
	}
}

func TestSpec17_3_ConfigTypeMismatch(t *testing.T) {
	cases := []string{
		`{"max_participants":"10"}`,
		`{"max_participants":10.5}`,
		`{"max_participants":10.0}`,
		`{"max_participants":1e1}`,
		`{"max_participants":true}`,
		`{"max_participants":null}`,
		`{"max_duration_seconds":[3600]}`,
		`{"max_duration_seconds":{}}`,
		`{"min_eff_score":"0.6"}`,
		`{"min_eff_score":true}`,
		`{"min_eff_score":null}`,
		`{"enable_audit":1}`,
		`{"enable_audit":"true"}`,
		`{"enable_blockchain_commitment":null}`,
		`{"consistency_mode":1}`,
		`{"isolation":false}`,
		`[]`,
		`"x"`,
		`10`,
	}
	for _, in := range cases {
		_, err := ParseConfig([]byte(in))
		if !errors.Is(err, ErrType) {
			t.Errorf("ParseConfig(%s) = %v, want ErrType", in, err)
		}
	}
	_, err := ParseConfig([]byte(`{"max_participants":"10"}`))
	if err == nil || !strings.Contains(err.Error(), "max_participants") || !strings.Contains(err.Error(), "integer") {
		t.Errorf("error %v does not name the field and the rule", err)
	}
}

func TestSpec17_3_ConfigRange(t *testing.T) {
	cases := []string{
		`{"max_participants":0}`,
		`{"max_participants":1001}`,
		`{"max_participants":-1}`,
		`{"max_participants":-0}`,
		`{"max_participants":99999999999999999999999}`,
		`{"max_duration_seconds":0}`,
		`{"max_duration_seconds":604801}`,
		`{"min_eff_score":-0.0001}`,
		`{"min_eff_score":1.0001}`,
		`{"min_eff_score":1e400}`,
		`{"min_eff_score":-1e400}`,
		`{"consistency_mode":"strong"}`,
		`{"consistency_mode":""}`,
		`{"isolation":"NONE"}`,
	}
	for _, in := range cases {
		_, err := ParseConfig([]byte(in))
		if !errors.Is(err, ErrRange) {
			t.Errorf("ParseConfig(%s) = %v, want ErrRange", in, err)
		}
	}
	for _, c := range []Config{
		{Eventual, 0, 1, 0, true, false, Snapshot},
		{Eventual, 1, 604801, 0, true, false, Snapshot},
		{Eventual, 1, 1, 10001, true, false, Snapshot},
		{"", 1, 1, 0, true, false, Snapshot},
		{Strong, 1, 1, 0, true, false, ""},
	} {
		if err := c.Validate(); !errors.Is(err, ErrRange) {
			t.Errorf("Validate(%+v) = %v, want ErrRange", c, err)
		}
	}
	for _, ok := range []string{`{"max_participants":1}`, `{"max_duration_seconds":1}`, `{"max_participants":1000}`} {
		if _, err := ParseConfig([]byte(ok)); err != nil {
			t.Errorf("ParseConfig(%s) = %v", ok, err)
		}
	}
}

func TestSpec17_3_ConfigStrict(t *testing.T) {
	cases := map[string]error{
		`{"max_participants":5,"max_participants":5}`:     ErrSyntax,
		`{"min_eff_score_bp":6000}`:                       ErrUnknown,
		`{"Max_Participants":5}`:                          ErrUnknown,
		`{"max_participants":10,"Max_Participants":1000}`: ErrUnknown,
		`{"iſolation":"SERIALIZABLE"}`:                    ErrUnknown, // ſ (U+017F) folds to s
		`{"enable_bloc\u212achain_commitment":true}`:      ErrUnknown, // the Kelvin sign folds to k
		`{} {}`:                            ErrSyntax,
		`{}x`:                              ErrSyntax,
		`{"max_participants":5`:            ErrSyntax,
		``:                                 ErrSyntax,
		"{\"isolation\":\"SNAPSHOT\xff\"}": ErrSyntax,
		`{"max_participants":05}`:          ErrSyntax,
	}
	for in, want := range cases {
		if _, err := ParseConfig([]byte(in)); !errors.Is(err, want) {
			t.Errorf("ParseConfig(%q) = %v, want %v", in, err, want)
		}
	}
	big := `{"isolation":"SNAPSHOT"` + strings.Repeat(" ", MaxConfigSize) + `}`
	if _, err := ParseConfig([]byte(big)); !errors.Is(err, ErrTooBig) {
		t.Errorf("oversized body: %v, want ErrTooBig", err)
	}
}
