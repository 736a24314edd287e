package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/annal-dev/annal/logserver/api"
)

func testOptions(t *testing.T) options {
	return options{
		dir: t.TempDir(), duration: 200 * time.Millisecond, concurrency: []int{1, 4}, sequentialN: 5, proofN: 5,
		batchSize: 256, batchAge: 10 * time.Millisecond, checkpointIv: 100 * time.Millisecond,
		governed: []int{2, 4}, holdN: 2, rebuildN: 0,
	}
}

// A poster's submit succeeds only on the action's committed receipt; a
// refusal or a hold is an error naming it.
func TestActionPoster_CommittedReceiptOnly(t *testing.T) {
	o := testOptions(t)
	_, url, cred, stop, err := startKernel(o.dir, o)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	p, err := newActionPoster(url, cred)
	if err != nil {
		t.Fatal(err)
	}
	defer p.conn.Close()
	ctx := context.Background()
	for i := range 3 {
		if err := p.submit(ctx, api.ActionRequest{Type: "mutate", Target: "workspace/poster", Payload: benchPayload(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.submit(ctx, api.ActionRequest{Type: "fly", Target: "workspace/poster"}); err == nil || !strings.Contains(err.Error(), "400") {
		t.Fatalf("invalid action: %v, want a 400 error", err)
	}
	bad, err := newActionPoster(url, "not-a-credential")
	if err != nil {
		t.Fatal(err)
	}
	defer bad.conn.Close()
	if err := bad.submit(ctx, api.ActionRequest{Type: "mutate", Target: "workspace/poster"}); err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("unknown credential: %v, want a 401 error", err)
	}
}

// The whole phase list runs on a small scale and prints each row,
// without the conformance server (which needs the module proxy) and
// the rebuild.
func TestRun_SmallScale(t *testing.T) {
	if testing.Short() {
		t.Skip("runs every phase")
	}
	var out bytes.Buffer
	if err := run(context.Background(), testOptions(t), &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	for _, want := range []string{
		"annald POST /v1/actions, 4 concurrent",
		"governed actions, 4 concurrent agents",
		"governed actions, 4 agents, each through the Go client (logserver/client)",
		"all gates (ring, rate, quarantine, session, resources, policy), 4 agents",
		"hold approve",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("no row %q in\n%s", want, out.String())
		}
	}
}
