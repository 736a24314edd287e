package kernel

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/annal-dev/annal/kernel/event"
	"github.com/annal-dev/annal/kernel/internal/ledger"
	"github.com/annal-dev/annal/kernel/internal/logstore"
)

// The durable fold takes the sequencer's check of an entry only for the
// index it was checked at, on the sequencing copy that still follows the
// log (seqGen): otherwise it runs the entry's rule. An entry the rule
// refuses, vouched for under the current copy at the ledger's size,
// reaches ledger.FoldChecked, which in a test binary runs the rule anyway
// and panics; vouched for under another copy, or checked at another
// index, it is refused with the rule's FoldError, and nothing changes.
func TestDurableFold_TrustsTheSequencerOnlyForItsCopyAndIndex(t *testing.T) {
	k := openTest(t, t.TempDir())
	defer k.Close()
	ev := &event.Event{V: event.Version, ID: "019a5c3e-0000-7000-8000-00000000f01d", Time: event.At(time.Now()),
		Kind: event.KindAction, Actor: "agent-nobody",
		Action:   &event.Action{Type: event.Mutate, Target: "workspace/x"},
		Decision: &event.Decision{Outcome: event.OutcomeCommitted, Cost: 15, Reserved: 15, Settled: 15}}
	k.mu.Lock()
	defer k.mu.Unlock()
	size := k.ledger.Size
	if k.seqGen == 0 {
		t.Fatal("the sequencing copy has no generation after the kernel opened")
	}
	refused := func(name string, c *logstore.CommitRequest) {
		t.Helper()
		var fe *ledger.FoldError
		if err := k.foldOne(c, size); !errors.As(err, &fe) {
			t.Errorf("%s: %v, want the rule's refusal", name, err)
		}
		if k.ledger.Size != size {
			t.Fatalf("%s: the ledger grew to %d", name, k.ledger.Size)
		}
	}
	refused("another copy", &logstore.CommitRequest{Event: ev, At: size, Checked: logstore.Checked{Gen: k.seqGen + 1}})
	refused("another index", &logstore.CommitRequest{Event: ev, At: size + 1, Checked: logstore.Checked{Gen: k.seqGen}})
	refused("not checked", &logstore.CommitRequest{Event: ev, At: size})
	vouched := func() (p any) {
		defer func() { p = recover() }()
		k.foldOne(&logstore.CommitRequest{Event: ev, At: size, Checked: logstore.Checked{Gen: k.seqGen}}, size)
		return nil
	}()
	if !strings.Contains(fmt.Sprint(vouched), "the ledgers differ") {
		t.Fatalf("vouched for under the current copy: panic %v, want FoldChecked's", vouched)
	}
	if k.ledger.Size != size {
		t.Fatalf("the vouched entry grew the ledger to %d", k.ledger.Size)
	}
}

// An entry that lands elsewhere than the sequencer checked it at moves
// seqGen before its group is folded, so that no entry of that group, nor
// any admitted before the next copy, is folded as checked.
func TestDurableFold_MisplacedWriteEndsTheTrust(t *testing.T) {
	k := openTest(t, t.TempDir())
	defer k.Close()
	k.mu.Lock()
	before, at := k.seqGen, k.ledger.Size
	k.mu.Unlock()
	k.Written([]*logstore.CommitRequest{{At: at}}, []logstore.CommitResult{{Index: at + 1}})
	k.mu.Lock()
	after := k.seqGen
	k.mu.Unlock()
	if after == before {
		t.Fatalf("seqGen stayed %d after an entry checked at %d landed at %d", after, at, at+1)
	}
}
