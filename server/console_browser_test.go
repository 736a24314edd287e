package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/annal-dev/annal/api"
	"github.com/annal-dev/annal/kernel"
)

// These tests drive the console in a real headless Chromium (Debian's
// chromium package; `bash .ci/test` installs it). Without one they skip,
// unless ANNAL_REQUIRE_BROWSER is set (as .ci/test sets it), when they fail.
// Screenshots go to $ANNAL_SCREENSHOTS if set.

func chromiumPath(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("ANNAL_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("ANNAL_REQUIRE_BROWSER") != "" {
		t.Fatal("no chromium on PATH, and ANNAL_REQUIRE_BROWSER is set: install Debian's chromium (bash .ci/test does)")
	}
	t.Skip("no chromium on PATH: `bash .ci/test` installs it and runs the browser tests")
	return ""
}

// browser is one headless Chromium tab.
type browser struct {
	t       *testing.T
	ctx     context.Context
	base    string
	dialogs atomic.Int32 // alert/confirm/prompt dialogs opened: XSS
	shots   string
}

func newBrowser(t *testing.T, base string) *browser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.NoSandbox, // CI runs as root, where Chromium's sandbox cannot start
		chromedp.WindowSize(1366, 900),
		chromedp.Flag("disable-dev-shm-usage", true),
	)
	// Start Chromium before anything else uses the context: chromedp
	// starts a browser on first use and does not guard that against a
	// second start, so a context whose first start failed (a loaded
	// machine) must not be used again — it panics closing a channel twice.
	// A failed start is tried again on a fresh context.
	var ctx context.Context
	for attempt := 1; ; attempt++ {
		actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
		tctx, cancelTab := chromedp.NewContext(actx)
		tctx, cancelTime := context.WithTimeout(tctx, 3*time.Minute)
		err := chromedp.Do(tctx)
		if err == nil {
			ctx = tctx
			t.Cleanup(func() { cancelTime(); cancelTab(); cancelAlloc() })
			break
		}
		cancelTime()
		cancelTab()
		cancelAlloc()
		if attempt == 3 {
			t.Fatalf("chromium did not start: %v", err)
		}
		t.Logf("chromium did not start (attempt %d): %v", attempt, err)
	}
	b := &browser{t: t, ctx: ctx, base: base, shots: os.Getenv("ANNAL_SCREENSHOTS")}
	dialogs := chromedp.Events(ctx, page.JavascriptDialogOpening)
	go func() {
		for d, err := range dialogs {
			if err != nil {
				return
			}
			b.dialogs.Add(1)
			t.Errorf("the page opened a %s dialog: %q (script ran)", d.Type, d.Message)
			chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: false})
		}
	}()
	b.do(chromedp.Navigate(base + "/ui/"))
	// Count CSP violations (a Trusted Types violation is one): a page that
	// never builds HTML from strings has none.
	b.eval(`window.__csp = []; document.addEventListener('securitypolicyviolation', e => window.__csp.push(e.violatedDirective + ' ' + e.blockedURI)); true`, new(bool))
	return b
}

func (b *browser) do(actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if err := chromedp.Do(b.ctx, actions...); err != nil {
		b.screenshot("failure")
		b.t.Fatalf("browser: %v", err)
	}
}

// eval evaluates js in the page into out.
func eval[T any](b *browser, js string) T {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[T](js))
	if err != nil {
		b.t.Fatalf("browser: evaluate %s: %v", js, err)
	}
	return v
}

func (b *browser) eval(js string, out *bool) { *out = eval[bool](b, js) }

