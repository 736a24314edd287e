package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/annal-dev/annal/api"
	"github.com/annal-dev/annal/blobstore"
	"github.com/annal-dev/annal/client"
	"github.com/annal-dev/annal/format/oid"
	"github.com/annal-dev/annal/kernel"
)

// vfsWorld is a server that keeps blobs, with agents that each hold an
// envelope.
type vfsWorld struct {
	*testServer
	blobDir string
	creds   map[string]string // by agent id
}

func newVFSWorld(t *testing.T) *vfsWorld {
	ts := newTestServer(t)
	dir := t.TempDir()
	store, err := blobstore.Open(dir, api.MaxVFSContent, 64<<20)
	if err != nil {
		t.Fatal(err)
	}
	srv := New(ts.k, discardLogger())
	srv.KeepBlobs(store)
	ts.srv.Config.Handler = srv
	return &vfsWorld{testServer: ts, blobDir: dir, creds: map[string]string{}}
}

// agent creates an agent with grants (in its writable targets and its
// envelope) and returns its id and a client acting as it.
func (w *vfsWorld) agent(t *testing.T, name string, grants ...api.Grant) (string, *client.Client) {
	t.Helper()
	id, cred := w.newAgent(t, agentSpec{name: name, trust: 0.8, energy: 10_000, grants: grants})
	w.creds[id] = cred
	if grants == nil {
		grants = []api.Grant{{Pattern: "workspace/*", Actions: []string{"*"}}}
	}
	w.issue(t, w.rootCred, api.EnvelopeRequest{Holder: id, Budget: 5_000, Grants: grants})
	c, err := client.New(w.srv.URL, cred)
	if err != nil {
		t.Fatal(err)
	}
	return id, c
}

func TestSpec002_VFS_WriteReadRoundTrip(t *testing.T) {
	w := newVFSWorld(t)
	ctx := context.Background()
	alice, ac := w.agent(t, "alice")
	_, bc := w.agent(t, "bob")
	uri := "vfs://" + alice + "/mem/semantic/facts.md"
	data := []byte("the build runs on two cores\n")

	out, err := ac.VFSPut(ctx, uri, data, "")
	if err != nil {
		t.Fatal(err)
	}
	if out.OID != oid.Of(data) || out.Receipt.Status != "committed" || out.Receipt.Target != "vfs/"+alice+"/mem/semantic/facts.md" {
		t.Fatalf("written: %+v", out)
	}
	// The log records the write with the content's OID, and the blob
	// store holds the bytes under that OID.
	ev := w.event(t, out.Receipt.Index)
	var logged struct {
		Action struct {
			PayloadHash string `json:"payload_hash"`
			Type        string `json:"type"`
		} `json:"action"`
	}
	raw := w.call(t, "GET", "/v1/events/"+itoa(out.Receipt.Index), "", nil).must(t, http.StatusOK).body
	if err := json.Unmarshal(raw, &logged); err != nil {
		t.Fatal(err)
	}
	if ev.Kind != "action" || ev.Actor != alice || logged.Action.PayloadHash != oid.Of(data) || logged.Action.Type != "mutate" {
		t.Fatalf("logged: %s", raw)
	}
	blob, err := w.root.Blob(ctx, out.OID)
	if err != nil || !bytes.Equal(blob, data) {
		t.Fatalf("blob %s: %q %v", out.OID, blob, err)
	}
	got, f, err := ac.VFSRead(ctx, uri)
	if err != nil || !bytes.Equal(got, data) || f.OID != oid.Of(data) || f.Index != out.Receipt.Index || f.Writer != alice {
		t.Fatalf("read: %q %+v %v", got, f, err)
	}
	if got, _, err := w.root.VFSRead(ctx, uri); err != nil || !bytes.Equal(got, data) {
		t.Errorf("root (who oversees alice) reads: %q %v", got, err)
	}
	if _, _, err := bc.VFSRead(ctx, uri); !client.IsStatus(err, http.StatusForbidden) {
		t.Errorf("bob reads alice's tree: %v", err)
	}
	// A second write replaces the file; the first stays in the log.
	data2 := []byte("the build runs on two shared cores\n")
	out2, err := ac.VFSPut(ctx, uri, data2, "")
	if err != nil {
		t.Fatal(err)
	}
	l, err := ac.VFSList(ctx, "vfs://"+alice+"/")
	if err != nil || len(l.Files) != 1 || l.Files[0].OID != oid.Of(data2) || l.Files[0].Index != out2.Receipt.Index {
		t.Fatalf("listing: %+v %v", l, err)
	}
	// Bad paths and bodies are refused and change nothing.
	size := w.logSize(t)
	for path, status := range map[string]int{
		"/v1/vfs/" + alice + "/mem/working/a/%2e%2e/b": http.StatusBadRequest,
		"/v1/vfs/" + alice + "/mem/working/a%20b":      http.StatusBadRequest,
		"/v1/vfs/" + alice + "/tmp/x":                  http.StatusBadRequest,
		"/v1/vfs/" + alice + "/mem/working":            http.StatusForbidden,
	} {
		if r := w.call(t, "PUT", path, w.rootCred, "x"); r.status != status {
			t.Errorf("PUT %s: %v, want %d", path, r, status)
		}
	}
	big := strings.Repeat("x", api.MaxVFSContent+1)
	if _, err := ac.VFSPut(ctx, uri, []byte(big), ""); err == nil || !strings.Contains(err.Error(), "more than") {
		t.Errorf("a file over the limit, by the client: %v", err)
	}
	if r := w.call(t, "PUT", "/v1/vfs/"+alice+"/mem/working/big", w.creds[alice], big); r.status != http.StatusRequestEntityTooLarge {
		t.Errorf("a body over the limit: %v", r)
	}
	w.unchanged(t, size, "refused writes")
}

