package server

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/annal-dev/annal/api"
	"github.com/annal-dev/annal/client"
)

// BenchmarkSignedActions compares one agent's sequential actions signed,
// unsigned and sealed, on one kernel, in the same run: the cost of signing
// in the client and of checking in the kernel (the fold checks again), and
// of sealing a payload (encrypting it and writing it durably beside the
// log before the decision). The modes alternate, three rounds each
// (unsigned, signed, sealed, unsigned, …), so that none runs on a larger
// log than the others: read them by round.
//
//	go test ./server -run '^$' -bench SignedActions -benchtime 1000x
func BenchmarkSignedActions(b *testing.B) {
	ts := newTestServer(b, benchKernel)
	// One agent per mode for every run: b.Run calls its function several
	// times, and each new agent takes energy from root.
	signed, _, _, _ := signedAgentTB(b, ts)
	_, unsigned, _, _ := signedAgentTB(b, ts)
	clients := map[string]*client.Client{"unsigned": unsigned, "signed": signed, "sealed": unsigned}
	for round := range 3 {
		for _, mode := range []string{"unsigned", "signed", "sealed"} {
			b.Run(mode, func(b *testing.B) {
				ctx := context.Background()
				b.ResetTimer()
				for i := range b.N {
					req := api.ActionRequest{Type: "create", Target: fmt.Sprintf("workspace/%s/%d/%d", mode, round, i), Payload: json.RawMessage(`{"note":"call back"}`)}
					if mode == "sealed" {
						req.Subject = fmt.Sprintf("customer-%d", i%100)
					}
					if _, err := clients[mode].Submit(ctx, req); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "actions/s")
			})
		}
	}
}
