package workload

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	mrand "math/rand/v2"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/annal-dev/annal/api"
	"github.com/annal-dev/annal/client"
	"github.com/annal-dev/annal/kernel"
)

// setup makes the first objects: two humans besides root, two agents of
// each human with envelopes, two sessions and a policy. Its requests are
// checked like every other.
func (r *runner) setup() error {
	skey, vkey, err := newKey("root")
	if err != nil {
		return err
	}
	root, err := newActor(r.n.url, kernel.RootID, "root", r.n.rootCred, true, "", skey, vkey)
	if err != nil {
		return err
	}
	r.w = &world{url: r.n.url, root: root, humans: []*actor{root}}
	wk := &worker{r: r, w: r.w, id: -1, rng: mrand.New(mrand.NewPCG(r.cfg.Seed, 0))}
	share := uint64(10_000)
	for range 2 {
		wk.create(root, api.AgentRequest{Kind: "human", Name: r.w.name("human"), Purpose: "workload", Grants: humanGrants, Energy: 1 << 30, Share: &share}, 0, false)
	}
	for _, h := range slices.Clone(r.w.humans) {
		for _, trust := range []float64{0.8, 0.9} {
			share := uint64(10)
			wk.create(h, api.AgentRequest{Name: r.w.name("agent"), Purpose: "workload", Grants: agentGrants, Energy: 1_000_000, Share: &share, Trust: &trust}, trust, true)
		}
	}
	for range 2 {
		wk.openSession(root)
	}
	if _, out := wk.ctlC("policy.set", "default no_pii", root, "policy.set",
		func(ctx context.Context, c *client.Client) (*api.Controlled, error) {
			return c.SetDefaultPolicy(ctx, "no_pii")
		}); out == "ok" {
		r.w.addPolicy("no_pii")
	}
	if len(r.w.agents) == 0 {
		return fmt.Errorf("setup made %d humans and no agent", len(r.w.humans))
	}
	return nil
}

// finish runs the checks of the end: readiness, the kernel's audit of the
// closed folder, a restart, every acknowledged answer read back, and the
// state compared with a replay of the log.
func (r *runner) finish(ctx context.Context) {
	if r.n.running() {
		if ok, body := r.ready(); !ok {
			r.failure("end.readyz", "GET /v1/readyz after the workers stopped", body)
		}
	}
	if err := r.n.stopWithin(); err != nil {
		r.failure("end.close", "close the kernel", err.Error())
	}
	r.progress("kernel closed; auditing the folder")
	r.audit(ctx)
	if r.n.wedged.Load() {
		r.failure("end.reopen", "open the kernel on its folder", "not tried: the kernel before it never closed")
		r.n.srv.Close()
		return
	}
	r.progress("opening the kernel again")
	if err := r.n.open(); err != nil {
		r.failure("end.reopen", "open the kernel on its folder", "the kernel refuses to open the folder: "+err.Error())
	} else {
		if ok, body := r.ready(); !ok {
			r.failure("end.readyz", "GET /v1/readyz after the restart", body)
		}
		r.readBack(ctx)
		if err := r.n.stopWithin(); err != nil {
			r.failure("end.close", "close the kernel after the read-back", err.Error())
		}
	}
	r.progress("replaying the log against the state")
	rb, err := kernel.Rebuild(ctx, r.n.cfg)
	switch {
	case err != nil:
		r.failure("end.replay", "rebuild the state from the log", err.Error())
	case len(rb.Differences) > 0:
		d := rb.Differences
		if len(d) > 20 {
			d = append(d[:20:20], fmt.Sprintf("and %d more", len(rb.Differences)-20))
		}
		r.failure("end.replay", "compare the state with a replay of the log", fmt.Sprintf("the state of %d entries differs from a replay of the log at %s", rb.Size, strings.Join(d, ", ")))
	}
	if err := r.n.close(); err != nil {
		r.failure("end.close", "close the server", err.Error())
	}
	// Outside a test binary (annal-bench workload) a decision the
	// sequencer kept out of the log is decided again, not a panic: it is
	// still a claim some rule misses.
	if n := r.n.refusals.Load(); n > 0 {
		r.failure("end.sequencer", "entries the sequencer kept out of the log", fmt.Sprintf("%d decisions were taken on a state an event in flight had changed: a claim some rule misses (the kernel's warnings name them)", n))
	}
}

