package delta

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

func TestADR0023_StateAt(t *testing.T) {
	ds := sealChain(t, kat())
	for _, tc := range []struct {
		turn string
		want map[string]string
	}{
		{"turn-1", map[string]string{"a.txt": hashA, "dir/b.txt": hashB}},
		{"turn-2", map[string]string{"a.txt": hashC, "dir/b.txt": hashB}},
		{"turn-3", map[string]string{"a.txt": hashC, "é/ü.md": hashA}},
	} {
		got, err := StateAt(ds, tc.turn)
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("StateAt(%s) = %v, %v; want %v", tc.turn, got, err, tc.want)
		}
	}
	for _, turn := range []string{"turn-4", "", "TURN-1"} {
		if _, err := StateAt(ds, turn); !errors.Is(err, ErrTurnNotFound) {
			t.Errorf("StateAt(%q) = %v, want ErrTurnNotFound", turn, err)
		}
	}
	if _, err := StateAt(nil, "turn-1"); !errors.Is(err, ErrTurnNotFound) {
		t.Errorf("StateAt(empty chain) = %v, want ErrTurnNotFound", err)
	}
	// A break after the turn asked about still makes the chain invalid.
	broken := sealChain(t, kat())
	broken[2].AgentDID = "agent-c"
	if _, err := StateAt(broken, "turn-1"); !errors.Is(err, ErrBrokenChain) {
		t.Errorf("StateAt on a chain broken after the turn = %v, want ErrBrokenChain", err)
	}
}

func TestADR0023_Rollback(t *testing.T) {
	// Five turns over four files: created, modified, deleted, re-created.
	ds := sealChain(t, []Delta{
		mk(1, Change{"keep", OpCreate, hashA}, Change{"mod", OpCreate, hashA}, Change{"del", OpCreate, hashA}),
		mk(2, Change{"mod", OpModify, hashB}, Change{"new", OpCreate, hashA}),
		mk(3, Change{"del", OpDelete, ""}, Change{"mod", OpModify, hashC}),
		mk(4, Change{"new", OpModify, hashB}, Change{"b/later", OpCreate, hashC}, Change{"a/later", OpCreate, hashC}),
		mk(5, Change{"keep", OpModify, hashB}, Change{"keep2", OpCreate, hashA}, Change{"keep2x", OpCreate, hashA}),
	})
	for _, tc := range []struct {
		turn string
		want []Change
	}{
		{"t5", []Change{}},
		{"t4", []Change{{"keep", OpModify, hashA}, {"keep2", OpDelete, ""}, {"keep2x", OpDelete, ""}}},
		{"t3", []Change{{"a/later", OpDelete, ""}, {"b/later", OpDelete, ""}, {"keep", OpModify, hashA}, {"keep2", OpDelete, ""}, {"keep2x", OpDelete, ""}, {"new", OpModify, hashA}}},
		{"t2", []Change{{"a/later", OpDelete, ""}, {"b/later", OpDelete, ""}, {"del", OpCreate, hashA}, {"keep", OpModify, hashA}, {"keep2", OpDelete, ""}, {"keep2x", OpDelete, ""}, {"mod", OpModify, hashB}, {"new", OpModify, hashA}}},
		{"t1", []Change{{"a/later", OpDelete, ""}, {"b/later", OpDelete, ""}, {"del", OpCreate, hashA}, {"keep", OpModify, hashA}, {"keep2", OpDelete, ""}, {"keep2x", OpDelete, ""}, {"mod", OpModify, hashA}, {"new", OpDelete, ""}}},
	} {
		t.Run(tc.turn, func(t *testing.T) {
			got, err := Rollback(ds, tc.turn)
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Rollback(%s) =\n %v, %v\nwant\n %v", tc.turn, got, err, tc.want)
			}
			if len(got) == 0 {
				return
			}
			// Appended as one more delta, the rollback gives the state
			// after the turn.
			c := NewChain("s")
			for _, d := range ds {
				if err := c.Append(d); err != nil {
					t.Fatal(err)
				}
			}
			back := mk(6, got...)
			back.ParentHash = c.Head()
			if err := back.Seal(); err != nil {
				t.Fatal(err)
			}
			if err := c.Append(back); err != nil {
				t.Fatalf("the rollback delta does not append: %v", err)
			}
			want, _ := StateAt(ds, tc.turn)
			if !reflect.DeepEqual(c.Files(), want) {
				t.Fatalf("after the rollback delta: %v, want %v", c.Files(), want)
			}
		})
	}
	if _, err := Rollback(ds, "t9"); !errors.Is(err, ErrTurnNotFound) {
		t.Errorf("Rollback to an unknown turn = %v", err)
	}
	ds[1].Changes[0].ContentHash = hashC
	if _, err := Rollback(ds, "t1"); !errors.Is(err, ErrBrokenChain) || !strings.Contains(err.Error(), "position 2 ") {
		t.Errorf("Rollback on a tampered chain = %v, want ErrBrokenChain at position 2", err)
	}
}

func mk(i int, changes ...Change) Delta {
	return Delta{DeltaID: fmt.Sprintf("00000000-0000-4000-8000-%012d", i), TurnID: fmt.Sprintf("t%d", i), SessionID: "s",
		AgentDID: "agent-a", Timestamp: fmt.Sprintf("2026-01-02T03:04:%02dZ", i), Changes: changes}
}
