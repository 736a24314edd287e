package signal

import (
	"encoding/json"
	"errors"
	"testing"
)

func TestAgentOS_SignalValues(t *testing.T) {
	for _, tc := range []struct {
		s        Signal
		value    int
		name     string
		maskable bool
	}{
		{SIGSTOP, 1, "SIGSTOP", true},
		{SIGCONT, 2, "SIGCONT", true},
		{SIGINT, 3, "SIGINT", true},
		{SIGKILL, 4, "SIGKILL", false},
		{SIGTERM, 5, "SIGTERM", true},
		{SIGPOLICY, 8, "SIGPOLICY", false},
		{SIGTRUST, 9, "SIGTRUST", false},
	} {
		if int(tc.s) != tc.value || tc.s.String() != tc.name || !tc.s.Valid() {
			t.Errorf("%v: value %d, String %q, want %d %q", tc.s, int(tc.s), tc.s.String(), tc.value, tc.name)
		}
		if tc.s.Maskable() != tc.maskable {
			t.Errorf("%s.Maskable() = %v, want %v", tc.name, tc.s.Maskable(), tc.maskable)
		}
	}
	for _, v := range []Signal{0, 6, 7, 10, -1, 16} {
		if v.Valid() || v.Maskable() {
			t.Errorf("Signal(%d) is valid or maskable", int(v))
		}
	}
	if got := Signal(7).String(); got != "Signal(7)" {
		t.Errorf("Signal(7).String() = %q", got)
	}
}