func TestSpec002_VFS_InboxMessageBetweenAgents(t *testing.T) {
	w := newVFSWorld(t)
	ctx := context.Background()
	bob, bc := w.agent(t, "bob")
	_, ec := w.agent(t, "eve")
	alice, ac := w.agent(t, "alice", api.Grant{Pattern: "vfs/" + bob + "/ipc/inbox/*", Actions: []string{"create"}})
	msg := []byte(`{"ask":"review PR 12"}`)

	// Without a grant on bob's inbox, eve's message is refused.
	if _, err := ec.VFSPut(ctx, "vfs://"+bob+"/ipc/inbox/from-eve", msg, ""); !client.IsStatus(err, http.StatusForbidden) {
		t.Fatalf("eve without a grant: %v", err)
	}
	// Nor may alice write elsewhere in bob's tree.
	if _, err := ac.VFSPut(ctx, "vfs://"+bob+"/mem/semantic/x", msg, ""); !client.IsStatus(err, http.StatusForbidden) {
		t.Fatalf("alice in bob's memory: %v", err)
	}
	out, err := ac.VFSPut(ctx, "vfs://"+bob+"/ipc/inbox/review", msg, "")
	if err != nil {
		t.Fatal(err)
	}
	if out.Receipt.Type != "create" || out.Receipt.Actor != alice {
		t.Errorf("the message's receipt: %+v", out.Receipt)
	}
	got, f, err := bc.VFSRead(ctx, "vfs://"+bob+"/ipc/inbox/review")
	if err != nil || !bytes.Equal(got, msg) || f.Writer != alice || f.Index != out.Receipt.Index {
		t.Fatalf("bob reads his inbox: %q %+v %v", got, f, err)
	}
	l, err := bc.VFSList(ctx, "vfs://"+bob+"/ipc/inbox")
	if err != nil || len(l.Files) != 1 {
		t.Fatalf("bob's inbox: %+v %v", l, err)
	}
	sent, f, err := ac.VFSRead(ctx, "vfs://"+alice+"/ipc/outbox/"+bob+"/review")
	if err != nil || !bytes.Equal(sent, msg) || f.Index != out.Receipt.Index {
		t.Fatalf("alice's outbox: %q %+v %v", sent, f, err)
	}
	if l, err := bc.VFSList(ctx, "vfs://"+bob+"/ipc/outbox"); err != nil || len(l.Files) != 0 {
		t.Errorf("bob's outbox: %+v %v", l, err)
	}
	if _, _, err := ac.VFSRead(ctx, "vfs://"+bob+"/ipc/inbox/review"); !client.IsStatus(err, http.StatusForbidden) {
		t.Errorf("alice reads bob's inbox: %v", err)
	}
	if _, err := ac.VFSPut(ctx, "vfs://"+alice+"/ipc/outbox/"+bob+"/forged", msg, ""); err == nil || !strings.Contains(err.Error(), "read-only") {
		t.Errorf("alice writes her outbox: %v", err)
	}
}

