package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/annal-dev/annal/api"
)

// annald answers POST /v1/actions on its fast path (internal/fastpost) as
// net/http answers it with --fast-post=false: for a committed action, a
// read, and the refusals (no or a wrong credential, bad JSON, a body
// over the limit, a denied target), on one kept connection (the bodies
// over the limit on connections of their own), with the reads and the
// other changes server.Buffered takes between them. The answers
// are compared with the values that differ between two logs (indexes,
// ids, times, hashes) masked.
func TestFastPostAnswersAsNetHTTP(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	exchanges := map[bool][]string{}
	for _, fast := range []bool{true, false} {
		d := startDaemon(t, filepath.Join(t.TempDir(), "data"), fmt.Sprintf("--fast-post=%v", fast))
		root := d.client(t, d.rootCredential(t))
		grants := []api.Grant{{Pattern: "workspace/**", Actions: []string{"*"}}}
		agent, err := root.CreateAgent(ctx, api.AgentRequest{Name: "a", Purpose: "fast path", Energy: 1000, Grants: grants, Trust: ptr(0.8)})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := root.IssueEnvelope(ctx, api.EnvelopeRequest{Holder: agent.ID, Budget: 500, Grants: grants}); err != nil {
			t.Fatal(err)
		}
		u, err := url.Parse(d.url)
		if err != nil {
			t.Fatal(err)
		}
		action := func(cred, body string, extra ...string) string {
			h := "POST /v1/actions HTTP/1.1\r\nHost: " + u.Host + "\r\nContent-Type: application/json\r\n"
			if cred != "" {
				h += "Authorization: Bearer " + cred + "\r\n"
			}
			return h + strings.Join(extra, "") + fmt.Sprintf("Content-Length: %d\r\n\r\n", len(body)) + body
		}
		postTo := func(path, body string) string {
			return strings.Replace(action(agent.Credential, body), "/v1/actions", path, 1)
		}
		get := func(target string) string {
			return "GET " + target + " HTTP/1.1\r\nHost: " + u.Host + "\r\nAuthorization: Bearer " + agent.Credential + "\r\n\r\n"
		}
		big := `{"type":"mutate","target":"workspace/big","payload":{"x":"` + strings.Repeat("x", api.MaxActionBody) + `"}}`
		requests := []string{
			action(agent.Credential, `{"type":"create","target":"workspace/a.md","payload":{"text":"one"}}`),
			action(agent.Credential, `{"type":"observe","target":"workspace/a.md"}`),
			action("", `{"type":"create","target":"workspace/b.md"}`),
			action("not-a-credential", `{"type":"create","target":"workspace/b.md"}`),
			action(agent.Credential, `{"type":"create","target":"workspace/b.md"`),
			action(agent.Credential, `{"type":"create","target":"workspace/b.md","extra":1}`),
			action(agent.Credential, `{"type":"create","target":"secrets/key"}`),
			// The reads an agent makes between its actions, on the same
			// connection (server.Buffered), then an action after them.
			strings.Replace(action(agent.Credential, `{"type":"observe","target":"workspace/a.md"}`), "/v1/actions", "/v1/actions?wait=published", 1),
			strings.Replace(action(agent.Credential, `{"type":"observe","target":"workspace/a.md"}`), "/v1/actions", "/v1/actions?wait=soon", 1),
			get("/v1/info"),
			get("/v1/proof/4"),
			get("/v1/events/4"),
			get("/v1/events/999999"),
			get("/v1/proof/consistency?old=1&new=4"),
			get("/v1/healthz"),
			get("/checkpoint"),
			get("/v1/whoami"),
			get("/v1/holds/hold-0123456789abcdef"),
			// And the changes it makes between them: a session, its
			// state, a delta, a hold's answer, each answered whole.
			postTo("/v1/sessions", `{"id":"s-fast"}`),
			postTo("/v1/sessions/s-fast/changes", `{"op":"state","state":"HANDSHAKING"}`),
			postTo("/v1/sessions/s-fast/changes", `{"op":`),
			postTo("/v1/sessions/s-fast/changes", `{"op":"join"}`),
			postTo("/v1/sessions/s-fast/changes", `{"op":"state","state":"ACTIVE"}`),
			postTo("/v1/sessions/s-fast/deltas", `{"turn_id":"t1","changes":[{"path":"a.txt","operation":"create","content_hash":"sha256:`+strings.Repeat("ab", 32)+`"}]}`),
			postTo("/v1/holds/hold-0123456789abcdef/approve", `{"reason":"no such hold"}`),
			postTo("/v1/agents", `{"name":"sub","purpose":"help"}`),
			// Its memory: a file written, read back, its folder listed.
			strings.Replace(postTo("/v1/vfs/"+agent.ID+"/mem/working/plan.md", "step one\n"), "POST ", "PUT ", 1),
			get("/v1/vfs/" + agent.ID + "/mem/working/plan.md"),
			get("/v1/vfs/" + agent.ID + "/mem/working/"),
			action(agent.Credential, `{"type":"observe","target":"workspace/a.md"}`),
			action(agent.Credential, `{"type":"create","target":"workspace/c.md"}`, "Connection: close\r\n"),
		}
		c, err := net.Dial("tcp", u.Host)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(time.Minute))
		br := bufio.NewReader(c)
		for i, raw := range requests {
			if _, err := io.WriteString(c, raw); err != nil {
				t.Fatalf("request %d: %v", i, err)
			}
			r, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("request %d: %v", i, err)
			}
			b, err := io.ReadAll(r.Body)
			if err != nil {
				t.Fatal(err)
			}
			exchanges[fast] = append(exchanges[fast], describe(r, b))
		}
		c.Close()
		// A body over the limit, the actions' or a smaller route's:
		// net/http refuses it on both, with the connection closed after
		// the answer.
		for _, raw := range []string{action(agent.Credential, big), postTo("/v1/sessions/s-fast/changes", `{"reason":"`+strings.Repeat("r", api.MaxSmallBody)+`"}`)} {
			c, err = net.Dial("tcp", u.Host)
			if err != nil {
				t.Fatal(err)
			}
			c.SetDeadline(time.Now().Add(time.Minute))
			go io.WriteString(c, raw)
			r, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(r.Body)
			exchanges[fast] = append(exchanges[fast], describe(r, b))
			c.Close()
		}
	}
	fast, slow := exchanges[true], exchanges[false]
	if len(fast) != len(slow) {
		t.Fatalf("%d answers on the fast path, %d from net/http", len(fast), len(slow))
	}
	codes := ""
	for i := range fast {
		if fast[i] != slow[i] {
			t.Errorf("answer %d:\n fast path: %s\n net/http:  %s", i, fast[i], slow[i])
		}
		codes += fast[i][:3] + " "
	}
	// The answers cover what they should: committed, refused.
	if want := "200 200 401 401 400 400 403 200 400 200 200 200 404 200 200 200 200 404 201 200 400 200 200 201 404 403 201 200 200 200 200 413 413 "; codes != want {
		t.Errorf("status codes %q, want %q", codes, want)
	}
}

