package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/annal-dev/annal/api"
	"github.com/annal-dev/annal/internal/servicestest"
)

type bearerRoundTripper struct{ cred string }

func (b bearerRoundTripper) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.cred)
	return http.DefaultTransport.RoundTrip(r)
}

// mcpAgent has root create an agent with an envelope on a running annald
// and returns its id and credential.
func mcpAgent(t *testing.T, d *daemon) (string, string) {
	t.Helper()
	ctx := context.Background()
	root := d.client(t, d.rootCredential(t))
	trust := 0.8
	grants := []api.Grant{{Pattern: "workspace/**", Actions: []string{"observe", "create", "mutate"}}}
	a, err := root.CreateAgent(ctx, api.AgentRequest{Name: "mcp", Purpose: "MCP test", Energy: 1000, Trust: &trust, Grants: grants})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := root.IssueEnvelope(ctx, api.EnvelopeRequest{Holder: a.ID, Budget: 500, Grants: grants}); err != nil {
		t.Fatal(err)
	}
	return a.ID, a.Credential
}

func submitOverMCP(t *testing.T, cs *mcp.ClientSession, target string) (api.Receipt, *mcp.CallToolResult) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "submit", Arguments: map[string]any{"type": "mutate", "target": target}})
	if err != nil {
		t.Fatal(err)
	}
	var rc api.Receipt
	raw, _ := json.Marshal(res.StructuredContent)
	json.Unmarshal(raw, &rc)
	return rc, res
}

// TestMCPOverHTTPAndStdio: an agent reaches the kernel through MCP both
// ways a host runs servers: annald's /mcp over streamable HTTP with its
// bearer credential, and `annal mcp` spawned over stdio. Both act as the
// agent, and a refusal is a tool error.
func TestMCPOverHTTPAndStdio(t *testing.T) {
	d := startDaemon(t, t.TempDir())
	agentID, cred := mcpAgent(t, d)
	ctx := context.Background()
	newClient := func() *mcp.Client { return mcp.NewClient(&mcp.Implementation{Name: "test-host", Version: "1"}, nil) }

	httpSession, err := newClient().Connect(ctx, &mcp.StreamableClientTransport{Endpoint: d.url + "/mcp",
		HTTPClient: &http.Client{Transport: bearerRoundTripper{cred}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer httpSession.Close()
	rc, res := submitOverMCP(t, httpSession, "workspace/via-http")
	if res.IsError || rc.Status != "committed" || rc.Actor != agentID {
		t.Errorf("submit over /mcp: %+v %+v", rc, res.Content)
	}
	if _, res := submitOverMCP(t, httpSession, "outside/the/grants"); !res.IsError {
		t.Error("a denied action over /mcp is no tool error")
	}
	resp, err := http.Post(d.url+"/mcp", "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("/mcp without a credential: %d", resp.StatusCode)
	}

	cmd := exec.Command(annalBinary, "mcp")
	cmd.Env = append(os.Environ(), "ANNAL_SERVER="+d.url, "ANNAL_CREDENTIAL="+cred)
	stdioSession, err := newClient().Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer stdioSession.Close()
	rc, res = submitOverMCP(t, stdioSession, "workspace/via-stdio")
	if res.IsError || rc.Status != "committed" || rc.Actor != agentID {
		t.Errorf("submit over annal mcp: %+v %+v", rc, res.Content)
	}
	r, err := stdioSession.ReadResource(ctx, &mcp.ReadResourceParams{URI: "annal://history"})
	if err != nil || !strings.Contains(r.Contents[0].Text, "workspace/via-http") || !strings.Contains(r.Contents[0].Text, "workspace/via-stdio") {
		t.Errorf("the agent's history over stdio: %v %+v", err, r)
	}
}

// npmBin is the path of a program from the npm packages .ci/test installs
// (servicestest.NPMBin).
func npmBin(t *testing.T, name string) string { return servicestest.NPMBin(t, name) }

// TestMCPWithTheOfficialInspector: a client no one here wrote, the MCP
// inspector's CLI, lists the tools and submits an action over annald's
// /mcp, and reads the agent's history from `annal mcp` over stdio.
func TestMCPWithTheOfficialInspector(t *testing.T) {
	inspector := npmBin(t, "mcp-inspector")
	d := startDaemon(t, t.TempDir())
	agentID, cred := mcpAgent(t, d)
	run := func(args ...string) map[string]any {
		t.Helper()
		cmd := exec.Command(inspector, append([]string{"--cli"}, args...)...)
		out, err := cmd.Output()
		if err != nil {
			stderr := ""
			if ee, ok := err.(*exec.ExitError); ok {
				stderr = string(ee.Stderr)
			}
			t.Fatalf("inspector %v: %v\n%s\n%s", args, err, out, stderr)
		}
		var v map[string]any
		if err := json.Unmarshal(out, &v); err != nil {
			t.Fatalf("inspector %v printed %s: %v", args, out, err)
		}
		return v
	}
	overHTTP := []string{d.url + "/mcp", "--transport", "http", "--header", "Authorization: Bearer " + cred}
	tools := run(append(overHTTP, "--method", "tools/list")...)
	raw, _ := json.Marshal(tools)
	for _, name := range []string{"submit", "wait_hold", "proof", "budget", "record_turn"} {
		if !strings.Contains(string(raw), `"name":"`+name+`"`) {
			t.Errorf("the inspector does not list %s: %s", name, raw)
		}
	}
	res := run(append(overHTTP, "--method", "tools/call", "--tool-name", "submit", "--tool-arg", "type=mutate", "--tool-arg", "target=workspace/inspected")...)
	sc, _ := res["structuredContent"].(map[string]any)
	if res["isError"] == true || sc["status"] != "committed" || sc["actor"] != agentID {
		t.Errorf("submit through the inspector: %v", res)
	}
	stdio := []string{annalBinary, "mcp", "-e", "ANNAL_SERVER=" + d.url, "-e", "ANNAL_CREDENTIAL=" + cred}
	hist := run(append(stdio, "--method", "resources/read", "--uri", "annal://history")...)
	raw, _ = json.Marshal(hist)
	if !strings.Contains(string(raw), "workspace/inspected") {
		t.Errorf("the history read through the inspector over stdio: %s", raw)
	}
}
