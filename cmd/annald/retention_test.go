package main

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/annal-dev/annal/api"
)

// §14.7 through annald: --delta-retention sets how long a delta's changes
// are kept; the delta is logged with retain_until its time plus that.
func TestSpec004_14_7_DeltaRetentionFlag(t *testing.T) {
	d := startDaemon(t, t.TempDir(), "--delta-retention", "90m")
	ctx := context.Background()
	_, cred := gateAgent(t, d, []api.Grant{{Pattern: "sessions/**", Actions: []string{"mutate"}}}, nil)
	root, agent := d.client(t, d.rootCredential(t)), d.client(t, cred)
	if _, err := root.CreateSession(ctx, api.SessionRequest{ID: "kept"}); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		c interface {
			ChangeSession(context.Context, string, api.SessionChangeRequest) (*api.Controlled, error)
		}
		req api.SessionChangeRequest
	}{{root, api.SessionChangeRequest{Op: "state", State: "HANDSHAKING"}}, {agent, api.SessionChangeRequest{Op: "join"}}, {root, api.SessionChangeRequest{Op: "state", State: "ACTIVE"}}}
	for _, s := range steps {
		if _, err := s.c.ChangeSession(ctx, "kept", s.req); err != nil {
			t.Fatalf("%+v: %v", s.req, err)
		}
	}
	rc, err := agent.AppendDelta(ctx, "kept", api.DeltaRequest{TurnID: "t1", Changes: []api.Change{{Path: "a", Operation: "create", ContentHash: "sha256:" + string(make64('1'))}}})
	if err != nil {
		t.Fatal(err)
	}
	ev := eventAt(t, root, rc.Receipt.Index)
	if ev.Delta == nil || ev.Delta.Sealed == nil || ev.Delta.Changes != nil {
		t.Fatalf("logged delta %+v", ev.Delta)
	}
	until, err := ev.Delta.Sealed.RetainUntilTime()
	if err != nil || !until.Equal(ev.Time.Time.Add(90*time.Minute)) {
		t.Fatalf("retain_until %s for a delta at %s with --delta-retention 90m", ev.Delta.Sealed.RetainUntil, ev.Time)
	}
	// While kept, the chain answers the changes.
	raw, err := agent.Deltas(ctx, "kept")
	if err != nil {
		t.Fatal(err)
	}
	var chain []struct {
		Delta struct {
			Changes []api.Change `json:"changes"`
		} `json:"delta"`
	}
	if err := json.Unmarshal(raw, &chain); err != nil || len(chain) != 1 || len(chain[0].Delta.Changes) != 1 {
		t.Fatalf("the chain %s (%v)", raw, err)
	}
}

func make64(c byte) []byte {
	b := make([]byte, 64)
	for i := range b {
		b[i] = c
	}
	return b
}