// annald's /metrics counts the fast path's connections and those it
// hands to net/http: an agent whose actions and reads between them stay
// on the path adds a connection and no hand-off; its first history page
// (not taken) hands its connection over. Each read of /metrics, on a
// connection of its own, is itself one connection handed over.
func TestFastPathMetricsCountHandOffs(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	d := startDaemon(t, filepath.Join(t.TempDir(), "data"))
	read := func() (conns, handoffs float64) {
		return metricValue(t, d, "annal_fastpath_connections_total"), metricValue(t, d, "annal_fastpath_handoffs_total")
	}
	conns0, handoffs0 := read()
	root := d.client(t, d.rootCredential(t))
	for i := range 5 {
		rc, err := root.Submit(ctx, api.ActionRequest{Type: "mutate", Target: "workspace/a", Payload: []byte(fmt.Sprintf(`{"n":%d}`, i))})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := root.Info(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := root.Event(ctx, rc.Index); err != nil {
			t.Fatal(err)
		}
	}
	conns1, handoffs1 := read()
	// Each read counts the connections up to its own: since the last
	// count, the hand-offs' read before it, the agent's connection and its
	// own; the hand-offs, the two reads since the last count of them.
	if conns1-conns0 != 3 || handoffs1-handoffs0 != 2 {
		t.Fatalf("after the agent's actions and reads: connections %v -> %v, hand-offs %v -> %v; want +3, +2", conns0, conns1, handoffs0, handoffs1)
	}
	if _, err := root.History(ctx, url.Values{"limit": {"1"}}); err != nil {
		t.Fatal(err)
	}
	conns2, handoffs2 := read()
	// And now the agent's connection too.
	if conns2-conns1 != 2 || handoffs2-handoffs1 != 3 {
		t.Fatalf("after a history page: connections %v -> %v, hand-offs %v -> %v; want +2, +3", conns1, conns2, handoffs1, handoffs2)
	}
}

var varyingValue = regexp.MustCompile(`"(index|id|event_id|hold_id|time|at|leaf_hash|signature|hash|prev|receipt|entry_hash|checkpoint|sig|timestamp|retain_until|[a-z_]*_at)":("[^"]*"|[0-9]+)`)

// generatedID is an actor's or an envelope's id, or a record's UUID.
var generatedID = regexp.MustCompile(`\b(agent|env)-[0-9a-f]{12,}|\b()[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b`)

// logName and base64Run are a log's origin and the hashes, keys and
// signatures in proofs and checkpoints: each log's own.
var (
	logName   = regexp.MustCompile(`annal\.local/[0-9a-f]{16}`)
	base64Run = regexp.MustCompile(`[A-Za-z0-9+/]{40,}={0,2}`)
)

// describe is an answer with what differs between two logs masked.
func describe(r *http.Response, body []byte) string {
	var v any
	masked := string(body)
	if json.Unmarshal(body, &v) == nil {
		masked = varyingValue.ReplaceAllString(masked, `"$1":_`)
		masked = generatedID.ReplaceAllString(masked, "$1-_")
	}
	masked = base64Run.ReplaceAllString(logName.ReplaceAllString(masked, "annal.local/_"), "_")
	return fmt.Sprintf("%03d close=%v type=%q nosniff=%q len=%d %s", r.StatusCode, r.Close,
		r.Header.Get("Content-Type"), r.Header.Get("X-Content-Type-Options"), len(masked), masked)
}
