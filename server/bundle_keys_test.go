package server

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/annal-dev/annal/api"
	"github.com/annal-dev/annal/client"
	"github.com/annal-dev/annal/verifier"
)

// TestFilteredBundleCarriesKeyEvents: a bundle of one agent's actions, or
// of one kind, carries the key registrations its signatures need as
// key_event lines, so annal-verify checks every signature (none
// "unverifiable") and --require-signed passes; a key_event line whose
// entry registers no key is refused.
func TestFilteredBundleCarriesKeyEvents(t *testing.T) {
	ctx := context.Background()
	ts := newTestServer(t)
	signed, _, agent, _, _ := signedAgentCred(t, ts, false)
	// Another agent with its own key, whose events the bundles leave out.
	other, _, _, _, _ := signedAgentCred(t, ts, false)
	var last uint64
	for _, c := range []struct {
		c      *client.Client
		target string
	}{{signed, "workspace/a.md"}, {other, "workspace/b.md"}, {signed, "workspace/c.md"}} {
		rc, err := c.c.Submit(ctx, api.ActionRequest{Type: "create", Target: c.target})
		if err != nil {
			t.Fatal(err)
		}
		last = rc.Index
	}
	for _, q := range []url.Values{{"actor": {agent}}, {"kind": {"action"}}} {
		res, raw := verifiedBundleOf(t, ts, last, q)
		if c := res.Signatures[agent]; c == nil || c.Signed != 2 || c.Unverifiable != 0 || c.Unsigned != 0 {
			t.Fatalf("bundle %v: signatures of %s %+v, want 2 signed", q, agent, c)
		}
		if res.KeyEvents < 2 {
			t.Fatalf("bundle %v: %d key events, want the two agents' registrations", q, res.KeyEvents)
		}
		if q.Has("actor") && (res.ByActor["root"] != 0 || res.Events != 2) {
			t.Fatalf("bundle %v: the key events were counted as selected: %+v", q, res.ByActor)
		}
		// A key_event line of an entry that registers no key is refused.
		lines := strings.SplitAfter(string(raw), "\n")
		for i, l := range lines {
			if strings.Contains(l, `"proof":[`) && !strings.Contains(l, `"key_event"`) {
				lines[i] = strings.Replace(l, `,"proof":[`, `,"key_event":true,"proof":[`, 1)
				break
			}
		}
		_, err := verifier.VerifyBundle(strings.NewReader(strings.Join(lines, "")), mustKeyPolicy(t, ts), nil)
		var ve *verifier.Error
		if !errors.As(err, &ve) || !strings.Contains(err.Error(), "not a key event") {
			t.Fatalf("a forged key_event line: %v", err)
		}
	}
}
