package server

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/annal-dev/annal/api"
	"github.com/annal-dev/annal/client"
	"github.com/annal-dev/annal/kernel"
	"github.com/annal-dev/annal/kernel/event"
	"github.com/annal-dev/annal/verifier"
)

func newSigningKey(t testing.TB, name string) (skey, vkey string) {
	t.Helper()
	skey, vkey, err := note.GenerateKey(rand.Reader, name)
	if err != nil {
		t.Fatal(err)
	}
	return skey, vkey
}

// signedAgent creates an agent with a signing key, granted workspace/,
// and returns its signing and unsigned clients.
func signedAgent(t *testing.T, ts *testServer, require bool) (signed, unsigned *client.Client, agent string, skey string) {
	signed, unsigned, agent, skey, _ = signedAgentCred(t, ts, require)
	return
}

func signedAgentTB(t testing.TB, ts *testServer) (signed, unsigned *client.Client, agent, skey string) {
	signed, unsigned, agent, skey, _ = signedAgentCred(t, ts, false)
	return
}

func signedAgentCred(t testing.TB, ts *testServer, require bool) (signed, unsigned *client.Client, agent, skey, cred string) {
	t.Helper()
	ctx := context.Background()
	skey, vkey := newSigningKey(t, "agent-key")
	trust := 0.9
	a, err := ts.root.CreateAgent(ctx, api.AgentRequest{Name: "signer", Purpose: "signs", Energy: 100000, Trust: &trust,
		Grants: []api.Grant{{Pattern: "workspace/**", Actions: []string{"create", "mutate", "observe"}}}, SigningKey: vkey, RequireSigned: require})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ts.root.IssueEnvelope(ctx, api.EnvelopeRequest{Holder: a.ID, Budget: 100000,
		Grants: []api.Grant{{Pattern: "workspace/**", Actions: []string{"create", "mutate", "observe"}}}}); err != nil {
		t.Fatal(err)
	}
	unsigned, err = client.New(ts.srv.URL, a.Credential)
	if err != nil {
		t.Fatal(err)
	}
	signed, err = client.New(ts.srv.URL, a.Credential)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := signed.WithSigningKey(skey); err != nil {
		t.Fatal(err)
	}
	return signed, unsigned, a.ID, skey, a.Credential
}

