package client_test

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/annal-dev/annal/api"
	"github.com/annal-dev/annal/client"
	"github.com/annal-dev/annal/internal/klogtest"
	"github.com/annal-dev/annal/kernel"
	"github.com/annal-dev/annal/server"
	"github.com/annal-dev/annal/verifier"
)

// Tessera's klog lines stay out of the examples' test output.
func TestMain(m *testing.M) { klogtest.Main(m) }

// Root, a human, creates an agent and the envelope it acts under; the agent
// records an action and reads its receipt, given once the event is durably
// in the log.
func Example() {
	url, rootCredential, stop := exampleKernel() // your annald: http://127.0.0.1:7420, annal-data/root.credential
	defer stop()
	ctx := context.Background()

	root, err := client.New(url, rootCredential)
	if err != nil {
		log.Fatal(err)
	}
	trust := 0.8 // Ring 2: may create and mutate
	agent, err := root.CreateAgent(ctx, api.AgentRequest{
		Name: "scribe", Purpose: "keeps meeting notes", Energy: 1000, Trust: &trust,
		Grants: []api.Grant{{Pattern: "workspace/**", Actions: []string{"create", "mutate"}}},
	})
	if err != nil {
		log.Fatal(err)
	}
	_, err = root.IssueEnvelope(ctx, api.EnvelopeRequest{
		Holder: agent.ID, Budget: 500,
		Grants: []api.Grant{{Pattern: "workspace/**", Actions: []string{"mutate"}}},
	})
	if err != nil {
		log.Fatal(err)
	}

	// The agent's credential is in agent.Credential, shown this once.
	scribe, err := client.New(url, agent.Credential)
	if err != nil {
		log.Fatal(err)
	}
	receipt, err := scribe.Submit(ctx, api.ActionRequest{
		Type: "mutate", Target: "workspace/notes.md",
		Payload: json.RawMessage(`{"content_oid":"sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"}`),
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(receipt.Status, receipt.Type, receipt.Target)
	fmt.Println("by the agent:", receipt.Actor == agent.ID)
	fmt.Println("cost:", receipt.Cost, "of the envelope's 500")
	// Output:
	// committed mutate workspace/notes.md
	// by the agent: true
	// cost: 15 of the envelope's 500
}

// An action its envelope holds for a human is not done: the answer is the
// hold request. The agent waits for a human to answer it.
func ExampleClient_WaitHold() {
	url, rootCredential, stop := exampleKernel()
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	scribe, err := client.New(url, exampleAgent(url, rootCredential))
	if err != nil {
		log.Fatal(err)
	}
	held, err := scribe.Submit(ctx, api.ActionRequest{Type: "mutate", Target: "workspace/release/v1"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(held.Status)

	// Meanwhile a human answers (here root; or in the console, or with annal holds approve).
	answered := make(chan error, 1)
	go func() {
		root, err := client.New(url, rootCredential)
		if err == nil {
			_, err = root.AnswerHold(ctx, held.HoldID, "approve", "release checked")
		}
		answered <- err
	}()

	hold, err := scribe.WaitHold(ctx, held.HoldID, 50*time.Millisecond)
	if err != nil {
		log.Fatal(err)
	}
	// The wait can end before the human's own answer has arrived back.
	if err := <-answered; err != nil {
		log.Fatal(err)
	}
	fmt.Println(hold.Status, "by", hold.AnsweredBy+":", hold.Reason)
	// Output:
	// held
	// approved by root: release checked
}

// A receipt is a promise; the proof that the event is in the log comes once
// a signed checkpoint covers it (SubmitAndWait gets both in one answer).
// Anyone checks it offline with the verifier package, as annal-verify does.
func ExampleClient_WaitProof() {
	url, rootCredential, stop := exampleKernel()
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	scribe, err := client.New(url, exampleAgent(url, rootCredential))
	if err != nil {
		log.Fatal(err)
	}
	receipt, err := scribe.Submit(ctx, api.ActionRequest{Type: "mutate", Target: "workspace/notes.md"})
	if err != nil {
		log.Fatal(err)
	}
	entry, err := scribe.Event(ctx, receipt.Index) // the entry's exact bytes
	if err != nil {
		log.Fatal(err)
	}
	proof, err := scribe.WaitProof(ctx, receipt.Index) // c2sp.org/tlog-proof
	if err != nil {
		log.Fatal(err)
	}

	// The log's verifier key: an auditor takes it from annal-data/log.pub,
	// not from the kernel it checks.
	info, err := scribe.Info(ctx)
	if err != nil {
		log.Fatal(err)
	}
	result, err := verifier.VerifyProof(entry, proof, info.VerifierKey)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("OK:", result.Event.Type, result.Event.Target)
	fmt.Println("at the receipt's index:", result.Index == receipt.Index)
	fmt.Println("with the receipt's leaf hash:", hex.EncodeToString(result.LeafHash[:]) == receipt.LeafHash)
	// Output:
	// OK: mutate workspace/notes.md
	// at the receipt's index: true
	// with the receipt's leaf hash: true
}

// exampleKernel opens a kernel on a new temporary data folder and serves its
// API on a loopback port, as annald serve does, for an example to talk to.
// It returns the URL, root's credential, and a function that stops it all.
func exampleKernel() (url, rootCredential string, stop func()) {
	dir, err := os.MkdirTemp("", "annal-example")
	if err != nil {
		log.Fatal(err)
	}
	cfg := kernel.DefaultConfig(dir)
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg.CheckpointInterval = 100 * time.Millisecond
	k, err := kernel.Open(cfg)
	if err != nil {
		log.Fatal(err)
	}
	srv := httptest.NewServer(server.New(k, cfg.Logger))
	credential, err := os.ReadFile(k.RootCredentialPath())
	if err != nil {
		log.Fatal(err)
	}
	return srv.URL, strings.TrimSpace(string(credential)), func() {
		srv.Close()
		k.Close()
		os.RemoveAll(dir)
	}
}

// exampleAgent has root create the agent scribe with an envelope to mutate
// under workspace/, where a release (workspace/release/*) waits for a
// human, and returns the agent's credential.
func exampleAgent(url, rootCredential string) string {
	ctx := context.Background()
	root, err := client.New(url, rootCredential)
	if err != nil {
		log.Fatal(err)
	}
	trust := 0.8
	agent, err := root.CreateAgent(ctx, api.AgentRequest{
		Name: "scribe", Purpose: "keeps meeting notes", Energy: 1000, Trust: &trust,
		Grants: []api.Grant{{Pattern: "workspace/**", Actions: []string{"create", "mutate"}}},
	})
	if err != nil {
		log.Fatal(err)
	}
	_, err = root.IssueEnvelope(ctx, api.EnvelopeRequest{
		Holder: agent.ID, Budget: 500,
		Grants: []api.Grant{{Pattern: "workspace/**", Actions: []string{"mutate"}}},
		HoldOn: []api.Grant{{Pattern: "workspace/release/*", Actions: []string{"mutate"}}},
	})
	if err != nil {
		log.Fatal(err)
	}
	return agent.Credential
}