func TestSpec002_VFS_PolicyAndAuditAreReadOnlyViewsOfTheLog(t *testing.T) {
	w := newVFSWorld(t)
	ctx := context.Background()
	alice, ac := w.agent(t, "alice")
	for _, rel := range []string{"policy/active.json", "policy/history.json", "audit/events.jsonl"} {
		r := w.call(t, "PUT", "/v1/vfs/"+alice+"/"+rel, w.creds[alice], "{}")
		if r.status != http.StatusForbidden || !strings.Contains(string(r.body), "view of the log") {
			t.Errorf("PUT %s: %v", rel, r)
		}
		// The same write as a plain action: the kernel's rule refuses it.
		_, err := ac.Submit(ctx, api.ActionRequest{Type: "mutate", Target: "vfs/" + alice + "/" + rel, PayloadHash: oid.Of([]byte("{}"))})
		if !client.IsStatus(err, http.StatusForbidden) || !strings.Contains(err.Error(), "view of the log") {
			t.Errorf("submit on %s: %v", rel, err)
		}
	}
	if _, err := w.root.SetPolicy(ctx, "quiet", json.RawMessage(`{"name":"quiet","blocked_patterns":["secret"]}`)); err != nil {
		t.Fatal(err)
	}
	at, err := w.root.AttachPolicy(ctx, "quiet", api.AttachRequest{Agent: alice})
	if err != nil {
		t.Fatal(err)
	}
	var active []kernel.VFSActivePolicy
	readJSONView(t, ac, "vfs://"+alice+"/policy/active.json", &active)
	if len(active) != 1 || active[0].Name != "quiet" || !active[0].Defined || active[0].Version != 1 {
		t.Errorf("active.json: %+v", active)
	}
	set2, err := w.root.SetPolicy(ctx, "quiet", json.RawMessage(`{"name":"quiet","blocked_patterns":["secret","token"]}`))
	if err != nil {
		t.Fatal(err)
	}
	det, err := w.root.AttachPolicy(ctx, "quiet", api.AttachRequest{Agent: alice, Detach: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.root.SetPolicy(ctx, "quiet", json.RawMessage(`{"name":"quiet","blocked_patterns":["x"]}`)); err != nil {
		t.Fatal(err) // a change while detached is not alice's
	}
	var hist []kernel.VFSPolicyChange
	readJSONView(t, ac, "vfs://"+alice+"/policy/history.json", &hist)
	want := []struct {
		index   uint64
		change  string
		version uint64
	}{{at.Receipt.Index, "attached", 0}, {set2.Receipt.Index, "set", 2}, {det.Receipt.Index, "detached", 0}}
	if len(hist) != len(want) {
		t.Fatalf("history.json: %+v", hist)
	}
	for i, c := range want {
		if h := hist[i]; h.Index != c.index || h.Change != c.change || h.Version != c.version || h.By != "root" || h.Policy != "quiet" {
			t.Errorf("history.json[%d] = %+v, want %+v", i, h, c)
		}
	}
	readJSONView(t, ac, "vfs://"+alice+"/policy/active.json", &active)
	if len(active) != 0 {
		t.Errorf("active.json after the detach: %+v", active)
	}

	if _, err := ac.VFSPut(ctx, "vfs://"+alice+"/mem/episodic/day-1", []byte("did things"), ""); err != nil {
		t.Fatal(err)
	}
	lines, _, err := ac.VFSRead(ctx, "vfs://"+alice+"/audit/events.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range bytes.Split(bytes.TrimSpace(lines), []byte("\n")) {
		var l struct {
			Index    uint64          `json:"index"`
			LeafHash string          `json:"leaf_hash"`
			Event    json.RawMessage `json:"event"`
		}
		if err := json.Unmarshal(line, &l); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		logged := w.call(t, "GET", "/v1/events/"+itoa(l.Index), "", nil).must(t, http.StatusOK).body
		if !bytes.Equal(bytes.TrimSpace(logged), l.Event) {
			t.Errorf("line of index %d: %s, the log has %s", l.Index, l.Event, logged)
		}
		if w.event(t, l.Index).Actor != alice {
			t.Errorf("index %d is not alice's", l.Index)
		}
		n++
	}
	page, err := w.root.History(ctx, map[string][]string{"actor": {alice}, "limit": {"500"}})
	if err != nil {
		t.Fatal(err)
	}
	if n != len(page.Events) || n < 3 {
		t.Errorf("events.jsonl has %d lines, the history of %s %d events", n, alice, len(page.Events))
	}
}

func readJSONView(t *testing.T, c *client.Client, uri string, v any) {
	t.Helper()
	raw, _, err := c.VFSRead(context.Background(), uri)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		t.Fatalf("%s: %q: %v", uri, raw, err)
	}
}

func TestSpec002_VFS_WorkingMemoryClearedOnRestart(t *testing.T) {
	w := newVFSWorld(t)
	ctx := context.Background()
	alice, ac := w.agent(t, "alice")
	scratch, err := ac.VFSPut(ctx, "vfs://"+alice+"/mem/working/scratch", []byte("half a thought"), "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ac.VFSPut(ctx, "vfs://"+alice+"/mem/episodic/day-1", []byte("a day"), ""); err != nil {
		t.Fatal(err)
	}
	if _, err := w.root.Signal(ctx, alice, api.SignalRequest{Signal: "SIGSTOP"}); err != nil {
		t.Fatal(err)
	}
	// Stopped is not restarted: the working memory is still there.
	if l, err := ac.VFSList(ctx, "vfs://"+alice+"/mem/working"); err != nil || len(l.Files) != 1 {
		t.Fatalf("working memory of a stopped agent: %+v %v", l, err)
	}
	cont, err := w.root.Signal(ctx, alice, api.SignalRequest{Signal: "SIGCONT"})
	if err != nil {
		t.Fatal(err)
	}
	l, err := ac.VFSList(ctx, "vfs://"+alice+"/")
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Files) != 1 || l.Files[0].Path != "mem/episodic/day-1" || l.Resumed != cont.Receipt.Index {
		t.Fatalf("after the resume: %+v (resumed at %d)", l, cont.Receipt.Index)
	}
	if _, _, err := ac.VFSRead(ctx, "vfs://"+alice+"/mem/working/scratch"); err == nil {
		t.Errorf("the scratch file is still read after the resume")
	}
	// The write stays in the log, for audit.
	if ev := w.event(t, scratch.Receipt.Index); ev.Action == nil || ev.Action.Target != "vfs/"+alice+"/mem/working/scratch" {
		t.Errorf("the working write left the log: %+v", ev)
	}
	if _, err := ac.VFSPut(ctx, "vfs://"+alice+"/mem/working/scratch", []byte("a new thought"), ""); err != nil {
		t.Fatal(err)
	}
	if got, _, err := ac.VFSRead(ctx, "vfs://"+alice+"/mem/working/scratch"); err != nil || string(got) != "a new thought" {
		t.Errorf("working memory after the resume: %q %v", got, err)
	}
}