// signHeader signs a request as the client would, with a chosen nonce.
func signHeader(t *testing.T, s note.Signer, origin, by, nonce, method, path, body string) string {
	t.Helper()
	at := time.Now().UTC().Format(time.RFC3339Nano)
	stmt, err := client.SignedStatement(origin, by, nonce, at, method, path, []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	sig, err := s.Sign(stmt)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("key=%08x, nonce=%s, time=%s, sig=%s", s.KeyHash(), nonce, at, base64.StdEncoding.EncodeToString(sig))
}

func logSize(t *testing.T, ts *testServer) uint64 {
	t.Helper()
	info, err := ts.k.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return info.Size
}

func eventAt(t *testing.T, c *client.Client, index uint64) *event.Event {
	t.Helper()
	raw, err := c.Event(context.Background(), index)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := event.Parse(raw)
	if err != nil {
		t.Fatalf("entry %d: %v", index, err)
	}
	return ev
}

func wantStatus(t *testing.T, err error, status int, contains string) {
	t.Helper()
	var e *client.Error
	if !errors.As(err, &e) || e.Status != status || !strings.Contains(e.Message, contains) {
		t.Fatalf("error %v, want %d naming %q", err, status, contains)
	}
}

func TestSignedRequests_SignatureLoggedAndChecked(t *testing.T) {
	ctx := context.Background()
	ts := newTestServer(t)
	signed, unsigned, agent, _ := signedAgent(t, ts, false)

	rc, err := signed.Submit(ctx, api.ActionRequest{Type: "create", Target: "workspace/a.md", Payload: json.RawMessage(`{"b": 2, "a": 1}`)})
	if err != nil {
		t.Fatal(err)
	}
	// The kernel picked the envelope (the request named none): the event
	// carries the request as signed.
	ev := eventAt(t, ts.root, rc.Index)
	if ev.Signed == nil || ev.Signed.By != agent || !strings.Contains(string(ev.Signed.Request), `"payload":{"a":1,"b":2}`) {
		t.Fatalf("signed action logged as %+v, want signed by %s with its request", ev.Signed, agent)
	}
	// Naming the envelope, the action alone gives the request back: the
	// event does not carry it twice.
	rc, err = signed.Submit(ctx, api.ActionRequest{Type: "create", Target: "workspace/c.md", Envelope: rc.Envelope, Payload: json.RawMessage(`{"c":3}`)})
	if err != nil {
		t.Fatal(err)
	}
	if ev := eventAt(t, ts.root, rc.Index); ev.Signed == nil || ev.Signed.Request != nil {
		t.Fatalf("signed action naming its envelope logged as %+v, want the request left out", ev.Signed)
	}
	// Unsigned requests of an actor that does not require signatures pass.
	rc2, err := unsigned.Submit(ctx, api.ActionRequest{Type: "create", Target: "workspace/b.md"})
	if err != nil {
		t.Fatal(err)
	}
	if ev := eventAt(t, ts.root, rc2.Index); ev.Signed != nil {
		t.Fatalf("unsigned request logged with a signature %+v", ev.Signed)
	}
	// The offline verifier, which shares no code with the kernel or the
	// client, checks both signatures again from an audit bundle.
	if _, err := ts.root.WaitProof(ctx, rc2.Index); err != nil {
		t.Fatal(err)
	}
	body, err := ts.root.Bundle(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer body.Close()
	res, err := verifier.VerifyBundle(body, mustKeyPolicy(t, ts), nil)
	if err != nil {
		t.Fatal(err)
	}
	if c := res.Signatures[agent]; c == nil || c.Signed != 2 || c.Unsigned != 1 {
		t.Fatalf("bundle signatures of %s: %+v, want 2 signed, 1 unsigned", agent, c)
	}
}

func mustKeyPolicy(t *testing.T, ts *testServer) *verifier.Policy {
	t.Helper()
	p, err := verifier.KeyPolicy(ts.k.VerifierKey())
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// signedRaw sends one request with a given signature header.
func signedRaw(t *testing.T, ts *testServer, cred, header, path, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, ts.srv.URL+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+cred)
	req.Header.Set(api.SignatureHeader, header)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var e api.Error
	_ = json.NewDecoder(resp.Body).Decode(&e)
	return resp.StatusCode, e.Error
}

func TestSignedRequests_ReplayAlterationAndForgeryRefused(t *testing.T) {
	ctx := context.Background()
	ts := newTestServer(t)
	_, _, agent, skey, cred := signedAgentCred(t, ts, true)
	info, err := ts.root.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	signer, _ := note.NewSigner(skey)
	body := `{"type":"create","target":"workspace/r.md","payload":{"x":1}}`
	header := signHeader(t, signer, info.Origin, agent, "nonce-0123456789abcdef", "POST", "/v1/actions", body)

	before := logSize(t, ts)
	if status, msg := signedRaw(t, ts, cred, header, "/v1/actions", body); status != http.StatusOK {
		t.Fatalf("signed request: %d %s", status, msg)
	}
	// The same signed request again: the nonce was used.
	status, msg := signedRaw(t, ts, cred, header, "/v1/actions", body)
	if status != http.StatusConflict || !strings.Contains(msg, "already used") {
		t.Fatalf("replay: %d %s", status, msg)
	}
	// The signature over another body: refused.
	altered := strings.Replace(body, `"x":1`, `"x":2`, 1)
	header2 := signHeader(t, signer, info.Origin, agent, "nonce-fedcba9876543210", "POST", "/v1/actions", body)
	if status, msg := signedRaw(t, ts, cred, header2, "/v1/actions", altered); status != http.StatusUnauthorized || !strings.Contains(msg, "does not verify") {
		t.Fatalf("altered body: %d %s", status, msg)
	}
	// Signed for another log.
	header3 := signHeader(t, signer, "other.example/log", agent, "nonce-aaaaaaaaaaaaaaaa", "POST", "/v1/actions", body)
	if status, msg := signedRaw(t, ts, cred, header3, "/v1/actions", strings.Replace(body, "r.md", "s.md", 1)); status != http.StatusUnauthorized {
		t.Fatalf("another log's signature: %d %s", status, msg)
	}
	// By another key.
	otherKey, _ := newSigningKey(t, "other")
	other, _ := note.NewSigner(otherKey)
	header4 := signHeader(t, other, info.Origin, agent, "nonce-bbbbbbbbbbbbbbbb", "POST", "/v1/actions", body)
	if status, msg := signedRaw(t, ts, cred, header4, "/v1/actions", body); status != http.StatusUnauthorized || !strings.Contains(msg, "signing key is") {
		t.Fatalf("another key: %d %s", status, msg)
	}
	// Unsigned, from an actor that requires signatures.
	unsigned, _ := client.New(ts.srv.URL, cred)
	_, err = unsigned.Submit(ctx, api.ActionRequest{Type: "create", Target: "workspace/u.md"})
	wantStatus(t, err, http.StatusUnauthorized, "requires signed requests")
	if got := logSize(t, ts); got != before+1 {
		t.Fatalf("log grew by %d, want 1 (the one good request)", got-before)
	}
	// A malformed header changes nothing either.
	if status, _ := signedRaw(t, ts, cred, "key=zz", "/v1/actions", body); status != http.StatusBadRequest {
		t.Fatalf("malformed header: %d", status)
	}
}

func TestSignedRequests_RotationAndRevocation(t *testing.T) {
	ctx := context.Background()
	ts := newTestServer(t)
	signed, unsigned, agent, _, cred := signedAgentCred(t, ts, false)
	// Without its key's signature, the agent cannot replace its key.
	newSkey, newVkey := newSigningKey(t, "agent-key-2")
	_, err := unsigned.SetSigningKey(ctx, agent, api.SigningKeyRequest{Key: newVkey})
	wantStatus(t, err, http.StatusUnauthorized, "changing it takes a request signed with it")
	// With it, it can, and the old key signs nothing from then on.
	if _, err := signed.SetSigningKey(ctx, agent, api.SigningKeyRequest{Key: newVkey, RequireSigned: true}); err != nil {
		t.Fatal(err)
	}
	_, err = signed.Submit(ctx, api.ActionRequest{Type: "create", Target: "workspace/old-key.md"})
	wantStatus(t, err, http.StatusUnauthorized, "rotated or revoked")
	rotated, _ := client.New(ts.srv.URL, cred)
	if _, err := rotated.WithSigningKey(newSkey); err != nil {
		t.Fatal(err)
	}
	if _, err := rotated.Submit(ctx, api.ActionRequest{Type: "create", Target: "workspace/new-key.md"}); err != nil {
		t.Fatalf("new key: %v", err)
	}
	// Root revokes it (a lost key): then the agent's unsigned requests pass.
	if _, err := ts.root.SetSigningKey(ctx, agent, api.SigningKeyRequest{Reason: "lost"}); err != nil {
		t.Fatal(err)
	}
	if _, err := unsigned.Submit(ctx, api.ActionRequest{Type: "create", Target: "workspace/after.md"}); err != nil {
		t.Fatalf("after revocation: %v", err)
	}
	// Signed human decisions: root signs a freeze.
	rootSkey, rootVkey := newSigningKey(t, "root-key")
	if _, err := ts.root.SetSigningKey(ctx, "root", api.SigningKeyRequest{Key: rootVkey}); err != nil {
		t.Fatal(err)
	}
	rootSigned, _ := client.New(ts.srv.URL, ts.rootCred)
	if _, err := rootSigned.WithSigningKey(rootSkey); err != nil {
		t.Fatal(err)
	}
	rc, err := rootSigned.SetStatus(ctx, agent, "frozen", "signed freeze")
	if err != nil {
		t.Fatal(err)
	}
	ev := eventAt(t, ts.root, rc.Index)
	if ev.Signed == nil || ev.Signed.By != "root" || !strings.Contains(string(ev.Signed.Request), `"path":"/v1/actors/`+agent+`/status"`) {
		t.Fatalf("signed freeze logged as %+v", ev.Signed)
	}
	// An audit replays the whole log from its tiles under the rules: every
	// signature, key change and nonce checked again, none broken.
	if _, err := ts.root.WaitProof(ctx, rc.Index); err != nil {
		t.Fatal(err)
	}
	src, err := kernel.RemoteLog(ts.srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	report, err := kernel.Audit(ctx, src, ts.k.VerifierKey())
	if err != nil {
		t.Fatal(err)
	}
	if report.Broken != nil || report.Folded != report.Size || report.Rules < 5 {
		t.Fatalf("audit: %+v", report)
	}
}

// A signed request that a gate refuses is recorded as a denial like any
// other: the denial records the kernel's refusal, without the request's
// payload, so it goes unsigned (the signature covers the payload). It used
// to be refused by the signature rule and never recorded.
func TestSignedRequests_DenialIsRecorded(t *testing.T) {
	ctx := context.Background()
	ts := newTestServer(t)
	signed, _, agent, _ := signedAgent(t, ts, true)
	_, err := signed.Submit(ctx, api.ActionRequest{Type: "mutate", Target: "system/config", Payload: json.RawMessage(`{"x":1}`)})
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Status != http.StatusForbidden || ce.DenialIndex == nil {
		t.Fatalf("a signed request to system/: %v, want 403 with the denial recorded", err)
	}
	ev := eventAt(t, ts.root, *ce.DenialIndex)
	if ev.Kind != event.KindActionDenied || ev.Actor != agent || ev.Signed != nil {
		t.Fatalf("the denial is logged as %+v", ev)
	}
}

// TestSignedRequests_DemotionEndsElevations: a human who signs its
// requests demotes its agent with one signed request. The elevations the
// agent's trust no longer earns end at once, recorded by the kernel (the
// kernel used to end them as the human, unsigned, which the signature rule
// refused: the demoted agent kept Ring 1 for up to an hour). Trust given
// at creation by such a human is refused before anything is created: it
// would take a second event the one signature cannot cover.
func TestSignedRequests_DemotionEndsElevations(t *testing.T) {
	ctx := context.Background()
	ts := newTestServer(t)
	skey, vkey := newSigningKey(t, "overseer-key")
	h, err := ts.root.CreateAgent(ctx, api.AgentRequest{Kind: "human", Name: "overseer", Purpose: "signs", Energy: 10000,
		Grants: []api.Grant{{Pattern: "payments/**", Actions: []string{"mutate"}}}, SigningKey: vkey, RequireSigned: true})
	if err != nil {
		t.Fatal(err)
	}
	human, err := client.New(ts.srv.URL, h.Credential)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := human.WithSigningKey(skey); err != nil {
		t.Fatal(err)
	}
	before := logSize(t, ts)
	trust := 0.9
	if _, err := human.CreateAgent(ctx, api.AgentRequest{Name: "a", Purpose: "p", Trust: &trust,
		Grants: []api.Grant{{Pattern: "payments/**", Actions: []string{"mutate"}}}}); !client.IsStatus(err, http.StatusBadRequest) {
		t.Fatalf("trust at creation by a human who must sign: %v, want 400", err)
	}
	if after := logSize(t, ts); after != before {
		t.Fatalf("the refused creation wrote %d entries", after-before)
	}
	a, err := human.CreateAgent(ctx, api.AgentRequest{Name: "a", Purpose: "p", Energy: 100,
		Grants: []api.Grant{{Pattern: "payments/**", Actions: []string{"mutate"}}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := human.AssignRing(ctx, a.ID, api.RingRequest{Trust: 0.9}); err != nil {
		t.Fatal(err)
	}
	elevated, err := human.Elevate(ctx, api.ElevationRequest{Agent: a.ID, Ring: 1, Reason: "month end"})
	if err != nil {
		t.Fatal(err)
	}
	var el struct{ ID string }
	if err := json.Unmarshal(elevated.Record, &el); err != nil || el.ID == "" {
		t.Fatalf("elevation record %s: %v", elevated.Record, err)
	}
	if _, err := human.AssignRing(ctx, a.ID, api.RingRequest{Trust: 0.7, Reason: "slipped"}); err != nil {
		t.Fatal(err)
	}
	ended := eventAt(t, ts.root, logSize(t, ts)-1)
	if ended.Kind != event.KindElevationEnded || ended.Actor != event.KernelActor || ended.ElevationEnd.End != event.EndUntrusted || ended.ElevationEnd.ID != el.ID {
		t.Fatalf("after the demotion the log ends with %+v, want the kernel ending elevation %s as untrusted", ended, el.ID)
	}
}
