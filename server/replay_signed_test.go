package server

import (
	"context"
	"fmt"
	"testing"

	"github.com/annal-dev/annal/api"
	"github.com/annal-dev/annal/kernel"
)

// TestSignedRequests_ReplayVerifiesSignaturesAhead: an audit and a rebuild
// of a log of signed actions verify their signatures on all cores ahead of
// the fold (the fold would verify each on one), and fold the same state.
func TestSignedRequests_ReplayVerifiesSignaturesAhead(t *testing.T) {
	ctx := context.Background()
	var dir string
	ts := newTestServer(t, func(c *kernel.Config) { dir, c.DisableRateLimit = c.DataDir, true })
	signed, _, _, _ := signedAgent(t, ts, true)
	const n = 300 // more than an entry bundle
	for i := range n {
		if _, err := signed.Submit(ctx, api.ActionRequest{Type: "create", Target: fmt.Sprintf("workspace/%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	rep, err := kernel.Audit(ctx, kernel.LocalLog(dir), ts.k.VerifierKey())
	if err != nil || rep.Broken != nil || rep.Folded != rep.Size {
		t.Fatalf("audit: %+v, %v", rep, err)
	}
	if rep.SignaturesAhead == 0 {
		t.Fatalf("the audit of %d entries verified no signature ahead", rep.Size)
	}
	if err := ts.k.Close(); err != nil {
		t.Fatal(err)
	}
	cfg := kernel.DefaultConfig(dir)
	cfg.Logger = discardLogger()
	rebuilt, err := kernel.Rebuild(ctx, cfg)
	if err != nil || len(rebuilt.Differences) > 0 {
		t.Fatalf("rebuild: %+v, %v", rebuilt, err)
	}
	if rebuilt.SignaturesAhead < n {
		t.Fatalf("the rebuild verified %d signatures ahead, want all %d", rebuilt.SignaturesAhead, n)
	}
}