func TestAgentOS_SignalParse(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Signal // 0: refused
	}{
		{"SIGSTOP", SIGSTOP}, {"sigstop", SIGSTOP}, {"stop", SIGSTOP}, {"Stop", SIGSTOP}, {"STOP", SIGSTOP},
		{"SIGCONT", SIGCONT}, {"cont", SIGCONT}, {"SIGINT", SIGINT}, {"int", SIGINT},
		{"SIGKILL", SIGKILL}, {"kill", SIGKILL}, {"SIGTERM", SIGTERM}, {"term", SIGTERM},
		{"SIGPOLICY", SIGPOLICY}, {"policy", SIGPOLICY}, {"SigTrust", SIGTRUST}, {"trust", SIGTRUST},
		{"", 0}, {"SIG", 0}, {"SIGSIGSTOP", 0}, {" SIGSTOP", 0}, {"SIGSTOP\n", 0}, {"4", 0}, {"SIGHUP", 0},
		{"ſtop", 0}, {"SIG\u212aILL", 0}, {"continue", 0}, {"SIG_STOP", 0},
	} {
		got, err := Parse(tc.in)
		if tc.want == 0 {
			if err == nil || !errors.Is(err, ErrInvalid) {
				t.Errorf("Parse(%q) = %v, %v, want ErrInvalid", tc.in, got, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("Parse(%q) = %v, %v, want %v", tc.in, got, err, tc.want)
		}
	}
}

func TestAgentOS_SignalMaskable(t *testing.T) {
	var m Mask
	for _, s := range All() {
		next, err := m.With(s)
		if s.Maskable() {
			if err != nil || !next.Has(s) {
				t.Fatalf("With(%s) = %v, %v", s, next, err)
			}
			m = next
			continue
		}
		if err == nil || !errors.Is(err, ErrInvalid) || next != m || next.Has(s) {
			t.Errorf("With(%s) = %#x, %v: want refused and the mask unchanged", s, uint16(next), err)
		}
	}
	if want := Mask(1<<1 | 1<<2 | 1<<3 | 1<<5); m != want {
		t.Fatalf("mask of every maskable signal = %#x, want %#x", uint16(m), uint16(want))
	}
	if _, err := m.With(Signal(7)); err == nil {
		t.Error("With(Signal(7)) accepted")
	}
	if Mask(0xffff).Has(SIGKILL) || Mask(0xffff).Valid() {
		t.Error("a raw mask with every bit holds SIGKILL or is valid")
	}
}

func TestAgentOS_SignalMaskJSON(t *testing.T) {
	for _, tc := range []struct {
		m    Mask
		json string
	}{
		{0, `[]`},
		{1 << SIGSTOP, `["SIGSTOP"]`},
		{1<<SIGSTOP | 1<<SIGINT, `["SIGINT","SIGSTOP"]`},
		{1<<SIGSTOP | 1<<SIGCONT | 1<<SIGINT | 1<<SIGTERM, `["SIGCONT","SIGINT","SIGSTOP","SIGTERM"]`},
	} {
		got, err := json.Marshal(tc.m)
		if err != nil || string(got) != tc.json {
			t.Errorf("Marshal(%#x) = %s, %v, want %s", uint16(tc.m), got, err, tc.json)
		}
		var back Mask
		if err := json.Unmarshal([]byte(tc.json), &back); err != nil || back != tc.m {
			t.Errorf("Unmarshal(%s) = %#x, %v", tc.json, uint16(back), err)
		}
	}
	if _, err := json.Marshal(Mask(1 << SIGKILL)); err == nil {
		t.Error("Marshal of a mask holding SIGKILL accepted")
	}
	var m Mask
	if err := json.Unmarshal([]byte(`["SIGTERM","SIGSTOP"]`), &m); err != nil || m != 1<<SIGSTOP|1<<SIGTERM {
		t.Errorf("names in any order: %#x, %v", uint16(m), err)
	}
	for _, bad := range []string{
		`null`, `{}`, `"SIGSTOP"`, `[1]`, `["stop"]`, `["sigstop"]`, `["SIGKILL"]`, `["SIGPOLICY"]`, `["SIGTRUST"]`,
		`["SIGSTOP","SIGSTOP"]`, `["SIGHUP"]`, `[null]`, `["SIGSTOP",]`, `[] []`, ``,
	} {
		m := Mask(1 << SIGCONT)
		err := m.UnmarshalJSON([]byte(bad))
		if err == nil || !errors.Is(err, ErrInvalid) || m != 1<<SIGCONT {
			t.Errorf("UnmarshalJSON(%s) = %#x, %v: want ErrInvalid and the mask unchanged", bad, uint16(m), err)
		}
	}
}

// TestAgentOS_SignalDelivery covers every (state, masked, signal): masked
// means the mask holds every maskable signal.
func TestAgentOS_SignalDelivery(t *testing.T) {
	const (
		R, S, T = Running, Stopped, Terminated
	)
	full := Mask(1<<SIGSTOP | 1<<SIGCONT | 1<<SIGINT | 1<<SIGTERM)
	type out struct {
		effect Effect
		state  AgentState
		err    bool
	}
	refused := out{err: true}
	for _, tc := range []struct {
		state  AgentState
		masked bool
		s      Signal
		want   out
	}{
		{R, false, SIGSTOP, out{EffectStop, S, false}},
		{R, false, SIGCONT, out{EffectNone, R, false}},
		{R, false, SIGINT, out{EffectQueue, R, false}},
		{R, false, SIGKILL, out{EffectTerminate, T, false}},
		{R, false, SIGTERM, out{EffectTerminate, T, false}},
		{R, false, SIGPOLICY, out{EffectTerminate, T, false}},
		{R, false, SIGTRUST, out{EffectTerminate, T, false}},
		{R, true, SIGSTOP, out{EffectQueue, R, false}},
		{R, true, SIGCONT, out{EffectQueue, R, false}},
		{R, true, SIGINT, out{EffectQueue, R, false}},
		{R, true, SIGKILL, out{EffectTerminate, T, false}},
		{R, true, SIGTERM, out{EffectQueue, R, false}},
		{R, true, SIGPOLICY, out{EffectTerminate, T, false}},
		{R, true, SIGTRUST, out{EffectTerminate, T, false}},
		{S, false, SIGSTOP, out{EffectNone, S, false}},
		{S, false, SIGCONT, out{EffectContinue, R, false}},
		{S, false, SIGINT, out{EffectQueue, S, false}},
		{S, false, SIGKILL, out{EffectTerminate, T, false}},
		{S, false, SIGTERM, out{EffectTerminate, T, false}},
		{S, false, SIGPOLICY, out{EffectTerminate, T, false}},
		{S, false, SIGTRUST, out{EffectTerminate, T, false}},
		{S, true, SIGSTOP, out{EffectQueue, S, false}},
		{S, true, SIGCONT, out{EffectQueue, S, false}},
		{S, true, SIGINT, out{EffectQueue, S, false}},
		{S, true, SIGKILL, out{EffectTerminate, T, false}},
		{S, true, SIGTERM, out{EffectQueue, S, false}},
		{S, true, SIGPOLICY, out{EffectTerminate, T, false}},
		{S, true, SIGTRUST, out{EffectTerminate, T, false}},
		{T, false, SIGSTOP, refused},
		{T, false, SIGCONT, refused},
		{T, false, SIGINT, refused},
		{T, false, SIGKILL, refused},
		{T, false, SIGTERM, refused},
		{T, false, SIGPOLICY, refused},
		{T, false, SIGTRUST, refused},
		{T, true, SIGSTOP, refused},
		{T, true, SIGCONT, refused},
		{T, true, SIGINT, refused},
		{T, true, SIGKILL, refused},
		{T, true, SIGTERM, refused},
		{T, true, SIGPOLICY, refused},
		{T, true, SIGTRUST, refused},
	} {
		m := Mask(0)
		if tc.masked {
			m = full
		}
		effect, state, err := Deliver(tc.state, m, tc.s)
		if tc.want.err {
			if err == nil || !errors.Is(err, ErrTerminated) || state != tc.state || effect != "" {
				t.Errorf("Deliver(%s, masked=%v, %s) = %q, %q, %v: want ErrTerminated", tc.state, tc.masked, tc.s, effect, state, err)
			}
			continue
		}
		if err != nil || effect != tc.want.effect || state != tc.want.state {
			t.Errorf("Deliver(%s, masked=%v, %s) = %q, %q, %v; want %q, %q", tc.state, tc.masked, tc.s, effect, state, err, tc.want.effect, tc.want.state)
		}
		// Masking only s itself gives the same answer as the full mask.
		if tc.masked && tc.s.Maskable() {
			only, _ := Mask(0).With(tc.s)
			if e2, s2, err := Deliver(tc.state, only, tc.s); e2 != effect || s2 != state || err != nil {
				t.Errorf("Deliver(%s, {%s}, %s) = %q, %q, %v; the full mask gave %q, %q", tc.state, tc.s, tc.s, e2, s2, err, effect, state)
			}
		}
	}
}

func TestAgentOS_SignalDeliveryRefusesUnknown(t *testing.T) {
	for _, tc := range []struct {
		state AgentState
		mask  Mask
		s     Signal
	}{
		{"paused", 0, SIGSTOP},
		{"", 0, SIGSTOP},
		{Running, 0, Signal(6)},
		{Running, 0, Signal(0)},
		{Running, 1 << SIGKILL, SIGKILL},
		{Running, 1 << 15, SIGSTOP},
	} {
		effect, state, err := Deliver(tc.state, tc.mask, tc.s)
		if err == nil || !errors.Is(err, ErrInvalid) || state != tc.state || effect != "" {
			t.Errorf("Deliver(%q, %#x, %d) = %q, %q, %v: want ErrInvalid, nothing changed", tc.state, uint16(tc.mask), int(tc.s), effect, state, err)
		}
	}
}

func TestAgentOS_SignalText(t *testing.T) {
	for _, s := range All() {
		b, err := s.MarshalText()
		var back Signal
		if err != nil || back.UnmarshalText(b) != nil || back != s {
			t.Errorf("%s: text round trip %q, %v, %v", s, b, err, back)
		}
	}
	var s Signal
	if s.UnmarshalText([]byte("stop")) == nil {
		t.Error(`UnmarshalText("stop") accepted: the text form is the canonical name only`)
	}
	if _, err := Signal(6).MarshalText(); err == nil {
		t.Error("MarshalText(6) accepted")
	}
}