// audit runs what annald audit --data runs on the closed folder.
func (r *runner) audit(ctx context.Context) {
	dir := r.n.cfg.DataDir
	vkey, err := kernel.LocalVerifierKey(dir)
	if err != nil {
		r.failure("end.audit", "read the verifier key", err.Error())
		return
	}
	rep, err := kernel.Audit(ctx, kernel.LocalLog(dir), vkey, kernel.WithSealedPayloads(dir), kernel.WithUnsignedTail(dir))
	if err != nil {
		r.failure("end.audit", "audit the data folder", err.Error())
		r.rep.Audit = "error: " + err.Error()
		return
	}
	r.rep.Audit = fmt.Sprintf("%d signed entries and %d past the checkpoint replayed under rules %d; %d open intents; sealed payloads: %d judged, %d without payload",
		rep.Size, rep.Unsigned, rep.Rules, len(rep.OpenIntents), rep.SealedOpened, rep.SealedClosed)
	if rep.Broken != nil {
		r.rep.Audit = "BROKEN: " + rep.Broken.String()
		r.failure("end.audit", "audit the data folder", "BROKEN: "+rep.Broken.String())
	}
	if rep.WALTornTail != "" {
		r.failure("end.audit", "audit the data folder", "torn write-ahead log tail after a clean close: "+rep.WALTornTail)
	}
}

// logged is what the read-back looks at in an event.
type logged struct {
	ID     string `json:"id"`
	Kind   string `json:"kind"`
	Actor  string `json:"actor"`
	Action *struct {
		Type   string `json:"type"`
		Target string `json:"target"`
	} `json:"action"`
	Subject *struct {
		ID string `json:"id"`
	} `json:"subject"`
}

// readBack reads the whole log through the history API and checks every
// acknowledged answer against it; a sample is read again one entry at a
// time (GET /v1/events/<index>).
func (r *runner) readBack(ctx context.Context) {
	c, err := client.New(r.n.url, r.n.rootCred)
	if err != nil {
		r.failure("end.read-back", "", err.Error())
		return
	}
	info, err := c.Info(ctx)
	if err != nil {
		r.failure("end.read-back", "GET /v1/info", err.Error())
		return
	}
	// The log grows meanwhile (energy production, hold timeouts): the
	// history is read to its end, which lies between two sizes.
	entries, ok := r.readHistory(ctx, c, info.Size)
	if !ok {
		return
	}
	after, err := c.Info(ctx)
	if err != nil {
		r.failure("end.read-back", "GET /v1/info", err.Error())
		return
	}
	r.rep.LogSize = uint64(len(entries))
	if n := uint64(len(entries)); n < info.Size || n > after.Size {
		r.failure("end.read-back", "read the history", fmt.Sprintf("the history holds %d entries, the log %d before it was read and %d after", n, info.Size, after.Size))
	}
	r.checkAcks(ctx, c, entries)
}

// readHistory reads the whole history, oldest first, from c (about size
// entries), checks that its entries come in order and hash to their leaf
// hashes, and counts their kinds in the report. ok is false when it could
// not be read to its end.
func (r *runner) readHistory(ctx context.Context, c *client.Client, size uint64) (entries [][]byte, ok bool) {
	entries = make([][]byte, 0, size)
	r.rep.LogKinds = map[string]int{}
	var cursor uint64
	for {
		page, err := c.History(ctx, url.Values{"order": {"oldest"}, "limit": {"500"}, "cursor": {strconv.FormatUint(cursor, 10)}})
		if err != nil {
			r.failure("end.read-back", fmt.Sprintf("GET /v1/events?order=oldest&cursor=%d", cursor), err.Error())
			return nil, false
		}
		for _, it := range page.Events {
			if it.Index != uint64(len(entries)) {
				r.failure("end.read-back", "read the history", fmt.Sprintf("entry %d came where entry %d was due", it.Index, len(entries)))
				return nil, false
			}
			leaf := leafHash(it.Event)
			if leaf != it.LeafHash {
				r.failure("end.read-back", "read the history", fmt.Sprintf("entry %d hashes to %s, the history says %s", it.Index, leaf, it.LeafHash))
			}
			var ev logged
			_ = json.Unmarshal(it.Event, &ev)
			r.rep.LogKinds[ev.Kind]++
			entries = append(entries, it.Event)
		}
		if page.NextCursor == nil || len(page.Events) == 0 {
			return entries, true
		}
		cursor = *page.NextCursor
	}
}

