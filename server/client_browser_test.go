package server

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/annal-dev/annal/api"
)

// The TypeScript client (clients/typescript) in a real Chromium, from a
// page on another origin than annald's (allowed by AllowOrigins): it
// submits an action as an agent and verifies its entry offline with
// WebCrypto, reads a denial's stage, gate and index from the typed error,
// verifies an ML-DSA-44 witness cosignature (@noble/post-quantum) and
// makes an Ed25519 signing key. The page loads the package as a browser
// does without a bundler: ES modules through an import map, with
// canonicalize (a CommonJS module) wrapped as one, as a bundler would.
// The package's dependencies come from its node_modules (`npm ci` in
// clients/typescript, which `bash .ci/test` runs first).
func TestTypeScriptClientInTheBrowser(t *testing.T) {
	pkg, err := filepath.Abs("../clients/typescript")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(pkg, "node_modules", "@noble", "post-quantum")); err != nil {
		if os.Getenv("ANNAL_REQUIRE_BROWSER") != "" {
			t.Fatalf("clients/typescript has no node_modules (npm ci there; bash .ci/test does): %v", err)
		}
		t.Skip("clients/typescript has no node_modules: `npm ci` there (bash .ci/test does)")
	}
	chromiumPath(t)
	ts := newTestServer(t)
	page := httptest.NewServer(clientPage(t, pkg))
	t.Cleanup(page.Close)
	s := New(ts.k, discardLogger())
	if err := s.AllowOrigins(page.URL); err != nil {
		t.Fatal(err)
	}
	annald := httptest.NewServer(s)
	t.Cleanup(annald.Close)
	create := []api.Grant{{Pattern: "workspace/**", Actions: []string{"create"}}}
	id, cred := ts.newAgent(t, agentSpec{name: "browser", trust: 0.8, energy: 10_000, grants: create})
	ts.issue(t, ts.rootCred, api.EnvelopeRequest{Holder: id, Budget: 5000, Grants: create})

	b := newBrowser(t, ts.srv.URL)
	b.do(chromedp.Navigate(fmt.Sprintf("%s/index.html#%s|%s|%s", page.URL, annald.URL, cred, ts.k.VerifierKey())))
	b.waitFor("the page's checks", `window.__result || window.__error`)
	if msg := eval[string](b, `window.__error || ""`); msg != "" {
		t.Fatalf("in the browser: %s", msg)
	}
	got := eval[map[string]any](b, `window.__result`)
	size := ts.size(t)
	if idx, ok := got["index"].(float64); !ok || uint64(idx) >= size {
		t.Fatalf("the verified entry: %v (log size %d)", got, size)
	}
	ev := ts.event(t, uint64(got["index"].(float64)))
	if ev.Action.Target != "workspace/browser.md" {
		t.Fatalf("the verified entry is %+v", ev.Action)
	}
	if got["stage"] == "" || got["gate"] == "" || got["denialIndex"] == nil {
		t.Fatalf("the denial as the page read it: %v", got)
	}
	if denied := ts.event(t, uint64(got["denialIndex"].(float64))); denied.Kind != "action.denied" {
		t.Fatalf("the denial's index names %s", denied.Kind)
	}
	if got["cosigners"] != "pq" || !strings.HasPrefix(got["signingKey"].(string), "browser+") {
		t.Fatalf("the page's other checks: %v", got)
	}
	// The same page from an origin annald does not answer (localhost is
	// another origin than 127.0.0.1): the browser keeps the answer from it.
	b.do(chromedp.Navigate(strings.Replace(page.URL, "127.0.0.1", "localhost", 1) + "/index.html#" + annald.URL + "|" + cred))
	b.waitFor("the other origin's request", `window.__result`)
	if got := eval[map[string]any](b, `window.__result`); got["refused"] != true || !strings.Contains(fmt.Sprint(got["error"]), "Failed to fetch") {
		t.Fatalf("a page of an origin annald does not allow read its answer: %v", got)
	}
}

// clientPage serves the test page, the package's sources, its
// dependencies, the ML-DSA-44 fixture, and canonicalize wrapped as an ES
// module.
func clientPage(t *testing.T, pkg string) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /src/", http.FileServer(http.Dir(pkg)))
	mux.Handle("GET /node_modules/@noble/", http.FileServer(http.Dir(pkg)))
	mux.Handle("GET /test/fixtures/", http.FileServer(http.Dir(pkg)))
	mux.HandleFunc("GET /shim/canonicalize.js", func(w http.ResponseWriter, r *http.Request) {
		cjs, err := os.ReadFile(filepath.Join(pkg, "node_modules", "canonicalize", "lib", "canonicalize.js"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "text/javascript")
		fmt.Fprintf(w, "const module = { exports: {} };\n%s\nexport default module.exports;\n", cjs)
	})
	mux.HandleFunc("GET /index.html", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, clientPageHTML)
	})
	return mux
}

const clientPageHTML = `<!doctype html>
<meta charset="utf-8">
<script type="importmap">
{"imports": {"@annal/client": "/src/index.js", "canonicalize": "/shim/canonicalize.js", "@noble/": "/node_modules/@noble/"}}
</script>
<script type="module">
import { AnnalClient, AnnalError, generateSigningKey, parsePolicy } from "@annal/client";
const [annald, credential, vkey] = decodeURIComponent(location.hash.slice(1)).split("|");
if (!vkey) { // a page of an origin annald does not answer: its request must fail
  new AnnalClient(annald, { credential }).info().then(() => { window.__result = { refused: false }; }, (e) => { window.__result = { refused: true, error: String(e) }; });
} else try {
  const annal = new AnnalClient(annald, { credential });
  const receipt = await annal.submit({ type: "create", target: "workspace/browser.md", payload: { text: "from a browser" } });
  const { result } = await annal.fetchAndVerify(receipt.index, vkey, { signal: AbortSignal.timeout(30000) });
  let denial;
  try {
    await annal.submit({ type: "create", target: "system/x" });
  } catch (e) {
    if (!(e instanceof AnnalError)) throw e;
    denial = e;
  }
  if (!denial) throw new Error("a denied action was not refused");
  const f = await (await fetch("/test/fixtures/mldsa44.json")).json();
  const policy = await parsePolicy("log " + f.log_verifier_key + "\nwitness pq " + f.witness_verifier_key + "\nquorum pq\n");
  const { cosigners } = await policy.openCheckpoint(f.cosigned_checkpoint);
  const key = await generateSigningKey("browser");
  window.__result = { index: Number(result.index), stage: denial.stage, gate: denial.gate,
    denialIndex: denial.denialIndex === undefined ? null : Number(denial.denialIndex),
    cosigners: cosigners.join(","), signingKey: key.verifierKey };
} catch (e) {
  window.__error = String(e && e.stack || e);
}
</script>
`
