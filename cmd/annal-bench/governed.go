package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/annal-dev/annal/api"
	"github.com/annal-dev/annal/checkpoints"
	"github.com/annal-dev/annal/client"
	"github.com/annal-dev/annal/kernel"
	"github.com/annal-dev/annal/kernel/event"
	"github.com/annal-dev/annal/server"
)

// governedPhases measures actions by agents that pass every gate: boundary,
// envelope, hold rules (which do not match), energy. Each concurrent client
// is its own agent with its own envelope, as agents are in use. The
// baseline is the same run's ungoverned rate (root, which no envelope binds).
// governedPhases runs the governed and all-gates phases and the hold
// latencies; with goClient, also the governed phase at the largest
// concurrency through the product's client, for reference.
func governedPhases(ctx context.Context, srv *benchServer, o options, ungoverned map[int]float64, goClient bool) ([]row, error) {
	root, err := client.New(srv.url, srv.cred)
	if err != nil {
		return nil, err
	}
	most := 1
	for _, c := range o.governed {
		most = max(most, c)
	}
	agents, posters, err := benchAgents(ctx, root, srv.url, most)
	defer closePosters(posters)
	if err != nil {
		return nil, err
	}
	rows, err := agentPhases(srv, o, ungoverned, governedName, func(w, i int) error {
		return posters[w].mutate(ctx, governedTarget(w, i), i)
	})
	if err != nil {
		return nil, err
	}
	if goClient {
		r, err := goClientPhase(ctx, agents, o.duration, rateOf(rows, fmt.Sprintf(governedName, most)))
		if err != nil {
			return nil, err
		}
		rows = append(rows, r)
	}
	ctl, err := allGatesPhases(ctx, srv, root, agents, posters, o, ungoverned)
	if err != nil {
		return nil, fmt.Errorf("all gates: %w", err)
	}
	rows = append(rows, ctl...)
	holds, err := holdLatency(ctx, root, agents[0], o.holdN)
	if err != nil {
		return nil, err
	}
	return append(rows, holds...), nil
}

// governedName names a governed phase's row, by its concurrency.
const governedName = "governed actions, %d concurrent agents"

// governedTarget is agent w's target of its i-th action in the governed
// phases. They send the same payload as the ungoverned phase, so that
// their ratios are the gates' cost alone.
func governedTarget(w, i int) string {
	return "workspace/gov/" + strconv.Itoa(w) + "/" + strconv.Itoa(i)
}

// benchAgents creates n agents at Ring 2 (every gate applies, the ring's
// included), each with its envelope, and a client and a poster for each.
// The posters made are returned even with an error, to be closed.
func benchAgents(ctx context.Context, root *client.Client, url string, n int) ([]*client.Client, []*actionPoster, error) {
	writable := []api.Grant{{Pattern: "workspace/**", Actions: []string{"create", "mutate"}}, {Pattern: "sessions/**", Actions: []string{"create", "mutate"}}}
	holdOn := []api.Grant{{Pattern: "workspace/held/*", Actions: []string{"mutate"}}}
	agents := make([]*client.Client, n)
	posters := make([]*actionPoster, n)
	trust := 0.8
	for i := range agents {
		a, err := root.CreateAgent(ctx, api.AgentRequest{Name: fmt.Sprintf("bench-%d", i), Purpose: "benchmark", Energy: 1 << 32, Grants: writable, Trust: &trust})
		if err != nil {
			return nil, posters, err
		}
		if _, err := root.IssueEnvelope(ctx, api.EnvelopeRequest{Holder: a.ID, Budget: 1 << 32, Grants: writable, HoldOn: holdOn}); err != nil {
			return nil, posters, err
		}
		if agents[i], err = client.New(url, a.Credential); err != nil {
			return nil, posters, err
		}
		if posters[i], err = newActionPoster(url, a.Credential); err != nil {
			return nil, posters, err
		}
	}
	return agents, posters, nil
}

// goClientPhase runs the governed phase at len(agents) through the
// product's client, for reference against the loadconn rate viaLoadconn.
func goClientPhase(ctx context.Context, agents []*client.Client, d time.Duration, viaLoadconn float64) (row, error) {
	rate, err := closedLoop(len(agents), d, func(w int, i uint64) error {
		_, err := agents[w].Submit(ctx, api.ActionRequest{Type: "mutate", Target: governedTarget(w, int(i)), Payload: benchPayload(int(i))})
		return err
	})
	if err != nil {
		return row{}, err
	}
	note := ""
	if viaLoadconn > 0 {
		note = fmt.Sprintf("%.2fx of the same through cmd/annal-bench/loadconn", rate/viaLoadconn)
	}
	return row{fmt.Sprintf("governed actions, %d agents, each through the Go client (client/)", len(agents)), fmt.Sprintf("%.0f actions/s", rate), note}, nil
}

