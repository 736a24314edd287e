package matrixbridge

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"maunium.net/go/mautrix/id"

	"github.com/annal-dev/annal/api"
	"github.com/annal-dev/annal/kernel"
	"github.com/annal-dev/annal/matrixbridge/matrixtest"
	"github.com/annal-dev/annal/witness"
	"github.com/annal-dev/annal/witness/witnesstest"
)

// witnessedAnnald is annald whose witness policy names one real
// (in-process) witness; knowsLog says whether the witness was told of the
// log (else it refuses every checkpoint).
func witnessedAnnald(t *testing.T, knowsLog bool) (*annald, *witnesstest.Witness, string) {
	t.Helper()
	dir := t.TempDir()
	// Open once to make the log's keys, which the witness must know.
	first := startAnnaldIn(t, dir, nil)
	origin, logKey := first.k.Origin(), first.k.VerifierKey()
	first.stop()
	w := witnesstest.Start(t, "witness.test/w1", nil)
	if knowsLog {
		if err := w.Store.AddLog(witness.LogConfig{Origin: origin, Keys: []string{logKey}}); err != nil {
			t.Fatal(err)
		}
	}
	policy := fmt.Sprintf("log %s\nwitness w1 %s %s\nquorum w1\n", logKey, w.VerifierKey, w.Server.URL)
	a := startAnnaldIn(t, dir, func(c *kernel.Config) {
		c.WitnessPolicy = []byte(policy)
		c.WitnessTimeout = 5 * time.Second
	})
	return a, w, dir
}

// TestSpec000_5_1_WitnessAlertsInTheRoom: the room is told, as alerts, when
// a witness of the log's policy refuses its checkpoints (and so no proof
// can be published), and when a witness holds evidence that the log showed
// two different trees of the same size.
func TestSpec000_5_1_WitnessAlertsInTheRoom(t *testing.T) {
	hs := matrixtest.Need(t)
	t.Run("a witness refuses the log", func(t *testing.T) {
		a, w, _ := witnessedAnnald(t, false)
		o := a.overseen(t)
		if _, err := o.agentC.Submit(context.Background(), api.ActionRequest{Type: "mutate", Target: "workspace/a.md", Payload: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
		bot, aliceMx := register(t, hs, "annal-bot"), register(t, hs, "alice")
		r := matrixtest.NewRoom(t, aliceMx, bot.UserID)
		startBridge(t, hs, bot, r, a.url, a.cred, map[id.UserID]string{aliceMx.UserID: o.human.Credential})
		r.WaitPost(t, "ALERT: a witness refuses this log's checkpoints", w.Server.URL)
	})
	t.Run("a witness holds equivocation evidence", func(t *testing.T) {
		a, w, dir := witnessedAnnald(t, true)
		o := a.overseen(t)
		rc, err := o.agentC.Submit(context.Background(), api.ActionRequest{Type: "mutate", Target: "workspace/a.md", Payload: []byte(`{}`)})
		if err != nil {
			t.Fatal(err)
		}
		waitCosigned(t, a, rc.Index)
		forkAtWitness(t, a, dir, w)
		bot, aliceMx := register(t, hs, "annal-bot"), register(t, hs, "alice")
		r := matrixtest.NewRoom(t, aliceMx, bot.UserID)
		startBridge(t, hs, bot, r, a.url, a.cred, map[id.UserID]string{aliceMx.UserID: o.human.Credential})
		r.WaitPost(t, "ALERT: EQUIVOCATION: witness w1", a.k.Origin(), w.Server.URL+"/evidence/")
	})
}

// waitCosigned waits until a checkpoint the witness cosigned covers index.
func waitCosigned(t *testing.T, a *annald, index uint64) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		cp, err := a.k.LatestCheckpoint(context.Background())
		if err == nil && cp.Size > index {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no cosigned checkpoint covers %d", index)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// forkAtWitness has the log show the witness a second tree of the size
// it last cosigned (witnesstest.OfferFork, with the log's own key).
func forkAtWitness(t *testing.T, a *annald, dataDir string, w *witnesstest.Witness) {
	t.Helper()
	cp, err := a.k.LatestCheckpoint(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	skey, err := os.ReadFile(filepath.Join(dataDir, "log.key"))
	if err != nil {
		t.Fatal(err)
	}
	w.OfferFork(t, string(skey), a.k.Origin(), cp.Size)
}