// checkAcks checks every acknowledged answer against the entry at its
// index, and one in 50 again read on its own from c.
func (r *runner) checkAcks(ctx context.Context, c *client.Client, entries [][]byte) {
	r.mu.Lock()
	acks := slices.Clone(r.acks)
	r.mu.Unlock()
	r.rep.Acks = len(acks)
	for i, a := range acks {
		if a.index >= uint64(len(entries)) {
			r.failure("end.read-back", a.op, fmt.Sprintf("acknowledged index %d is past the log's %d entries after the restart", a.index, len(entries)))
			continue
		}
		entry := entries[a.index]
		if p := a.check(entry); p != "" {
			r.failure("end.read-back", a.op, p)
		}
		// One in 50 again on its own.
		if i%50 == 0 {
			raw, err := c.Event(ctx, a.index)
			if err != nil {
				r.failure("end.read-back", fmt.Sprintf("GET /v1/events/%d", a.index), err.Error())
			} else if !bytes.Equal(raw, entry) {
				r.failure("end.read-back", fmt.Sprintf("GET /v1/events/%d", a.index), "the entry differs from the history's")
			}
		}
	}
}

// check compares an acknowledged answer with the entry at its index: the
// entry the receipt named, then what the answer was for.
func (a ack) check(entry []byte) string {
	var ev logged
	if err := json.Unmarshal(entry, &ev); err != nil {
		return fmt.Sprintf("entry %d is not JSON: %v", a.index, err)
	}
	where := fmt.Sprintf("entry %d (%s by %s)", a.index, ev.Kind, ev.Actor)
	if p := a.checkReceipt(entry, ev, where); p != "" {
		return p
	}
	return a.checkEvent(ev, where)
}

// checkReceipt compares the entry with the leaf hash and event id its
// receipt gave, where it gave them.
func (a ack) checkReceipt(entry []byte, ev logged, where string) string {
	switch {
	case a.leaf != "" && leafHash(entry) != a.leaf:
		return fmt.Sprintf("%s hashes to %s, the receipt said %s", where, leafHash(entry), a.leaf)
	case a.eventID != "" && ev.ID != a.eventID:
		return fmt.Sprintf("%s is event %s, the receipt said %s", where, ev.ID, a.eventID)
	}
	return ""
}

// checkEvent compares the event with what the answer was for, as far as
// the answer said: its kinds, its actors, its action, the subject it
// created.
func (a ack) checkEvent(ev logged, where string) string {
	switch {
	case len(a.kinds) > 0 && !slices.Contains(a.kinds, ev.Kind):
		return fmt.Sprintf("%s: the answer was for a %v", where, a.kinds)
	case len(a.actors) > 0 && !slices.Contains(a.actors, ev.Actor):
		return fmt.Sprintf("%s: the answer was for an event by %v", where, a.actors)
	case a.typ != "" && (ev.Action == nil || ev.Action.Type != a.typ || ev.Action.Target != a.target):
		return fmt.Sprintf("%s is not %s on %q, which was asked", where, a.typ, a.target)
	case a.subject != "" && (ev.Subject == nil || ev.Subject.ID != a.subject):
		return fmt.Sprintf("%s does not create %s, which the answer named", where, a.subject)
	}
	return ""
}

func leafHash(entry []byte) string {
	h := sha256.New()
	h.Write([]byte{0})
	h.Write(entry)
	return hex.EncodeToString(h.Sum(nil))
}