// holdLatency measures holds one at a time (the paper's Table 6): agent
// triggers n, root approves every other one and rejects the rest.
func holdLatency(ctx context.Context, root, agent *client.Client, n int) ([]row, error) {
	var trigger, approve, reject []time.Duration
	for i := 0; i < n; i++ {
		start := time.Now()
		r, err := agent.Submit(ctx, api.ActionRequest{Type: "mutate", Target: fmt.Sprintf("workspace/held/%d", i)})
		if err != nil {
			return nil, err
		}
		if r.Status != kernel.StatusHeld {
			return nil, fmt.Errorf("hold did not trigger: %+v", r)
		}
		trigger = append(trigger, time.Since(start))
		decision, into := "approve", &approve
		if i%2 == 1 {
			decision, into = "reject", &reject
		}
		start = time.Now()
		if _, err := root.AnswerHold(ctx, r.HoldID, decision, ""); err != nil {
			return nil, err
		}
		*into = append(*into, time.Since(start))
	}
	if len(approve) == 0 || len(reject) == 0 {
		return nil, nil
	}
	return []row{
		{"hold trigger, p50 / p99", fmtDur(percentile(trigger, 50)) + " / " + fmtDur(percentile(trigger, 99)), fmt.Sprintf("n=%d", len(trigger))},
		{"hold approve (re-runs the pipeline), p50 / p99", fmtDur(percentile(approve, 50)) + " / " + fmtDur(percentile(approve, 99)), fmt.Sprintf("n=%d", len(approve))},
		{"hold reject, p50 / p99", fmtDur(percentile(reject, 50)) + " / " + fmtDur(percentile(reject, 99)), fmt.Sprintf("n=%d", len(reject))},
	}, nil
}

