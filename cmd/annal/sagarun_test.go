package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/annal-dev/annal/api"
	"github.com/annal-dev/annal/client"
	"github.com/annal-dev/annal/internal/servicestest"
	"github.com/annal-dev/annal/kernel"
	"github.com/annal-dev/annal/kernel/event"
)

// sagaEnv is a kernel and an agent granted grants, with its client.
type sagaEnv struct {
	url   string
	k     *kernel.Kernel
	agent *client.Client
	cred  string
}

func newSagaEnv(t *testing.T, grants ...string) *sagaEnv {
	t.Helper()
	url, credFile, k := startServer(t)
	args := []string{"--server", url, "--credential-file", credFile, "agents", "create", "--name", "undoer", "--purpose", "compensates", "--trust", "0.8", "--energy", "10000"}
	issue := []string{"--server", url, "--credential-file", credFile, "envelopes", "issue", "--budget", "5000"}
	for _, g := range grants {
		args, issue = append(args, "--grant", g), append(issue, "--grant", g)
	}
	out, err := runCLI(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	var a api.Agent
	if err := json.Unmarshal([]byte(out), &a); err != nil {
		t.Fatal(err)
	}
	if _, err := runCLI(t, append(issue, "--holder", a.ID)...); err != nil {
		t.Fatal(err)
	}
	c, _ := client.New(url, a.Credential)
	return &sagaEnv{url: url, k: k, agent: c, cred: a.Credential}
}

// failInto starts saga id with steps, all but the last succeeding and the
// last failing for good: the saga compensates.
func (e *sagaEnv) failInto(t *testing.T, id string, steps []api.Step) {
	t.Helper()
	ctx := context.Background()
	if _, err := e.agent.StartSaga(ctx, api.SagaRequest{ID: id, Steps: steps}); err != nil {
		t.Fatal(err)
	}
	for i, st := range steps {
		last := "succeeded"
		if i == len(steps)-1 {
			last = "failed"
		}
		for _, tr := range []string{"started", last} {
			if _, err := e.agent.ReportStep(ctx, id, st.ID, api.StepReport{Transition: tr}); err != nil {
				t.Fatalf("%s %s: %v", st.ID, tr, err)
			}
		}
	}
}

// run runs annal sagas run as the agent; it returns stdout and the exit
// code.
func (e *sagaEnv) run(t *testing.T, args ...string) (string, int) {
	t.Helper()
	out, code, err := e.runErr(args...)
	if err != nil {
		t.Fatalf("annal sagas run: %v", err)
	}
	return out, code
}

// runErr is run, with the error annal ends with when it is not an exit
// code of its own.
func (e *sagaEnv) runErr(args ...string) (string, int, error) {
	cmd := newRootCommand()
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs(append([]string{"--server", e.url, "--credential", e.cred, "sagas", "run"}, args...))
	err := cmd.Execute()
	var exit *exitError
	if errors.As(err, &exit) {
		return out.String(), exit.code, nil
	}
	return out.String(), 0, err
}

// logged is one entry of the log.
type logged struct {
	index uint64
	ev    *event.Event
}

// sagaLog returns the saga.step entries of saga id and the execute actions,
// in log order.
func (e *sagaEnv) sagaLog(t *testing.T, id string) []logged {
	t.Helper()
	var out []logged
	info, err := e.k.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for i := uint64(0); i < info.Size; i++ {
		entry, err := e.k.Entry(context.Background(), i)
		if err != nil {
			t.Fatal(err)
		}
		ev, err := event.Parse(entry)
		if err != nil {
			t.Fatal(err)
		}
		if (ev.SagaStep != nil && ev.SagaStep.Saga == id) || (ev.Action != nil && ev.Action.Type == event.Execute) {
			out = append(out, logged{i, ev})
		}
	}
	return out
}

// describe writes an entry of sagaLog as "step transition" or "target
// phase exit".
func describe(t *testing.T, l logged) string {
	if l.ev.SagaStep != nil {
		return l.ev.SagaStep.Step + " " + l.ev.SagaStep.Transition
	}
	if l.ev.Kind == event.KindActionDenied {
		return l.ev.Action.Target + " denied"
	}
	var p map[string]any
	if err := json.Unmarshal(l.ev.Action.Payload, &p); err != nil {
		t.Fatal(err)
	}
	if p["phase"] == "intent" {
		return l.ev.Action.Target + " intent"
	}
	exit, _ := json.Marshal(p["exit_code"])
	return l.ev.Action.Target + " result " + string(exit)
}

// §15.3: the orchestrator compensates every completed step in reverse
// order: a command through annal exec and a tool call of the reference
// filesystem MCP server through the gate, each an execute in the log,
// intent then result, between the step's compensating and compensated.
func TestSpec004_15_3_CompensatesInReverseThroughExecAndGate(t *testing.T) {
	fsServer := servicestest.NPMBin(t, "mcp-server-filesystem")
	e := newSagaEnv(t, "exec/**:execute", "mcp/fs/write_file:execute")
	dir := t.TempDir()
	notes, undo := filepath.Join(dir, "notes.md"), filepath.Join(dir, "undo.log")
	if err := os.WriteFile(notes, []byte("written by the step\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	restore, _ := json.Marshal(map[string]string{"path": notes, "content": "restored\n"})
	steps := []api.Step{
		{ID: "write", Action: "write notes", Compensation: "restore notes", Compensate: &api.Compensate{Server: "fs", Tool: "write_file", Arguments: string(restore)}},
		{ID: "tag", Action: "tag", Compensation: "untag", Compensate: &api.Compensate{Argv: []string{"sh", "-c", "echo untag >> " + undo}}},
		{ID: "ship", Action: "ship", Compensation: "unship", Compensate: &api.Compensate{Argv: []string{"sh", "-c", "echo unship >> " + undo}}},
		{ID: "announce", Action: "announce", Compensation: "none", MaxRetries: new(int)},
	}
	e.failInto(t, "release-1", steps)

	out, code := e.run(t, "release-1", "--mcp", "fs="+fsServer+" "+dir)
	var v struct {
		State string `json:"state"`
	}
	if err := json.Unmarshal([]byte(out), &v); code != 0 || err != nil || v.State != "compensated" {
		t.Fatalf("exit %d, saga %s (%v)", code, out, err)
	}
	if b, _ := os.ReadFile(undo); string(b) != "unship\nuntag\n" {
		t.Errorf("the commands ran as %q; want unship then untag", b)
	}
	if b, _ := os.ReadFile(notes); string(b) != "restored\n" {
		t.Errorf("the tool call left %q", b)
	}
	var got []string
	for _, l := range e.sagaLog(t, "release-1") {
		got = append(got, describe(t, l))
	}
	want := []string{
		"write started", "write succeeded", "tag started", "tag succeeded", "ship started", "ship succeeded", "announce started", "announce failed",
		"ship compensating", "exec/sh intent", "exec/sh result 0", "ship compensated",
		"tag compensating", "exec/sh intent", "exec/sh result 0", "tag compensated",
		"write compensating", "mcp/fs/write_file intent", "mcp/fs/write_file result 0", "write compensated",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("the log:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// Running again finds nothing left to do.
	if out, code := e.run(t, "release-1"); code != 0 || !strings.Contains(out, `"compensated"`) {
		t.Errorf("a second run: exit %d %s", code, out)
	}
}

// §15.2 and §15.3: a compensation that fails is tried again up to the
// step's max_retries, attempt n+1 starting no sooner than n s after
// attempt n failed, as the log's times show; one the kernel does not allow
// is recorded and not tried again; the others still run, and the saga
// ends failed.
func TestSpec004_15_2_CompensationRetriesWaitLinearBackoff(t *testing.T) {
	e := newSagaEnv(t, "exec/sh:execute")
	two := 2
	steps := []api.Step{
		{ID: "denied", Action: "a", Compensation: "b", Compensate: &api.Compensate{Argv: []string{"true"}}}, // exec/true: not granted
		{ID: "flaky", Action: "a", Compensation: "b", Compensate: &api.Compensate{Argv: []string{"sh", "-c", "exit 3"}}, MaxRetries: &two},
		{ID: "last", Action: "a", Compensation: "b", MaxRetries: new(int)},
	}
	e.failInto(t, "release-2", steps)
	out, code := e.run(t, "release-2")
	if code != 1 || !strings.Contains(out, `"state": "failed"`) {
		t.Fatalf("exit %d, saga %s", code, out)
	}
	log := e.sagaLog(t, "release-2")
	var got []string
	var results, intents []time.Time
	for _, l := range log {
		d := describe(t, l)
		got = append(got, d)
		switch d {
		case "exec/sh intent":
			intents = append(intents, l.ev.Time.Time)
		case "exec/sh result 3":
			results = append(results, l.ev.Time.Time)
		}
	}
	want := []string{"denied started", "denied succeeded", "flaky started", "flaky succeeded", "last started", "last failed",
		"flaky compensating", "exec/sh intent", "exec/sh result 3", "exec/sh intent", "exec/sh result 3", "exec/sh intent", "exec/sh result 3",
		"flaky compensation_failed", "denied compensating", "exec/true denied", "denied compensation_failed"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("the log:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for n := 1; n < len(intents); n++ {
		if wait := intents[n].Sub(results[n-1]); wait < time.Duration(n)*time.Second {
			t.Errorf("attempt %d started %v after attempt %d failed; the backoff is %v", n+1, wait, n, time.Duration(n)*time.Second)
		}
	}
	last := log[len(log)-1].ev.SagaStep
	if !strings.Contains(last.Reason, "not run") || !strings.Contains(last.Reason, "exec/true") {
		t.Errorf("the denied compensation's reason: %q", last.Reason)
	}
}

// §15.3, driven by the log: a run picks up where the log says the saga
// is (a step already reported compensating is compensated, not reported
// again), and stops at a step whose compensation is its agent's; once the
// agent has reported it, a second run finds the saga compensated.
func TestSpec004_15_3_RunResumesFromTheLog(t *testing.T) {
	e := newSagaEnv(t, "exec/**:execute")
	steps := []api.Step{
		{ID: "manual", Action: "a", Compensation: "undone by hand"},
		{ID: "auto", Action: "a", Compensation: "b", Compensate: &api.Compensate{Argv: []string{"true"}}},
		{ID: "last", Action: "a", Compensation: "b", MaxRetries: new(int)},
	}
	e.failInto(t, "release-3", steps)
	ctx := context.Background()
	// A run that stopped after reporting auto compensating.
	if _, err := e.agent.ReportStep(ctx, "release-3", "auto", api.StepReport{Transition: "compensating"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.runErr("release-3"); err == nil || !strings.Contains(err.Error(), "step manual") || !strings.Contains(err.Error(), "agent") {
		t.Fatalf("a run reaching a step its agent compensates: %v", err)
	}
	for _, tr := range []string{"compensating", "compensated"} {
		if _, err := e.agent.ReportStep(ctx, "release-3", "manual", api.StepReport{Transition: tr}); err != nil {
			t.Fatal(err)
		}
	}
	if out, code := e.run(t, "release-3"); code != 0 || !strings.Contains(out, `"state": "compensated"`) {
		t.Fatalf("exit %d, saga %s", code, out)
	}
	var got []string
	for _, l := range e.sagaLog(t, "release-3") {
		got = append(got, describe(t, l))
	}
	want := []string{"manual started", "manual succeeded", "auto started", "auto succeeded", "last started", "last failed",
		"auto compensating", "exec/true intent", "exec/true result 0", "auto compensated", "manual compensating", "manual compensated"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("the log:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
