package kernel

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/annal-dev/annal/internal/servicestest"
	"github.com/annal-dev/annal/kernel/event"
)

// A follower of a log another kernel writes answers reads from the log
// and its own folded state, as the writer does (an entry, a page of
// history, a proof, an actor by credential), and refuses every decision
// as not the writer, retryably, appending nothing.
func TestAWSStorage_FollowerServesReadsAndRefusesDecisions(t *testing.T) {
	a, dirA, k, last := awsWriterWith(t, 20)
	defer k.Close()
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	f, err := OpenFollower(ctx, awsConfig(t, copyKeys(t, dirA), a))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if !f.Following() || k.Following() {
		t.Fatal("Following is wrong")
	}
	go f.Follow(ctx, 100*time.Millisecond)
	for deadline := time.Now().Add(30 * time.Second); f.Followed().Folded <= last.Index; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the follower folded %+v of %d entries", f.Followed(), last.Index+1)
		}
	}
	if st := f.Followed(); st.Err != nil || st.At.IsZero() {
		t.Fatalf("follow state: %+v", st)
	}
	fromWriter, _ := k.Entry(ctx, last.Index)
	if e, err := f.Entry(ctx, last.Index); err != nil || string(e) != string(fromWriter) {
		t.Fatalf("the follower's entry %d: %v", last.Index, err)
	}
	froot, err := f.Authenticate(strings.TrimSpace(readFile(t, f.RootCredentialPath())))
	if err != nil {
		t.Fatal(err)
	}
	page, err := f.History(ctx, froot, HistoryQuery{Kind: "action", Limit: 50})
	if err != nil || len(page.Events) != 20 || page.Events[0].Index != last.Index {
		t.Fatalf("the follower's history: %+v %v", page, err)
	}
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if p, err := f.AwaitInclusionProof(pctx, last.Index); err != nil || p.Index != last.Index {
		t.Fatalf("the follower's proof: %v", err)
	}
	before, _ := k.Info(ctx)
	_, err = f.Submit(ctx, froot, ActionRequest{Type: event.Mutate, Target: "workspace/x"})
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), ErrNotWriter.Error()) || errors.Is(err, ErrStopped) {
		t.Fatalf("a decision at the follower: %v", err)
	}
	if after, _ := k.Info(ctx); after.Size != before.Size {
		t.Fatalf("the follower's refused decision changed the log: %d → %d", before.Size, after.Size)
	}
	if f.Ready() == nil {
		t.Fatal("a follower says it takes writes")
	}
}

// Every kernel advertises its URL; the holder of the lease is read with
// its URL, and is live only while its lease is.
func TestAWSStorage_LeadersNameTheHolderAndItsURL(t *testing.T) {
	a := servicestest.NewAWS(t)
	ctx := context.Background()
	aws := awsConfig(t, t.TempDir(), a).Storage.AWS
	leaders, err := OpenLeaders(ctx, aws)
	if err != nil {
		t.Fatal(err)
	}
	defer leaders.Close()
	for holder, url := range map[string]string{"kernel-a": "http://10.0.0.1:7420", "kernel-b": "https://b.example:7420"} {
		if err := leaders.Advertise(ctx, holder, url); err != nil {
			t.Fatal(err)
		}
	}
	if err := leaders.Advertise(ctx, "kernel-c", "ftp://x"); err == nil {
		t.Fatal("an ftp URL was advertised")
	}
	if l, err := leaders.Current(ctx); !errors.Is(err, ErrNoLease) || l.Live() {
		t.Fatalf("before any lease: %+v %v", l, err)
	}
	lease, err := OpenLease(ctx, aws, "kernel-b", time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Close()
	if err := lease.Acquire(ctx, nil); err != nil {
		t.Fatal(err)
	}
	l, err := leaders.Current(ctx)
	if err != nil || !l.Live() || l.Holder != "kernel-b" || l.URL != "https://b.example:7420" {
		t.Fatalf("the holder: %+v %v", l, err)
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if l, err := leaders.Current(ctx); err != nil || l.Live() {
		t.Fatalf("after the release: %+v %v", l, err)
	}
}