// rebuildPhase writes rebuildN governed events into a fresh log, in process
// (the HTTP phases measure the front end), then times annald rebuild on it.
func rebuildPhase(ctx context.Context, dir string, o options) ([]row, error) {
	cfg := benchConfig(dir, o)
	cfg.DisableProduction = true
	k, err := kernel.Open(cfg)
	if err != nil {
		return nil, err
	}
	rootActor, err := k.Actor(kernel.RootID)
	if err != nil {
		return nil, err
	}
	const workers = 64
	agents, err := rebuildAgents(ctx, k, rootActor, workers)
	if err != nil {
		return nil, err
	}
	writeStart := time.Now()
	werr := inParallel(int64(o.rebuildN), workers, func(w int, i int64) error {
		_, err := k.Submit(ctx, agents[w], kernel.ActionRequest{Type: event.Mutate, Target: fmt.Sprintf("workspace/r/%d", i)})
		return err
	})
	writeElapsed := time.Since(writeStart)
	if err := k.Close(); err != nil {
		return nil, err
	}
	if werr != nil {
		return nil, werr
	}
	report, err := kernel.Rebuild(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if len(report.Differences) > 0 {
		return nil, fmt.Errorf("rebuild found differences: %v", report.Differences)
	}
	rows := []row{
		{fmt.Sprintf("in-process governed writes, %d agents", workers), fmt.Sprintf("%.0f actions/s", float64(o.rebuildN)/writeElapsed.Seconds()), fmt.Sprintf("%d events", o.rebuildN)},
		{fmt.Sprintf("annald rebuild of %d events", report.Size), report.Elapsed.Round(time.Millisecond).String(), fmt.Sprintf("%.0f events/s, state equal", float64(report.Size)/report.Elapsed.Seconds())},
	}
	rebuilt, err := rebuiltPhases(ctx, cfg, o, report.Size, rootActor, agents[0])
	if err != nil {
		return nil, err
	}
	return append(rows, rebuilt...), nil
}

// rebuildAgents creates n agents at Ring 2 with envelopes, for the
// rebuild phase's writes.
func rebuildAgents(ctx context.Context, k *kernel.Kernel, root *kernel.Actor, n int) ([]*kernel.Actor, error) {
	grants := []event.Grant{{Pattern: "workspace/**", Actions: []event.ActionType{event.Mutate}}}
	agents := make([]*kernel.Actor, n)
	for i := range agents {
		trust := 0.8
		na, err := k.CreateAgent(ctx, root, kernel.ActorRequest{Name: "r", Purpose: "rebuild bench", Energy: 1 << 40, Grants: grants, Trust: &trust})
		if err != nil {
			return nil, err
		}
		if _, _, err := k.IssueEnvelope(ctx, root, kernel.EnvelopeRequest{Holder: na.Actor.ID, Budget: 1 << 40, Grants: grants}); err != nil {
			return nil, err
		}
		agents[i] = na.Actor
	}
	return agents, nil
}

// inParallel runs act for i from 1 to n on workers goroutines, worker w
// taking the next i each time. A worker stops at its first error; the
// first error of all is returned once every worker has stopped.
func inParallel(n int64, workers int, act func(w int, i int64) error) error {
	var next atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1); i <= n; i = next.Add(1) {
				if err := act(w, i); err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	err, _ := firstErr.Load().(error)
	return err
}

// rebuiltPhases measure the rebuilt log of size events: a start on its
// folder (the start-up check reads the newest files only; the scrub of
// the whole log runs in the background), proofs and history pages on it,
// annald verify, and exports.
func rebuiltPhases(ctx context.Context, cfg kernel.Config, o options, size uint64, root, agent *kernel.Actor) ([]row, error) {
	openStart := time.Now()
	k, err := kernel.Open(cfg)
	if err != nil {
		return nil, err
	}
	opened := time.Since(openStart)
	proofRows, err := proofPhase(ctx, k, o.duration)
	if err != nil {
		return nil, fmt.Errorf("proofs: %w", err)
	}
	historyRows, err := historyPhase(ctx, k, root, agent)
	if err != nil {
		return nil, err
	}
	if err := k.Close(); err != nil {
		return nil, err
	}
	verifyStart := time.Now()
	if _, err := kernel.VerifyFolder(ctx, cfg.DataDir); err != nil {
		return nil, err
	}
	verified := time.Since(verifyStart)
	rows := []row{
		{fmt.Sprintf("annald start on %d events", size), opened.Round(time.Millisecond).String(), "start-up check of the newest files, state cache current"},
		{fmt.Sprintf("annald verify of %d events", size), verified.Round(time.Millisecond).String(), fmt.Sprintf("%.0f events/s, every entry and tile", float64(size)/verified.Seconds())},
	}
	rows = append(rows, proofRows...)
	rows = append(rows, historyRows...)
	exp, err := exportPhases(ctx, cfg, agent.ID)
	if err != nil {
		return nil, fmt.Errorf("export: %w", err)
	}
	return append(rows, exp...), nil
}

// allGatesPhases measures agents' actions with every execution control
// gate doing work: each agent at Ring 2 in an ACTIVE session (isolation
// checks its target), under a policy with payload patterns (no_pii), a
// registered descriptor classifying the target, declared resources checked
// against the ring, the quarantine gate and the rate limiter, beside the
// capability, envelope, hold and energy gates of the governed phase.
func allGatesPhases(ctx context.Context, srv *benchServer, root *client.Client, agents []*client.Client, posters []*actionPoster, o options, ungoverned map[int]float64) ([]row, error) {
	if _, err := root.SetDefaultPolicy(ctx, "no_pii"); err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	desc := json.RawMessage(`{"action_id":"edit","name":"edit a session file","execute_api":"/edit","reversibility":"FULL","is_read_only":false,"is_admin":false}`)
	if _, err := root.RegisterDescriptor(ctx, "edit", api.DescriptorRequest{Descriptor: desc, AppliesTo: []api.Grant{{Pattern: "sessions/**", Actions: []string{"mutate"}}}}); err != nil {
		return nil, fmt.Errorf("descriptor: %w", err)
	}
	sessions, err := joinSessions(ctx, root, agents)
	if err != nil {
		return nil, err
	}
	return agentPhases(srv, o, ungoverned, "all gates (ring, rate, quarantine, session, resources, policy), %d agents", func(w, i int) error {
		target := fmt.Sprintf("sessions/%s/%d/%d", sessions[w], w, i)
		return posters[w].submit(ctx, api.ActionRequest{Type: "mutate", Target: target, Session: sessions[w],
			Payload:   benchPayload(i),
			Resources: &api.Resources{FilesystemWrite: []string{target}, Tools: 1}})
	})
}

// joinSessions puts the agents into sessions, eight to a session, each
// agent under the no_pii policy, and makes the sessions ACTIVE once all
// have joined. It returns each agent's session.
func joinSessions(ctx context.Context, root *client.Client, agents []*client.Client) ([]string, error) {
	sessions := make([]string, len(agents))
	for i, a := range agents {
		if i%8 == 0 {
			id, err := openSession(ctx, root)
			if err != nil {
				return nil, err
			}
			sessions[i] = id
		} else {
			sessions[i] = sessions[i-1]
		}
		if _, err := a.ChangeSession(ctx, sessions[i], api.SessionChangeRequest{Op: "join"}); err != nil {
			return nil, err
		}
		if err := attachNoPII(ctx, root, a, i); err != nil {
			return nil, err
		}
	}
	for i, id := range sessions {
		if i%8 == 0 {
			if _, err := root.ChangeSession(ctx, id, api.SessionChangeRequest{Op: "state", State: "ACTIVE"}); err != nil {
				return nil, err
			}
		}
	}
	return sessions, nil
}

// openSession creates a session and brings it to HANDSHAKING, where
// agents may join it.
func openSession(ctx context.Context, root *client.Client) (string, error) {
	c, err := root.CreateSession(ctx, api.SessionRequest{})
	if err != nil {
		return "", err
	}
	var se struct {
		ID string `json:"session_id"`
	}
	if err := json.Unmarshal(c.Record, &se); err != nil || se.ID == "" {
		return "", fmt.Errorf("session record %s: %v", c.Record, err)
	}
	if _, err := root.ChangeSession(ctx, se.ID, api.SessionChangeRequest{Op: "state", State: "HANDSHAKING"}); err != nil {
		return "", err
	}
	return se.ID, nil
}

// attachNoPII attaches the no_pii policy to agent a (the i-th), found by
// its own ring view.
func attachNoPII(ctx context.Context, root, a *client.Client, i int) error {
	info, err := a.Rings(ctx)
	if err != nil {
		return err
	}
	var views []struct {
		Agent string `json:"agent"`
	}
	if err := json.Unmarshal(info, &views); err != nil || len(views) != 1 {
		return fmt.Errorf("ring view of agent %d: %v", i, err)
	}
	_, err = root.AttachPolicy(ctx, "no_pii", api.AttachRequest{Agent: views[0].Agent})
	return err
}

// rateOf reads the rate of the row named name, 0 if there is none.
func rateOf(rows []row, name string) float64 {
	for _, r := range rows {
		if r.name == name {
			var rate float64
			fmt.Sscanf(r.value, "%f", &rate)
			return rate
		}
	}
	return 0
}

// benchPayload is the payload of every phase's actions: a content id and
// a size, as an agent recording a file write would send.
func benchPayload(i int) []byte { return appendBenchPayload(nil, i) }

// appendBenchPayload appends benchPayload(i): {"content_oid":
// "sha256:<i in 64 hex digits>","bytes":i}.
func appendBenchPayload(dst []byte, i int) []byte {
	dst = append(dst, `{"content_oid":"sha256:`...)
	var hex [64]byte
	digits := strconv.AppendUint(hex[:0], uint64(i), 16)
	for range 64 - len(digits) {
		dst = append(dst, '0')
	}
	dst = append(dst, digits...)
	dst = append(dst, `","bytes":`...)
	dst = strconv.AppendInt(dst, int64(i), 10)
	return append(dst, '}')
}

// agentPhases runs, for each concurrency of o.governed, that many agents
// in a closed loop for o.duration, agent w doing its i-th action with
// submit, and reports actions/s against the ungoverned figure at the same
// concurrency. The first error ends the phase.
func agentPhases(srv *benchServer, o options, ungoverned map[int]float64, name string, submit func(w, i int) error) ([]row, error) {
	var rows []row
	for _, c := range o.governed {
		rate, cpu, err := srv.measure(func() (float64, error) {
			return closedLoop(c, o.duration, func(w int, i uint64) error { return submit(w, int(i)) })
		})
		if err != nil {
			return nil, err
		}
		note := ""
		if base := ungoverned[c]; base > 0 {
			note = fmt.Sprintf("%.2fx of ungoverned at %d", rate/base, c)
		}
		note += cpuNote(cpu, "annald")
		rows = append(rows, row{fmt.Sprintf(name, c), fmt.Sprintf("%.0f actions/s", rate), note})
	}
	return rows, nil
}

// historyPhase measures pages of the history on the rebuilt log: the
// first page of one agent's events (the actor index), the newest page of
// everything, and one agent's actions under a target prefix (index and
// filter), each 200 times.
func historyPhase(ctx context.Context, k *kernel.Kernel, root, agent *kernel.Actor) ([]row, error) {
	queries := []struct {
		name string
		q    kernel.HistoryQuery
	}{
		{"first page of one agent's events", kernel.HistoryQuery{Actor: agent.ID}},
		{"newest page of all events", kernel.HistoryQuery{}},
		{"one agent's actions under a target prefix", kernel.HistoryQuery{Actor: agent.ID, Kind: "action", TargetPrefix: "workspace/r/1"}},
	}
	var rows []row
	for _, qq := range queries {
		lat := make([]time.Duration, 0, 200)
		n := 0
		for range 200 {
			start := time.Now()
			page, err := k.History(ctx, root, qq.q)
			if err != nil {
				return nil, err
			}
			lat = append(lat, time.Since(start))
			n = len(page.Events)
		}
		rows = append(rows, row{"history: " + qq.name + ", p50 / p99", fmtDur(percentile(lat, 50)) + " / " + fmtDur(percentile(lat, 99)), fmt.Sprintf("%d events a page, in process", n)})
	}
	httpRows, err := historyOverHTTP(ctx, k, agent)
	if err != nil {
		return nil, fmt.Errorf("history over HTTP: %w", err)
	}
	return append(rows, httpRows...), nil
}

// historyOverHTTP measures GET /v1/events as a client sees it: annald's
// handler on a loopback port, root's credential, the JSON page decoded.
func historyOverHTTP(ctx context.Context, k *kernel.Kernel, agent *kernel.Actor) ([]row, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: server.New(k, slog.New(slog.NewTextHandler(io.Discard, nil)))}
	go srv.Serve(ln)
	defer srv.Close()
	cred, err := os.ReadFile(k.RootCredentialPath())
	if err != nil {
		return nil, err
	}
	c, err := client.New("http://"+ln.Addr().String(), strings.TrimSpace(string(cred)))
	if err != nil {
		return nil, err
	}
	var rows []row
	for _, qq := range []struct {
		name string
		q    url.Values
	}{
		{"first page of one agent's events", url.Values{"actor": {agent.ID}}},
		{"newest page of all events", url.Values{}},
	} {
		lat := make([]time.Duration, 0, 200)
		n := 0
		for range 200 {
			start := time.Now()
			page, err := c.History(ctx, qq.q)
			if err != nil {
				return nil, err
			}
			lat = append(lat, time.Since(start))
			n = len(page.Events)
		}
		rows = append(rows, row{"history over HTTP: " + qq.name + ", p50 / p99", fmtDur(percentile(lat, 50)) + " / " + fmtDur(percentile(lat, 99)),
			fmt.Sprintf("%d events a page, GET /v1/events on loopback, decoded", n)})
	}
	return rows, nil
}