// TestSpec002_VFS_TreeIdenticalAfterRebuild: the tree is folded from the
// log, so a state file rebuilt from the log alone shows the same tree.
func TestSpec002_VFS_TreeIdenticalAfterRebuild(t *testing.T) {
	dir, blobDir := t.TempDir(), t.TempDir()
	cfg := kernel.DefaultConfig(dir)
	cfg.Logger = discardLogger()
	cfg.CheckpointInterval = 100 * time.Millisecond
	cfg.DisableProduction = true
	open := func() (*kernel.Kernel, *testServer) {
		k, err := kernel.Open(cfg)
		if err != nil {
			t.Fatal(err)
		}
		store, err := blobstore.Open(blobDir, api.MaxVFSContent, 64<<20)
		if err != nil {
			t.Fatal(err)
		}
		srv := New(k, cfg.Logger)
		srv.KeepBlobs(store)
		raw, err := os.ReadFile(k.RootCredentialPath())
		if err != nil {
			t.Fatal(err)
		}
		hs := httptest.NewServer(srv)
		root, _ := client.New(hs.URL, strings.TrimSpace(string(raw)))
		return k, &testServer{k: k, srv: hs, rootCred: strings.TrimSpace(string(raw)), root: root}
	}
	k, ts := open()
	w := &vfsWorld{testServer: ts, blobDir: blobDir, creds: map[string]string{}}
	ctx := context.Background()
	bob, _ := w.agent(t, "bob")
	alice, ac := w.agent(t, "alice", api.Grant{Pattern: "vfs/" + bob + "/ipc/inbox/*", Actions: []string{"create"}})
	for uri, data := range map[string]string{
		"vfs://" + alice + "/mem/working/a":        "1",
		"vfs://" + alice + "/mem/semantic/b":       "2",
		"vfs://" + alice + "/state/checkpoints/c1": "3",
		"vfs://" + bob + "/ipc/inbox/hi":           "4",
	} {
		if _, err := ac.VFSPut(ctx, uri, []byte(data), ""); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := w.root.Signal(ctx, alice, api.SignalRequest{Signal: "SIGSTOP"}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.root.Signal(ctx, alice, api.SignalRequest{Signal: "SIGCONT"}); err != nil {
		t.Fatal(err)
	}
	trees := func(root *client.Client) string {
		var b strings.Builder
		for _, a := range []string{alice, bob} {
			l, err := root.VFSList(ctx, "vfs://"+a+"/")
			if err != nil {
				t.Fatal(err)
			}
			raw, _ := json.Marshal(l)
			b.Write(raw)
		}
		return b.String()
	}
	before := trees(w.root)
	if !strings.Contains(before, "ipc/outbox/"+bob+"/hi") || strings.Contains(before, "mem/working/a") {
		t.Fatalf("trees before: %s", before)
	}
	ts.srv.Close()
	if err := k.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := kernel.Rebuild(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	k, ts = open()
	defer func() { ts.srv.Close(); k.Close() }()
	if after := trees(ts.root); after != before {
		t.Errorf("after a rebuild:\n%s\nbefore:\n%s", after, before)
	}
}

// An actor that must sign its requests writes its files too: the
// signature states the action the write is (POST /v1/actions naming the
// content's OID, since the write's body is the file's bytes), annald
// states it the same way, and the event gives it back like any signed
// action's. An unsigned write, and a body other than the one signed, are
// refused and write nothing; the log audits clean.
func TestSpec002_VFS_SignedWrites(t *testing.T) {
	w := newVFSWorld(t)
	ctx := context.Background()
	signed, unsigned, agent, skey, cred := signedAgentCred(t, w.testServer, true)
	uri := "vfs://" + agent + "/mem/episodic/day-1.md"
	data := []byte("signed, as everything this agent does\n")
	before := w.size(t)
	if _, err := unsigned.VFSPut(ctx, uri, data, ""); err == nil {
		t.Fatal("an unsigned write by an agent that must sign was taken")
	}
	// The same signed request with other bytes: the signature names the
	// OID of the bytes it was made for.
	swapper, err := client.New(w.srv.URL, cred)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := swapper.WithSigningKey(skey); err != nil {
		t.Fatal(err)
	}
	swapper = swapper.WithHTTPClient(&http.Client{Transport: swapBody{[]byte("other bytes\n")}})
	if _, err := swapper.VFSPut(ctx, uri, data, ""); err == nil {
		t.Fatal("a write whose bytes are not those signed was taken")
	}
	if w.size(t) != before {
		t.Fatal("a refused write grew the log")
	}
	out, err := signed.VFSPut(ctx, uri, data, "")
	if err != nil {
		t.Fatal(err)
	}
	if ev := eventAt(t, w.root, out.Receipt.Index); ev.Signed == nil || ev.Signed.By != agent || ev.Action == nil || ev.Action.PayloadHash != oid.Of(data) {
		t.Fatalf("the signed write's event: %+v", ev)
	}
	last, err := signed.VFSPut(ctx, uri, []byte("and again\n"), "")
	if err != nil {
		t.Fatalf("a second signed write: %v", err)
	}
	if _, err := w.root.WaitProof(ctx, last.Receipt.Index); err != nil {
		t.Fatal(err)
	}
	src, err := kernel.RemoteLog(w.srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	if report, err := kernel.Audit(ctx, src, w.k.VerifierKey()); err != nil || report.Broken != nil {
		t.Fatalf("audit: %+v %v", report, err)
	}
}

// swapBody sends every PUT with body in place of the one it was given
// (and signed).
type swapBody struct{ body []byte }

func (s swapBody) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodPut {
		r = r.Clone(r.Context())
		r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(s.body)), int64(len(s.body))
	}
	return http.DefaultTransport.RoundTrip(r)
}
