package sagarun

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/annal-dev/annal/api"
	"github.com/annal-dev/annal/client"
	"github.com/annal-dev/annal/kernel"
	"github.com/annal-dev/annal/kernel/saga"
	"github.com/annal-dev/annal/server"
)

// agentOf starts annald in process and returns the client of an agent.
func agentOf(t *testing.T) *client.Client {
	t.Helper()
	cfg := kernel.DefaultConfig(t.TempDir())
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg.DisableProduction = true
	k, err := kernel.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(server.New(k, cfg.Logger))
	t.Cleanup(func() { srv.Close(); k.Close() })
	raw, _ := os.ReadFile(k.RootCredentialPath())
	root, _ := client.New(srv.URL, strings.TrimSpace(string(raw)))
	trust := 0.8
	a, err := root.CreateAgent(context.Background(), api.AgentRequest{Name: "undoer", Purpose: "compensates", Energy: 1000, Trust: &trust})
	if err != nil {
		t.Fatal(err)
	}
	c, _ := client.New(srv.URL, a.Credential)
	return c
}

// §15.2 and §15.3 with an injected clock: the orchestrator compensates in
// reverse order, tries a failing compensation 1 + max_retries times and
// waits 1 s, then 2 s between attempts (linear backoff), and the saga ends
// failed, its other compensations run.
func TestSpec004_15_2_OrchestratorWaitsLinearBackoff(t *testing.T) {
	c := agentOf(t)
	ctx := context.Background()
	three := 3
	steps := []api.Step{
		{ID: "one", Action: "a", Compensation: "b", Compensate: &api.Compensate{Argv: []string{"undo-one"}}},
		{ID: "two", Action: "a", Compensation: "b", Compensate: &api.Compensate{Argv: []string{"undo-two"}}, MaxRetries: &three},
		{ID: "three", Action: "a", Compensation: "b", MaxRetries: new(int)},
	}
	if _, err := c.StartSaga(ctx, api.SagaRequest{ID: "s", Steps: steps}); err != nil {
		t.Fatal(err)
	}
	for i, st := range steps {
		end := "succeeded"
		if i == len(steps)-1 {
			end = "failed"
		}
		for _, tr := range []string{"started", end} {
			if _, err := c.ReportStep(ctx, "s", st.ID, api.StepReport{Transition: tr}); err != nil {
				t.Fatal(err)
			}
		}
	}
	var ran []string
	var slept []time.Duration
	n := uint64(100)
	o := &Orchestrator{Kernel: c,
		Run: func(_ context.Context, step string, comp *api.Compensate) (*Outcome, error) {
			ran = append(ran, comp.Argv[0])
			n += 2
			if step == "two" {
				return &Outcome{Intent: n - 1, Result: n, ExitCode: 3}, nil
			}
			return &Outcome{Intent: n - 1, Result: n}, nil
		},
		Sleep: func(_ context.Context, d time.Duration) error { slept = append(slept, d); return nil },
	}
	v, err := o.Compensate(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"undo-two", "undo-two", "undo-two", "undo-two", "undo-one"}; !slices.Equal(ran, want) {
		t.Errorf("ran %v, want %v", ran, want)
	}
	if want := []time.Duration{time.Second, 2 * time.Second, 3 * time.Second}; !slices.Equal(slept, want) {
		t.Errorf("waited %v, want %v", slept, want)
	}
	if v.State != saga.Failed || v.step("two").State != saga.StepCompensationFailed || v.step("one").State != saga.StepCompensated {
		t.Errorf("saga %s: two %s, one %s", v.State, v.step("two").State, v.step("one").State)
	}
}