// waitFor polls js (an expression) until it is true.
func (b *browser) waitFor(what, js string) {
	b.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !eval[bool](b, "!!("+js+")") {
		if time.Now().After(deadline) {
			b.screenshot("timeout")
			b.t.Fatalf("waited 30s for %s; the page reads:\n%s", what, eval[string](b, `document.body.innerText`))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (b *browser) text(selector string) string {
	b.t.Helper()
	return eval[string](b, fmt.Sprintf(`(document.querySelector(%q)||{}).innerText||''`, selector))
}

func (b *browser) screenshot(name string) {
	if b.shots == "" {
		return
	}
	buf, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Logf("screenshot %s: %v", name, err)
		return
	}
	path := filepath.Join(b.shots, b.t.Name()+"-"+name+".png")
	if err := os.WriteFile(path, buf, 0o644); err != nil {
		b.t.Logf("screenshot %s: %v", name, err)
	}
}

func (b *browser) signIn(cred string) {
	b.t.Helper()
	b.waitFor("the sign-in form", `!document.getElementById('view-signin').hidden`)
	b.screenshot("signin")
	b.do(chromedp.SendKeys(chromedp.CSS("#credential"), cred), chromedp.Click(chromedp.CSS(`#signin-form button[type=submit]`)))
	b.waitFor("the console after sign-in", `!document.getElementById('tabs').hidden`)
}

// click clicks the element sel names. A view that re-renders (a live
// update) can replace the node between finding it and clicking it: the
// click is then tried again on the new node.
func (b *browser) click(sel string) {
	b.t.Helper()
	for attempt := 0; ; attempt++ {
		err := chromedp.Do(b.ctx, chromedp.Click(chromedp.CSS(sel)))
		if err == nil {
			return
		}
		if attempt < 10 && strings.Contains(err.Error(), "Could not find node") {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		b.screenshot("failure")
		b.t.Fatalf("browser: click %s: %v", sel, err)
	}
}

func (b *browser) view(name string) {
	b.t.Helper()
	b.click(`#tabs button[data-view="` + name + `"]`)
	b.waitFor("the "+name+" view", `!document.getElementById('view-`+name+`').hidden`)
}

// trust pins the log key (and policy) in the page, as a person would.
func (b *browser) trust(key, policy string) {
	b.t.Helper()
	b.view("trust")
	b.eval(fmt.Sprintf(`document.getElementById('trust-key').value = %q; document.getElementById('trust-policy').value = %q; true`, key, policy), new(bool))
	b.click(`#trust-form button[type=submit]`)
	b.waitFor("the trust to be saved", `document.getElementById('trust-status').innerText.startsWith('Saved')`)
}

// noInjection checks that nothing an agent wrote became markup or script.
func (b *browser) noInjection() {
	b.t.Helper()
	if injected := eval[[]string](b, `[...document.querySelectorAll('main img, main script, main svg, main iframe, main [onerror], main [onload], main a[href^="javascript"]')].map(e => e.outerHTML)`); len(injected) > 0 {
		b.t.Errorf("agent-written markup became elements: %q", injected)
	}
	if eval[bool](b, `!!window.__pwned`) {
		b.t.Error("an agent-written script ran")
	}
	if csp := eval[[]string](b, `window.__csp || []`); len(csp) > 0 {
		b.t.Errorf("CSP violations: %q", csp)
	}
	if eval[bool](b, `/[\u202a-\u202e\u2066-\u2069]/.test(document.body.innerText)`) {
		b.t.Error("a direction-changing character reached the page's text unescaped")
	}
}

// tamper has the browser receive the response to every request matching
// urlPattern with one byte changed by flip (a server or network that lies).
func (b *browser) tamper(urlPattern string, flip func([]byte) []byte) (stop func()) {
	b.t.Helper()
	ctx, cancel := context.WithCancel(b.ctx)
	paused := chromedp.Events(ctx, fetch.RequestPaused)
	go func() {
		for e, err := range paused {
			if err != nil {
				return
			}
			res, err := chromedp.Call(b.ctx, fetch.GetResponseBody, fetch.GetResponseBodyParams{RequestID: e.RequestID})
			if err != nil {
				b.t.Errorf("tamper: %v", err)
				continue
			}
			_, err = chromedp.Call(b.ctx, fetch.FulfillRequest, fetch.FulfillRequestParams{RequestID: e.RequestID,
				ResponseCode: e.ResponseStatusCode, ResponseHeaders: e.ResponseHeaders, Body: flip(res.Body)})
			if err != nil {
				b.t.Errorf("tamper: %v", err)
			}
		}
	}()
	if _, err := chromedp.Call(b.ctx, fetch.Enable, fetch.EnableParams{Patterns: []*fetch.RequestPattern{{URLPattern: urlPattern, RequestStage: fetch.RequestStageResponse}}}); err != nil {
		b.t.Fatal(err)
	}
	return func() {
		chromedp.Call(b.ctx, fetch.Disable, cdp.Empty{})
		cancel()
	}
}

// TestConsoleHoldApproveVerify is an overseer's round: sign in, see a hold
// appear live, approve it, find the committed action in the history, verify
// it in the browser, and see verification fail when the server lies by one
// byte in the entry or in the checkpoint.
func TestConsoleHoldApproveVerify(t *testing.T) {
	chromiumPath(t)
	ts := newTestServer(t)
	agentID, agentCred := ts.newAgent(t, agentSpec{name: "release-bot", trust: 0.8, energy: 1000, grants: workspace})
	ts.issue(t, ts.rootCred, api.EnvelopeRequest{Holder: agentID, Budget: 500, Grants: workspace,
		HoldOn: []api.Grant{{Pattern: "workspace/release/**", Actions: []string{"mutate"}}}, HoldTimeoutSecs: 600})
	ts.mutate(t, agentCred, "workspace/notes.md", "").ok(t)

	b := newBrowser(t, ts.srv.URL)
	b.signIn(ts.rootCred)
	b.trust(ts.k.VerifierKey(), "")
	b.view("holds")
	b.waitFor("an empty inbox", `!document.getElementById('holds-empty').hidden`)

	// The agent's action is held; the inbox shows it without a reload.
	held := decode[api.Receipt](t, ts.mutate(t, agentCred, "workspace/release/v1", "").must(t, http.StatusAccepted))
	b.waitFor("the hold to appear live", fmt.Sprintf(`document.querySelector('[data-hold=%q]')`, held.HoldID))
	card := b.text(fmt.Sprintf(`[data-hold=%q]`, held.HoldID))
	for _, want := range []string{"workspace/release/v1", "release-bot", "workspace/release/**", "left", "min"} {
		if !strings.Contains(card, want) {
			t.Errorf("the hold card lacks %q:\n%s", want, card)
		}
	}
	if got := b.text("#holds-count"); got != "1" {
		t.Errorf("holds badge = %q, want 1", got)
	}
	b.screenshot("holds")

	b.do(chromedp.SendKeys(chromedp.CSS(fmt.Sprintf(`[data-hold=%q] input.reason`, held.HoldID)), "release approved in review"),
		chromedp.Click(chromedp.CSS(fmt.Sprintf(`[data-hold=%q] button.primary`, held.HoldID))))
	b.waitFor("the answer to be acknowledged", `document.getElementById('flash').innerText.includes('approved')`)
	b.waitFor("the inbox to empty", `!document.getElementById('holds-empty').hidden`)
	holds := decode[[]api.Hold](t, ts.call(t, "GET", "/v1/holds", ts.rootCred, nil).ok(t))
	if len(holds) != 1 || holds[0].Status != "approved" || holds[0].AnsweredBy != "root" {
		t.Fatalf("after approving in the console the kernel has holds %+v", holds)
	}
	// The reason typed is logged with the approval, and shown with it.
	if ev := ts.event(t, holds[0].AnsweredAt); !strings.Contains(string(ev.raw), `"reason":"release approved in review"`) {
		t.Errorf("the approved action is logged as %s, without the reason typed", ev.raw)
	}
	b.waitFor("the reason among the answered holds", `document.getElementById('holds-done').innerText.includes('release approved in review')`)

	// The committed action is in the history; verify it in the page.
	page := decode[api.HistoryPage](t, ts.call(t, "GET", "/v1/events?kind=action&target=workspace/release/&limit=1", ts.rootCred, nil).ok(t))
	if len(page.Events) != 1 {
		t.Fatalf("no committed action for the approved hold: %+v", page)
	}
	index := page.Events[0].Index
	b.view("history")
	row := fmt.Sprintf(`tr.event[data-index="%d"]`, index)
	b.waitFor("the committed action in the history", `document.querySelector('`+row+`')`)
	if got := b.text(row); !strings.Contains(got, "committed") || !strings.Contains(got, "workspace/release/v1") {
		t.Errorf("history row %d reads %q", index, got)
	}
	// Keyboard: focus the row and press Enter to expand it.
	b.do(chromedp.Focus(chromedp.CSS(row)), chromedp.KeyEvent("\r"))
	detail := row + ` + tr.detail`
	b.waitFor("the exact logged JSON", `document.querySelector('`+detail+` pre.raw').innerText.includes('"kind":"action"')`)
	b.click(detail + ` button.verify`)
	b.waitFor("verification", `document.querySelector('`+detail+` .verify-result.ok, `+detail+` .verify-result.bad')`)
	if got := b.text(detail + " .verify-result"); !strings.HasPrefix(got, "Verified") {
		t.Fatalf("verifying an honest event: %s", got)
	}
	b.screenshot("verified")

	// The server lies by one byte in the entry.
	stop := b.tamper(fmt.Sprintf("*/v1/events/%d", index), func(body []byte) []byte {
		out := append([]byte(nil), body...)
		i := strings.Index(string(out), "release/v1") + len("release/v")
		out[i] = '2'
		return out
	})
	b.click(detail + ` button.verify`)
	b.waitFor("verification to fail", `document.querySelector('`+detail+` .verify-result.bad')`)
	if got := b.text(detail + " .verify-result"); !strings.Contains(got, "FAILED") || !strings.Contains(got, "root") {
		t.Errorf("a flipped entry byte: %s", got)
	}
	b.screenshot("flipped-entry")
	stop()

	// ... and in the checkpoint's signature.
	stop = b.tamper(fmt.Sprintf("*/v1/proof/%d", index), func(body []byte) []byte {
		out := append([]byte(nil), body...)
		i := strings.LastIndex(string(out), " ") + 10 // inside the last signature's base64
		if out[i] == 'A' {
			out[i] = 'B'
		} else {
			out[i] = 'A'
		}
		return out
	})
	b.click(detail + ` button.verify`)
	b.waitFor("verification to run", `document.querySelector('`+detail+` .verify-result:not(.running)')`)
	b.waitFor("verification to fail", `document.querySelector('`+detail+` .verify-result.bad')`)
	if got := b.text(detail + " .verify-result"); !strings.Contains(got, "does not verify") {
		t.Errorf("a flipped signature byte: %s", got)
	}
	stop()

	// Honest again: verifies.
	b.click(detail + ` button.verify`)
	b.waitFor("verification to pass again", `document.querySelector('`+detail+` .verify-result.ok')`)
	b.noInjection()
}

// hostile is what an agent might write into every field the console
// shows: markup, script, and a right-to-left override that would make
// "exe.png" read as "gnp.exe".
const hostile = `<img src=x onerror="window.__pwned=1"><script>window.__pwned=1</script><b>bold</b>` + "\u202e" + `gnp.exe`

// hostileTarget is as hostile as a target may be (printable, no '\').
const hostileTarget = `workspace/<img src=x onerror=window.__pwned=1>/<script>window.__pwned=1</script>`

// TestConsoleRendersAgentTextInert puts script, markup and bidi overrides
// in agent names and purposes, targets, payloads, hold answers, session
// paths and reasons, then opens every view: nothing runs, nothing becomes
// an element, no CSP violation, and the override is shown as an escape.
func TestConsoleRendersAgentTextInert(t *testing.T) {
	chromiumPath(t)
	ts := newTestServer(t)
	// Root creates an agent with a hostile name and purpose, if the API
	// takes them; the agent creates a sub-agent the same way.
	a := decode[api.Agent](t, ts.call(t, "POST", "/v1/agents", ts.rootCred, api.AgentRequest{Name: hostile, Purpose: hostile,
		Energy: 5000, Grants: workspace, Trust: ptr(0.8)}).must(t, http.StatusCreated))
	ts.issue(t, ts.rootCred, api.EnvelopeRequest{Holder: a.ID, Budget: 2000, Grants: workspace,
		HoldOn: []api.Grant{{Pattern: "workspace/held/**", Actions: []string{"mutate"}}}, HoldTimeoutSecs: 600})
	payload := map[string]any{"note": hostile, hostile: []string{hostile}}
	ts.call(t, "POST", "/v1/actions", a.Credential, api.ActionRequest{Type: "mutate", Target: hostileTarget, Payload: mustJSON(t, payload)}).ok(t)
	ts.call(t, "POST", "/v1/actions", a.Credential, api.ActionRequest{Type: "mutate", Target: "workspace/held/<svg onload=window.__pwned=1>", Payload: mustJSON(t, payload)}).must(t, http.StatusAccepted)
	// A denied action, whose reason quotes the target.
	ts.call(t, "POST", "/v1/actions", a.Credential, api.ActionRequest{Type: "mutate", Target: "secrets/<iframe src=javascript:window.__pwned=1>"}).must(t, http.StatusForbidden)
	// A session whose delta names hostile paths.
	ts.activeSession(t, ts.rootCred, "s-hostile", "", a.Credential)
	ts.call(t, "POST", "/v1/sessions/s-hostile/deltas", a.Credential, api.DeltaRequest{TurnID: "turn-1", Changes: []api.Change{
		{Path: "<img src=x onerror=window.__pwned=1>.md", Operation: "create", ContentHash: "sha256:" + strings.Repeat("ab", 32)}}}).must(t, http.StatusCreated)

	b := newBrowser(t, ts.srv.URL)
	b.signIn(ts.rootCred)
	b.eval(`window.__csp = []; document.addEventListener('securitypolicyviolation', e => window.__csp.push(e.violatedDirective)); true`, new(bool))

	b.view("holds")
	b.waitFor("the hostile hold", `document.querySelector('[data-hold]')`)
	b.click(`[data-hold] details summary`)
	holds := b.text("#view-holds")
	for _, want := range []string{"<svg onload=window.__pwned=1>", `\u202e`, "<script>"} {
		if !strings.Contains(holds, want) {
			t.Errorf("the holds view does not show %q as text:\n%s", want, holds)
		}
	}
	b.screenshot("holds")
	b.noInjection()

	b.view("history")
	b.waitFor("the history", `document.querySelectorAll('tr.event').length >= 8`)
	b.eval(`document.querySelectorAll('tr.event').forEach(r => r.click()); true`, new(bool))
	b.waitFor("every event's logged JSON", `[...document.querySelectorAll('pre.raw')].every(p => p.innerText !== 'Loading…')`)
	history := b.text("#view-history")
	for _, want := range []string{hostileTarget, "<iframe src=javascript:window.__pwned=1>", `\u202e`} {
		if !strings.Contains(history, want) {
			t.Errorf("the history does not show %q as text", want)
		}
	}
	b.screenshot("history")
	b.noInjection()

	b.view("agents")
	b.waitFor("the agents", `document.querySelectorAll('.actor').length >= 2`)
	agents := b.text("#view-agents")
	if !strings.Contains(agents, `<img src=x onerror="window.__pwned=1">`) || !strings.Contains(agents, `\u202egnp.exe`) {
		t.Errorf("the agents view does not show the hostile name as text:\n%s", agents)
	}
	b.screenshot("agents")
	b.noInjection()

	b.view("sessions")
	b.waitFor("the session's delta chain", `document.querySelector('ol.turns')`)
	b.click(`ol.turns button`)
	b.waitFor("the rollback preview", `document.querySelector('.rollback h3')`)
	if s := b.text("#view-sessions"); !strings.Contains(s, "<img src=x onerror=window.__pwned=1>.md") {
		t.Errorf("the session view does not show the hostile path as text:\n%s", s)
	}
	b.screenshot("sessions")
	b.noInjection()

	b.view("health")
	b.waitFor("the log health", `document.querySelector('#health-facts dd')`)
	b.noInjection()
	if n := b.dialogs.Load(); n != 0 {
		t.Errorf("%d dialogs opened", n)
	}
}

// TestConsoleAgentSeesWhatTheAPIShows: an agent signed in to the console
// sees its own holds and events only, is offered no answer, and the page's
// own request to approve (with a valid CSRF token) is refused by the API.
func TestConsoleAgentSeesWhatTheAPIShows(t *testing.T) {
	chromiumPath(t)
	ts := newTestServer(t)
	agentID, agentCred := ts.newAgent(t, agentSpec{name: "worker", trust: 0.8, energy: 1000, grants: workspace})
	otherID, otherCred := ts.newAgent(t, agentSpec{name: "other", trust: 0.8, energy: 1000, grants: workspace})
	for _, id := range []string{agentID, otherID} {
		ts.issue(t, ts.rootCred, api.EnvelopeRequest{Holder: id, Budget: 500, Grants: workspace,
			HoldOn: []api.Grant{{Pattern: "workspace/held/**", Actions: []string{"mutate"}}}, HoldTimeoutSecs: 600})
	}
	mine := decode[api.Receipt](t, ts.mutate(t, agentCred, "workspace/held/mine", "").must(t, http.StatusAccepted))
	ts.mutate(t, otherCred, "workspace/held/theirs", "").must(t, http.StatusAccepted)
	ts.mutate(t, otherCred, "workspace/other-only", "").ok(t)

	b := newBrowser(t, ts.srv.URL)
	b.signIn(agentCred)
	b.view("holds")
	b.waitFor("the agent's hold", fmt.Sprintf(`document.querySelector('[data-hold=%q]')`, mine.HoldID))
	if n := eval[int](b, `document.querySelectorAll('[data-hold]').length`); n != 1 {
		t.Errorf("the agent sees %d holds, want its own 1", n)
	}
	if n := eval[int](b, `document.querySelectorAll('[data-hold] button').length`); n != 0 {
		t.Errorf("the agent is offered %d answer buttons", n)
	}
	// The page's own session, token and all, cannot answer a hold.
	status, err := chromedp.Run(b.ctx, chromedp.Evaluate[int](fmt.Sprintf(`(async () => {
		const s = await (await fetch('/ui/session')).json();
		const r = await fetch('/v1/holds/%s/approve', {method: 'POST', headers: {'X-CSRF-Token': s.csrf, 'Content-Type': 'application/json'}, body: '{}'});
		return r.status; })()`, mine.HoldID), chromedp.EvalAwaitPromise))
	if err != nil || status != http.StatusForbidden {
		t.Errorf("the agent's console approving its own hold: status %d, err %v; want 403", status, err)
	}
	b.view("history")
	b.waitFor("the agent's history", `document.getElementById('history-more').innerText.includes('beginning') || document.getElementById('history-more').innerText.includes('No event')`)
	if h := b.text("#history-rows"); strings.Contains(h, "workspace/other-only") || strings.Contains(h, "log.genesis") {
		t.Errorf("the agent's history shows another actor's events:\n%s", h)
	}
	b.view("agents")
	b.waitFor("the agents view", `document.querySelector('.actor')`)
	if n := eval[int](b, `document.querySelectorAll('.actor').length`); n != 1 {
		t.Errorf("the agent sees %d actors, want itself", n)
	}
	b.screenshot("agent-holds")
	holds := decode[[]api.Hold](t, ts.call(t, "GET", "/v1/holds?status=pending", ts.rootCred, nil).ok(t))
	if len(holds) != 2 {
		t.Errorf("after the agent's try, pending holds = %+v", holds)
	}
}

func ptr[T any](v T) *T { return &v }

func mustJSON(t *testing.T, v any) json.RawMessage {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// TestConsoleControlsAgents: freeze, stop, quarantine and kill go through
// a confirmation step; cancel changes nothing, confirm is logged with the
// reason typed or chosen.
func TestConsoleControlsAgents(t *testing.T) {
	chromiumPath(t)
	ts := newTestServer(t)
	agentID, agentCred := ts.newAgent(t, agentSpec{name: "runaway", trust: 0.8, energy: 1000, grants: workspace})
	ts.issue(t, ts.rootCred, api.EnvelopeRequest{Holder: agentID, Budget: 500, Grants: workspace})
	b := newBrowser(t, ts.srv.URL)
	b.signIn(ts.rootCred)
	b.view("agents")
	b.waitFor("the agent's controls", `document.querySelector('.actor .controls')`)
	click := func(label string) {
		b.eval(fmt.Sprintf(`[...document.querySelectorAll('.actor .controls button')].find(x => x.innerText === %q).click(); true`, label), new(bool))
		b.waitFor("the confirmation", `document.getElementById('confirm').open`)
	}
	size := ts.size(t)
	click("Freeze")
	b.click("#confirm-cancel")
	b.waitFor("the dialog to close", `!document.getElementById('confirm').open`)
	if ts.size(t) != size {
		t.Fatal("cancelling the confirmation logged something")
	}
	click("Freeze")
	b.do(chromedp.SendKeys(chromedp.CSS("#confirm-reason"), "spending too fast"), chromedp.KeyEvent("\r"))
	b.waitFor("the agent to show frozen", `document.querySelector('.actor.frozen')`)
	a := decode[api.Actor](t, ts.call(t, "GET", "/v1/actors/"+agentID, ts.rootCred, nil).ok(t))
	if a.Status != "frozen" {
		t.Fatalf("after Freeze: status %q", a.Status)
	}
	if r := ts.mutate(t, agentCred, "workspace/x", ""); r.status != http.StatusForbidden {
		t.Errorf("a frozen agent's action: %v", r)
	}
	click("Unfreeze")
	b.do(chromedp.SendKeys(chromedp.CSS("#confirm-reason"), "reviewed"), chromedp.KeyEvent("\r"))
	b.waitFor("the agent to show active", `document.querySelector('.actor.active:not(.human) .controls')`)
	b.screenshot("agents")
	for _, label := range []string{"Stop", "Quarantine"} {
		b.eval(`document.getElementById('flash').innerText = ''; true`, new(bool))
		click(label)
		if label == "Stop" {
			b.do(chromedp.SendKeys(chromedp.CSS("#confirm-reason"), "pause please"))
		}
		b.click("#confirm-ok")
		b.waitFor(label+" to be logged", `document.getElementById('flash').innerText.includes('`+label+`: done')`)
	}
	for kind, want := range map[string]string{"signal.sent": "SIGSTOP", "quarantine.started": "manual"} {
		page := decode[api.HistoryPage](t, ts.call(t, "GET", "/v1/events?kind="+kind+"&limit=1", ts.rootCred, nil).ok(t))
		if len(page.Events) != 1 || !strings.Contains(string(page.Events[0].Event), want) {
			t.Errorf("%s after the console: %+v", kind, page.Events)
		}
	}
	click("Kill")
	b.eval(`document.getElementById('confirm-choice').value = 'behavioral_drift'; true`, new(bool))
	b.do(chromedp.SendKeys(chromedp.CSS("#confirm-reason"), "tried to exfiltrate"))
	b.click("#confirm-ok")
	b.waitFor("the kill to be logged", `document.getElementById('flash').innerText.includes('Kill: done')`)
	page := decode[api.HistoryPage](t, ts.call(t, "GET", "/v1/events?kind=agent.killed&limit=1", ts.rootCred, nil).ok(t))
	if len(page.Events) != 1 || !strings.Contains(string(page.Events[0].Event), "behavioral_drift") || !strings.Contains(string(page.Events[0].Event), "tried to exfiltrate") {
		t.Errorf("the kill event: %+v", page.Events)
	}
}

// TestConsoleHistoryScrollsAndUpdatesLive: the history loads page after
// page as the person scrolls down to the first event, filters apply, and a
// new event that matches appears at the top without a reload.
func TestConsoleHistoryScrollsAndUpdatesLive(t *testing.T) {
	chromiumPath(t)
	ts := newTestServer(t, func(c *kernel.Config) { c.DisableRateLimit = true })
	agentID, agentCred := ts.newAgent(t, agentSpec{name: "busy", trust: 0.8, energy: 100_000, grants: workspace})
	ts.issue(t, ts.rootCred, api.EnvelopeRequest{Holder: agentID, Budget: 50_000, Grants: workspace})
	for i := range 130 {
		ts.mutate(t, agentCred, fmt.Sprintf("workspace/f%03d", i), "").ok(t)
	}
	total := ts.size(t)
	b := newBrowser(t, ts.srv.URL)
	b.signIn(ts.rootCred)
	b.view("history")
	b.waitFor("the first page", `document.querySelectorAll('tr.event').length >= 50`)
	for range 10 {
		if eval[bool](b, `document.getElementById('history-more').innerText.includes('beginning')`) {
			break
		}
		b.eval(`document.getElementById('history-more').scrollIntoView(); true`, new(bool))
		time.Sleep(300 * time.Millisecond)
	}
	b.waitFor("the beginning of the log", `document.getElementById('history-more').innerText.includes('beginning')`)
	if n := eval[int](b, `document.querySelectorAll('tr.event').length`); uint64(n) != total {
		t.Errorf("scrolled to the beginning: %d rows, the log has %d events", n, total)
	}
	if first := eval[string](b, `document.querySelector('tr.event').dataset.index`); first != fmt.Sprint(total-1) {
		t.Errorf("the top row is event %s, want the newest, %d", first, total-1)
	}
	// Filter: one target prefix, mutates only.
	b.eval(`(() => { const f = document.getElementById('history-filters'); f.elements.target.value = 'workspace/f12'; f.elements.type.value = 'mutate'; return true })()`, new(bool))
	b.click(`#history-filters button[type=submit]`)
	b.waitFor("the filtered history", `document.getElementById('history-more').innerText.includes('beginning') && document.querySelectorAll('tr.event').length === 10`)
	// Live: a matching event appears on top, one that does not match does not.
	ts.mutate(t, agentCred, "workspace/other", "").ok(t)
	live := decode[api.Receipt](t, ts.mutate(t, agentCred, "workspace/f12-live", "").ok(t))
	b.waitFor("the live event", fmt.Sprintf(`document.querySelector('tr.event').dataset.index === '%d'`, live.Index))
	if n := eval[int](b, `document.querySelectorAll('tr.event').length`); n != 11 {
		t.Errorf("after one matching live event: %d rows, want 11", n)
	}
	b.screenshot("history")
	b.noInjection()
}

// TestConsoleSealedPayloadAndErasure: a person reads a sealed payload in
// the history's detail, erases its subject with two clicks, and then sees
// it erased; the logged bytes never held it.
func TestConsoleSealedPayloadAndErasure(t *testing.T) {
	chromiumPath(t)
	ctx := context.Background()
	ts := newTestServer(t)
	agent, _ := sealedAgent(t, ts, false, false)
	rc, err := agent.Submit(ctx, api.ActionRequest{Type: "create", Target: "workspace/crm/9.json",
		Payload: json.RawMessage(`{"email":"dana@example.org"}`), Subject: "customer-9"})
	if err != nil {
		t.Fatal(err)
	}
	b := newBrowser(t, ts.srv.URL)
	b.signIn(ts.rootCred)
	b.view("history")
	row := fmt.Sprintf(`tr.event[data-index="%d"]`, rc.Index)
	b.waitFor("the sealed action", `document.querySelector('`+row+`')`)
	b.click(row)
	b.waitFor("the opened payload", `(document.querySelector('`+row+` + tr.detail .sealed-payload')||{}).innerText?.includes('dana@example.org')`)
	if raw := b.text(row + ` + tr.detail pre.raw`); strings.Contains(raw, "dana@") {
		t.Errorf("the logged bytes hold the sealed payload: %s", raw)
	}
	b.screenshot("sealed")
	b.click(row + ` + tr.detail button.erase`)
	b.waitFor("the armed erase button", `document.querySelector('`+row+` + tr.detail button.erase.armed')`)
	if ts.k.Erased("customer-9") {
		t.Fatal("one click erased the subject")
	}
	b.click(row + ` + tr.detail button.erase.armed`)
	b.waitFor("the erasure", `document.body.innerText.includes('Subject customer-9 erased')`)
	if !ts.k.Erased("customer-9") {
		t.Fatal("the console's erasure did not reach the kernel")
	}
	b.waitFor("the history again", `document.querySelector('`+row+`')`)
	b.click(row)
	b.waitFor("the erased mark", `(document.querySelector('`+row+` + tr.detail .sealed')||{}).innerText?.includes('Erased')`)
	if strings.Contains(eval[string](b, `document.body.innerText`), "dana@example.org") {
		t.Error("the page still shows the erased payload")
	}
	b.noInjection()
}

// TestAttack_ConsoleApprovalRefusedOnRecheck: an overseer approves a hold
// whose agent was frozen meanwhile. The log holds a refusal, so the
// console must say the approval was refused and where the log holds it,
// never that it was approved.
func TestAttack_ConsoleApprovalRefusedOnRecheck(t *testing.T) {
	chromiumPath(t)
	ts := newTestServer(t)
	agentID, agentCred := ts.newAgent(t, agentSpec{name: "release-bot", trust: 0.8, energy: 1000, grants: workspace})
	ts.issue(t, ts.rootCred, api.EnvelopeRequest{Holder: agentID, Budget: 500, Grants: workspace,
		HoldOn: []api.Grant{{Pattern: "workspace/release/**", Actions: []string{"mutate"}}}})
	held := decode[api.Receipt](t, ts.mutate(t, agentCred, "workspace/release/v1", "").must(t, http.StatusAccepted))

	b := newBrowser(t, ts.srv.URL)
	b.signIn(ts.rootCred)
	b.view("holds")
	b.waitFor("the hold", fmt.Sprintf(`document.querySelector('[data-hold=%q]')`, held.HoldID))
	ts.call(t, "POST", "/v1/actors/"+agentID+"/status", ts.rootCred, api.StatusRequest{Status: "frozen", Reason: "review"}).ok(t)
	b.click(fmt.Sprintf(`[data-hold=%q] button.primary`, held.HoldID))
	b.waitFor("the refusal", `document.getElementById('flash').innerText.includes('not approved')`)
	holds := decode[[]api.Hold](t, ts.call(t, "GET", "/v1/holds", ts.rootCred, nil).ok(t))
	if len(holds) != 1 || holds[0].Status != "approve_failed" {
		t.Fatalf("holds %+v", holds)
	}
	flash := b.text("#flash")
	if want := fmt.Sprintf("logged at index %d", holds[0].AnsweredAt); !strings.Contains(flash, want) || !strings.Contains(flash, "frozen") {
		t.Fatalf("the console says %q, want the refusal and %q", flash, want)
	}
	b.waitFor("the inbox to empty", `!document.getElementById('holds-empty').hidden`)
}
