package server

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/annal-dev/annal/api"
	"github.com/annal-dev/annal/client"
	"github.com/annal-dev/annal/kernel"
	"github.com/annal-dev/annal/kernel/event"
	"github.com/annal-dev/annal/verifier"
	"golang.org/x/mod/sumdb/note"
)

// sealedAgent creates an agent granted workspace/** with an envelope, and
// returns its client and id.
func sealedAgent(t *testing.T, ts *testServer, sealAgent, sealEnvelope bool) (*client.Client, string) {
	t.Helper()
	ctx := context.Background()
	trust := 0.9
	grants := []api.Grant{{Pattern: "workspace/**", Actions: []string{"create", "mutate", "observe", "execute"}}}
	a, err := ts.root.CreateAgent(ctx, api.AgentRequest{Name: "clerk", Purpose: "keeps customer records", Energy: 100000, Trust: &trust,
		Grants: grants, SealPayloads: sealAgent})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ts.root.IssueEnvelope(ctx, api.EnvelopeRequest{Holder: a.ID, Budget: 100000, Grants: grants, SealPayloads: sealEnvelope}); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(ts.srv.URL, a.Credential)
	if err != nil {
		t.Fatal(err)
	}
	return c, a.ID
}

// dataFolderHolds reports whether any file of the data folder holds s.
func dataFolderHolds(t *testing.T, dir, s string) []string {
	t.Helper()
	var found []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil // a temporary file the log renamed meanwhile
		}
		if err != nil || d.IsDir() {
			return err
		}
		raw, err := os.ReadFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		} else if err != nil {
			return err
		}
		if bytes.Contains(raw, []byte(s)) {
			found = append(found, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

func historyOf(t *testing.T, c *client.Client, index uint64) api.HistoryItem {
	t.Helper()
	page, err := c.History(context.Background(), url.Values{"order": {"newest"}, "limit": {"500"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range page.Events {
		if it.Index == index {
			return it
		}
	}
	t.Fatalf("entry %d is not in the history", index)
	return api.HistoryItem{}
}

func verifiedBundle(t *testing.T, ts *testServer, index uint64) (*verifier.BundleResult, []byte) {
	t.Helper()
	return verifiedBundleOf(t, ts, index, nil)
}

// verifiedBundleOf exports the bundle of query q once a checkpoint covers
// index, and verifies it under the log's key.
func verifiedBundleOf(t *testing.T, ts *testServer, index uint64, q url.Values) (*verifier.BundleResult, []byte) {
	t.Helper()
	ctx := context.Background()
	if _, err := ts.root.WaitProof(ctx, index); err != nil {
		t.Fatal(err)
	}
	body, err := ts.root.Bundle(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(body)
	body.Close()
	if err != nil {
		t.Fatal(err)
	}
	res, err := verifier.VerifyBundle(bytes.NewReader(raw), mustKeyPolicy(t, ts), nil)
	if err != nil {
		t.Fatalf("bundle %v: %v", q, err)
	}
	return res, raw
}

// TestSealedPayloadErasure: a sealed payload is out of the log and out of
// the data folder's plain bytes, readable through the history and opened
// in bundles (checked by the verifier against its commitment); erasing its
// subject makes it unreadable everywhere while every proof, the bundle and
// the audit still verify, and nothing more can be sealed under it.
func TestSealedPayloadErasure(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	ts := newTestServer(t, func(c *kernel.Config) { c.DataDir = dir })
	agent, agentID := sealedAgent(t, ts, false, false)
	const secret = "alice.liddell@example.org"
	payload := json.RawMessage(`{"note":"call back","email":"` + secret + `"}`)
	rc, err := agent.Submit(ctx, api.ActionRequest{Type: "create", Target: "workspace/crm/42.json", Payload: payload, Subject: "customer-42"})
	if err != nil {
		t.Fatal(err)
	}
	ev := eventAt(t, ts.root, rc.Index)
	if ev.Action.Payload != nil || ev.Action.Sealed == nil || ev.Action.Sealed.Subject != "customer-42" {
		t.Fatalf("sealed action logged as %+v", ev.Action)
	}
	raw, err := ts.root.Event(ctx, rc.Index)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(raw, []byte(secret)) {
		t.Fatalf("the entry holds the sealed payload: %s", raw)
	}
	// An unsealed payload of the same agent stays in the log.
	plain, err := agent.Submit(ctx, api.ActionRequest{Type: "create", Target: "workspace/crm/public.json", Payload: json.RawMessage(`{"open":true}`)})
	if err != nil {
		t.Fatal(err)
	}
	if ev := eventAt(t, ts.root, plain.Index); ev.Action.Sealed != nil || string(ev.Action.Payload) != `{"open":true}` {
		t.Fatalf("unsealed action logged as %+v", ev.Action)
	}
	if files := dataFolderHolds(t, dir, secret); len(files) > 0 {
		t.Fatalf("the data folder holds the sealed payload in plain bytes: %v", files)
	}

	// The history shows it opened; the bundle carries it opened, and the
	// verifier checks it against the commitment with its own code.
	it := historyOf(t, ts.root, rc.Index)
	if !strings.Contains(string(it.SealedPayload), secret) || it.Erased {
		t.Fatalf("history of the sealed action: payload %s, erased %v", it.SealedPayload, it.Erased)
	}
	res, bundleBytes := verifiedBundle(t, ts, plain.Index)
	if res.Sealed.Opened != 1 || res.Sealed.Closed != 0 || res.Sealed.Subjects["customer-42"] != 1 {
		t.Fatalf("bundle sealed counts %+v, want 1 opened", res.Sealed)
	}
	line := bundleLine(t, bundleBytes, rc.Index)
	var opened struct {
		Opened struct{ Payload, Salt []byte } `json:"opened"`
	}
	if err := json.Unmarshal(line, &opened); err != nil {
		t.Fatal(err)
	}
	h := sha256.Sum256(append(append([]byte(event.SealContext), opened.Opened.Salt...), opened.Opened.Payload...))
	if "sha256:"+hex.EncodeToString(h[:]) != ev.Action.Sealed.Commitment || !bytes.Contains(opened.Opened.Payload, []byte(secret)) {
		t.Fatalf("the bundle's opening does not open the commitment by the documented formula")
	}
	// Withheld on request: the proofs without the personal data.
	withheld, err := ts.root.Bundle(ctx, url.Values{"sealed": {"withhold"}})
	if err != nil {
		t.Fatal(err)
	}
	wres, err := verifier.VerifyBundle(withheld, mustKeyPolicy(t, ts), nil)
	withheld.Close()
	if err != nil || wres.Sealed.Opened != 0 || wres.Sealed.Closed != 1 {
		t.Fatalf("bundle with sealed payloads withheld: %+v, %v", wres, err)
	}
	// A bundle whose opened payload was changed fails, naming the entry.
	forged := bytes.Replace(bundleBytes, line, bytes.Replace(line,
		[]byte(base64.StdEncoding.EncodeToString(opened.Opened.Payload)),
		[]byte(base64.StdEncoding.EncodeToString(bytes.Replace(opened.Opened.Payload, []byte("call back"), []byte("call later"), 1))), 1), 1)
	_, err = verifier.VerifyBundle(bytes.NewReader(forged), mustKeyPolicy(t, ts), nil)
	var ve *verifier.Error
	if !errors.As(err, &ve) || ve.Check != verifier.CheckSealed || !strings.Contains(err.Error(), "do not open") || !strings.Contains(err.Error(), "entry "+strconv.FormatUint(rc.Index, 10)) {
		t.Fatalf("forged opening: %v, want a sealed payload failure", err)
	}

	// An audit of the data folder judges the sealed payload by every rule.
	if rep, err := kernel.Audit(ctx, kernel.LocalLog(dir), ts.k.VerifierKey(), kernel.WithSealedPayloads(dir)); err != nil || rep.Broken != nil || rep.SealedOpened != 1 || rep.SealedClosed != 0 {
		t.Fatalf("local audit before erasure: %+v, %v", rep, err)
	}

	// Only a human erases.
	if _, err := agent.EraseSubject(ctx, "customer-42", api.EraseRequest{}); !isStatus(err, http.StatusForbidden) {
		t.Fatalf("agent erasing: %v, want 403", err)
	}
	size := ts.size(t)
	erc, err := ts.root.EraseSubject(ctx, "customer-42", api.EraseRequest{Reason: "GDPR art. 17 request #881"})
	if err != nil {
		t.Fatal(err)
	}
	if erc.Index != size {
		t.Fatalf("erasure at %d, want %d", erc.Index, size)
	}
	if eev := eventAt(t, ts.root, erc.Index); eev.Kind != event.KindSubjectErased || eev.Erasure.Subject != "customer-42" || eev.Actor != "root" {
		t.Fatalf("erasure logged as %+v", eev)
	}
	if _, err := ts.root.EraseSubject(ctx, "customer-42", api.EraseRequest{}); !isStatus(err, http.StatusConflict) {
		t.Fatalf("second erasure: %v, want 409", err)
	}
	// Gone from the API, the data folder and the bundle ...
	if it := historyOf(t, ts.root, rc.Index); it.SealedPayload != nil || !it.Erased {
		t.Fatalf("history after erasure: payload %s, erased %v", it.SealedPayload, it.Erased)
	}
	if _, _, err := ts.k.OpenSealed(ev.Action.Sealed); !errors.Is(err, kernel.ErrErased) {
		t.Fatalf("OpenSealed after erasure: %v", err)
	}
	if entries, _ := os.ReadDir(filepath.Join(dir, "sealed", "keys")); len(entries) != 0 {
		t.Fatalf("sealed keys left after erasure: %v", entries)
	}
	if _, err := os.Stat(filepath.Join(dir, "sealed", "payloads", "customer-42")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the subject's payloads are still in the data folder: %v", err)
	}
	// ... while the entry, its proof, the whole log and the audit are
	// unchanged and verify.
	if again, _ := ts.root.Event(ctx, rc.Index); !bytes.Equal(again, raw) {
		t.Fatal("the entry changed with the erasure")
	}
	res, bundleBytes = verifiedBundle(t, ts, erc.Index)
	if res.Sealed.Opened != 0 || res.Sealed.Closed != 1 {
		t.Fatalf("bundle after erasure: sealed %+v, want 1 closed", res.Sealed)
	}
	if bytes.Contains(bundleBytes, []byte(`"opened"`)) || bytes.Contains(bundleBytes, []byte(base64.StdEncoding.EncodeToString(opened.Opened.Payload))) {
		t.Fatal("the bundle after erasure still carries the payload")
	}
	src, err := kernel.RemoteLog(ts.srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	report, err := kernel.Audit(ctx, src, ts.k.VerifierKey())
	if err != nil || report.Broken != nil || report.Folded != report.Size {
		t.Fatalf("audit after erasure: %+v, %v", report, err)
	}
	if rep, err := kernel.Audit(ctx, kernel.LocalLog(dir), ts.k.VerifierKey(), kernel.WithSealedPayloads(dir)); err != nil || rep.Broken != nil || rep.SealedOpened != 0 || rep.SealedClosed != 1 {
		t.Fatalf("local audit after erasure: %+v, %v", rep, err)
	}
	// Nothing more is sealed under an erased subject; the log is unchanged.
	size = ts.size(t)
	if _, err := agent.Submit(ctx, api.ActionRequest{Type: "create", Target: "workspace/crm/42b.json", Payload: payload, Subject: "customer-42"}); !isStatus(err, http.StatusConflict) {
		t.Fatalf("sealing under an erased subject: %v, want 409", err)
	}
	if got := ts.size(t); got != size {
		t.Fatalf("the refused seal changed the log: %d -> %d", size, got)
	}
	_ = agentID
}

func bundleLine(t *testing.T, bundle []byte, index uint64) []byte {
	t.Helper()
	sc := bufio.NewScanner(bytes.NewReader(bundle))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var l struct {
			Index *uint64 `json:"index"`
		}
		if json.Unmarshal(sc.Bytes(), &l) == nil && l.Index != nil && *l.Index == index {
			return append([]byte{}, sc.Bytes()...)
		}
	}
	t.Fatalf("no line of entry %d in the bundle", index)
	return nil
}

func isStatus(err error, status int) bool {
	var e *client.Error
	return errors.As(err, &e) && e.Status == status
}

// TestSealRequired: an envelope or actor that asks for sealed payloads has
// every payload sealed (under the actor's id unless the action names a
// subject), refuses what cannot be sealed, and a policy's patterns judge
// the sealed plaintext when the kernel decides.
func TestSealRequired(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	ts := newTestServer(t, func(c *kernel.Config) { c.DataDir = dir })
	agent, agentID := sealedAgent(t, ts, false, true)
	rc, err := agent.Submit(ctx, api.ActionRequest{Type: "create", Target: "workspace/a.json", Payload: json.RawMessage(`{"name":"Bob"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if ev := eventAt(t, ts.root, rc.Index); ev.Action.Sealed == nil || ev.Action.Sealed.Subject != agentID || ev.Action.Payload != nil {
		t.Fatalf("action under a sealing envelope logged as %+v", ev.Action)
	}
	size := ts.size(t)
	oid := "sha256:" + strings.Repeat("ab", 32)
	if _, err := agent.Submit(ctx, api.ActionRequest{Type: "create", Target: "workspace/b.json", PayloadHash: oid}); !isStatus(err, http.StatusBadRequest) {
		t.Fatalf("payload_hash under a sealing envelope: %v, want 400", err)
	}
	if _, err := agent.Submit(ctx, api.ActionRequest{Type: "execute", Target: "workspace/run", Payload: json.RawMessage(`{"command":"ls"}`), Seal: true}); !isStatus(err, http.StatusBadRequest) {
		t.Fatalf("sealing an execute: %v, want 400", err)
	}
	if _, err := agent.Submit(ctx, api.ActionRequest{Type: "create", Target: "workspace/c.json", Payload: json.RawMessage(`{}`), Subject: "../../etc"}); !isStatus(err, http.StatusBadRequest) {
		t.Fatalf("a subject that is a path: %v, want 400", err)
	}
	if got := ts.size(t); got != size {
		t.Fatalf("refused requests changed the log: %d -> %d", size, got)
	}

	// The actor's own flag seals too; a blocked pattern is judged on the
	// plaintext the log never sees.
	sealer, sealerID := sealedAgent(t, ts, true, false)
	if _, err := ts.root.SetPolicy(ctx, "no-ssn", json.RawMessage(`{"name":"no-ssn","blocked_patterns":["\\d{3}-\\d{2}-\\d{4}"],"signal_on_violation":false}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := ts.root.AttachPolicy(ctx, "no-ssn", api.AttachRequest{Agent: sealerID}); err != nil {
		t.Fatal(err)
	}
	if _, err := sealer.Submit(ctx, api.ActionRequest{Type: "create", Target: "workspace/p.json", Payload: json.RawMessage(`{"ssn":"123-45-6789"}`), Subject: "patient-9"}); !isStatus(err, http.StatusForbidden) {
		t.Fatalf("sealed payload matching a blocked pattern: %v, want 403", err)
	}
	// The refused payload is not kept: nothing in the log names it.
	if files, _ := os.ReadDir(filepath.Join(dir, "sealed", "payloads", "patient-9")); len(files) != 0 {
		t.Fatalf("a refused sealed payload was kept: %v", files)
	}
	ok, err := sealer.Submit(ctx, api.ActionRequest{Type: "create", Target: "workspace/p.json", Payload: json.RawMessage(`{"note":"fine"}`), Subject: "patient-9"})
	if err != nil {
		t.Fatal(err)
	}
	if ev := eventAt(t, ts.root, ok.Index); ev.Action.Sealed == nil || ev.Action.Sealed.Subject != "patient-9" {
		t.Fatalf("action of a sealing actor logged as %+v", ev.Action)
	}
	if files, _ := os.ReadDir(filepath.Join(dir, "sealed", "payloads", "patient-9")); len(files) != 1 {
		t.Fatalf("the committed sealed payload: %v, want one file", files)
	}
	if a, err := ts.root.Actor(ctx, sealerID); err != nil || !a.SealPayloads {
		t.Fatalf("actor view: %+v, %v", a, err)
	}
}

// TestSignedSealedAction: a signed request that seals its payload signs
// the commitment, so the signature is checked when the kernel decides, by
// annal-verify, and by the audit after the payload is erased; a payload
// swapped after signing is refused.
func TestSignedSealedAction(t *testing.T) {
	ctx := context.Background()
	ts := newTestServer(t)
	signed, _, agentID, skey, cred := signedAgentCred(t, ts, true)
	const secret = "+44 20 7946 0958"
	rc, err := signed.Submit(ctx, api.ActionRequest{Type: "create", Target: "workspace/contact.json",
		Payload: json.RawMessage(`{"phone":"` + secret + `"}`), Subject: "customer-7"})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := ts.root.Event(ctx, rc.Index)
	if err != nil {
		t.Fatal(err)
	}
	ev := eventAt(t, ts.root, rc.Index)
	if ev.Signed == nil || ev.Action.Sealed == nil || bytes.Contains(raw, []byte(secret)) {
		t.Fatalf("signed sealed action logged as %s", raw)
	}
	res, _ := verifiedBundle(t, ts, rc.Index)
	if c := res.Signatures[agentID]; c == nil || c.Signed != 1 || res.Sealed.Opened != 1 {
		t.Fatalf("bundle: signatures %+v, sealed %+v", c, res.Sealed)
	}

	// A payload swapped after signing: the signature covers the commitment
	// to the signed payload, not the one sent.
	info, err := ts.root.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s, err := note.NewSigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	salt := base64.StdEncoding.EncodeToString(make([]byte, 32))
	signedBody := `{"type":"create","target":"workspace/x.json","payload":{"n":1},"subject":"customer-7","salt":"` + salt + `"}`
	sentBody := strings.Replace(signedBody, `{"n":1}`, `{"n":2}`, 1)
	size := ts.size(t)
	header := signHeader(t, s, info.Origin, agentID, "swapped-payload-nonce-1", "POST", "/v1/actions", signedBody)
	if code, msg := signedRaw(t, ts, cred, header, "/v1/actions", sentBody); code < 400 || code >= 500 || !strings.Contains(msg, "signature") {
		t.Fatalf("swapped sealed payload: %d %s, want a signature refusal", code, msg)
	}
	// A signed sealing request without its salt is refused with a reason.
	noSalt := `{"type":"create","target":"workspace/x.json","payload":{"n":1},"subject":"customer-7"}`
	header = signHeader(t, s, info.Origin, agentID, "no-salt-nonce-00001", "POST", "/v1/actions", signedBody) // the client would not sign it
	if code, msg := signedRaw(t, ts, cred, header, "/v1/actions", noSalt); code != http.StatusBadRequest || !strings.Contains(msg, "salt") {
		t.Fatalf("signed sealing without a salt: %d %s", code, msg)
	}
	if got := ts.size(t); got != size {
		t.Fatalf("refused requests changed the log: %d -> %d", size, got)
	}

	// After erasure the signature still verifies: it covers the commitment.
	erc, err := ts.root.EraseSubject(ctx, "customer-7", api.EraseRequest{})
	if err != nil {
		t.Fatal(err)
	}
	res, _ = verifiedBundle(t, ts, erc.Index)
	if c := res.Signatures[agentID]; c == nil || c.Signed != 1 || res.Sealed.Closed != 1 {
		t.Fatalf("bundle after erasure: signatures %+v, sealed %+v", c, res.Sealed)
	}
	src, err := kernel.RemoteLog(ts.srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	if report, err := kernel.Audit(ctx, src, ts.k.VerifierKey()); err != nil || report.Broken != nil || report.Folded != report.Size {
		t.Fatalf("audit after erasure: %+v, %v", report, err)
	}
}

// TestSealedHeldAction: a sealed action that waits for a human keeps its
// payload sealed in the hold and in the action the approval commits; the
// human sees the payload in the hold's history entry before answering.
func TestSealedHeldAction(t *testing.T) {
	ctx := context.Background()
	ts := newTestServer(t)
	trust := 0.9
	grants := []api.Grant{{Pattern: "workspace/**", Actions: []string{"create", "mutate"}}}
	a, err := ts.root.CreateAgent(ctx, api.AgentRequest{Name: "mailer", Purpose: "sends mail", Energy: 10000, Trust: &trust, Grants: grants})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ts.root.IssueEnvelope(ctx, api.EnvelopeRequest{Holder: a.ID, Budget: 10000, Grants: grants, SealPayloads: true,
		HoldOn: []api.Grant{{Pattern: "workspace/outbox/*", Actions: []string{"mutate"}}}}); err != nil {
		t.Fatal(err)
	}
	agent, err := client.New(ts.srv.URL, a.Credential)
	if err != nil {
		t.Fatal(err)
	}
	held, err := agent.Submit(ctx, api.ActionRequest{Type: "mutate", Target: "workspace/outbox/1", Payload: json.RawMessage(`{"to":"erin@example.org"}`), Subject: "customer-3"})
	if err != nil {
		t.Fatal(err)
	}
	if held.Status != "held" {
		t.Fatalf("receipt %+v, want held", held)
	}
	hev := eventAt(t, ts.root, held.Index)
	if hev.Action.Sealed == nil || hev.Action.Payload != nil {
		t.Fatalf("hold logged as %+v", hev.Action)
	}
	if it := historyOf(t, ts.root, held.Index); !strings.Contains(string(it.SealedPayload), "erin@") {
		t.Fatalf("the held action's payload is not shown to the human: %+v", it)
	}
	if h, err := ts.root.Hold(ctx, held.HoldID); err != nil || h.SealedSubject != "customer-3" || !strings.Contains(string(h.Payload), "erin@") {
		t.Fatalf("the hold as the human sees it: %+v, %v", h, err)
	}
	rc, err := ts.root.AnswerHold(ctx, held.HoldID, "approve", "checked")
	if err != nil {
		t.Fatal(err)
	}
	ev := eventAt(t, ts.root, rc.Index)
	if ev.Kind != event.KindAction || ev.Action.Sealed == nil || *ev.Action.Sealed != *hev.Action.Sealed {
		t.Fatalf("approved action logged as %+v", ev.Action)
	}
	if it := historyOf(t, ts.root, rc.Index); !strings.Contains(string(it.SealedPayload), "erin@") {
		t.Fatalf("the committed action's payload: %+v", it)
	}
}