// proofClients is the concurrency of the proof throughput phase.
const proofClients = 64

// proofPhase measures inclusion proofs of random entries of the whole log
// under its checkpoint: in process (the kernel's time, no HTTP), then GET
// /v1/proof over HTTP from proofClients clients for d. Each HTTP proof is
// parsed and must name the checkpoint.
func proofPhase(ctx context.Context, k *kernel.Kernel, d time.Duration) ([]row, error) {
	cp, err := k.LatestCheckpoint(ctx)
	for err == nil && cp.Size < 2 {
		time.Sleep(50 * time.Millisecond)
		cp, err = k.LatestCheckpoint(ctx)
	}
	if err != nil {
		return nil, err
	}
	size := cp.Size
	const inProcess = 20000
	lat := make([]time.Duration, 0, inProcess)
	for range inProcess {
		start := time.Now()
		if _, err := k.InclusionProof(ctx, rand.Uint64N(size)); err != nil {
			return nil, err
		}
		lat = append(lat, time.Since(start))
	}
	base, stop, err := serveLoopback(k, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		return nil, err
	}
	defer stop()
	clients := make([]*client.Client, proofClients)
	for i := range clients {
		if clients[i], err = client.New(base, ""); err != nil {
			return nil, err
		}
	}
	rate, err := closedLoop(proofClients, d, func(w int, _ uint64) error {
		text, err := clients[w].Proof(ctx, rand.Uint64N(size))
		if err == nil {
			_, err = checkpoints.ParseTLogProof(text)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return []row{
		{fmt.Sprintf("inclusion proof at size %d, in process, p50 / p99", size), fmtDur(percentile(lat, 50)) + " / " + fmtDur(percentile(lat, 99)), fmt.Sprintf("n=%d random entries, the kernel's time without HTTP", inProcess)},
		{fmt.Sprintf("GET /v1/proof at size %d, %d clients", size, proofClients), fmt.Sprintf("%.0f proofs/s", rate), "random entries, each parsed; client and server in one process"},
	}, nil
}
