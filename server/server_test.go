package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/annal-dev/annal/api"
	"github.com/annal-dev/annal/client"
	"github.com/annal-dev/annal/kernel"
)

type testServer struct {
	k        *kernel.Kernel
	srv      *httptest.Server
	rootCred string
	root     *client.Client
}

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// newTestServer serves a new kernel over HTTP; configure, if given, may
// change its configuration first (rate limits, clocks).
func newTestServer(t testing.TB, configure ...func(*kernel.Config)) *testServer {
	t.Helper()
	cfg := kernel.DefaultConfig(t.TempDir())
	cfg.Logger = discardLogger()
	cfg.CheckpointInterval = 100 * time.Millisecond
	cfg.DisableProduction = true // the tests count entries
	for _, c := range configure {
		c(&cfg)
	}
	k, err := kernel.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(New(k, cfg.Logger))
	t.Cleanup(func() {
		srv.Close()
		if err := k.Close(); err != nil {
			t.Errorf("close kernel: %v", err)
		}
	})
	raw, err := os.ReadFile(k.RootCredentialPath())
	if err != nil {
		t.Fatal(err)
	}
	cred := strings.TrimSpace(string(raw))
	c, err := client.New(srv.URL, cred)
	if err != nil {
		t.Fatal(err)
	}
	return &testServer{k: k, srv: srv, rootCred: cred, root: c}
}

func (ts *testServer) size(t testing.TB) uint64 {
	t.Helper()
	info, err := ts.k.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return info.Size
}

func TestBadInputIsRefusedAndAppendsNothing(t *testing.T) {
	ts := newTestServer(t)
	good := `{"type":"mutate","target":"workspace/a","payload":{"x":1}}`
	for _, tc := range []struct {
		name   string
		auth   string
		body   []byte
		status int
	}{
		{"unauthenticated", "", []byte(good), http.StatusUnauthorized},
		{"wrong scheme", "Basic " + ts.rootCred, []byte(good), http.StatusUnauthorized},
		{"wrong credential", "Bearer annal_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", []byte(good), http.StatusUnauthorized},
		{"unknown type", "Bearer " + ts.rootCred, []byte(`{"type":"delete","target":"a"}`), http.StatusBadRequest},
		{"unknown field", "Bearer " + ts.rootCred, []byte(`{"type":"mutate","target":"a","_hold_approved":true}`), http.StatusBadRequest},
		{"invalid JSON", "Bearer " + ts.rootCred, []byte(`{"type":"mutate",`), http.StatusBadRequest},
		{"invalid UTF-8", "Bearer " + ts.rootCred, []byte("{\"type\":\"mutate\",\"target\":\"a\xff\"}"), http.StatusBadRequest},
		{"duplicate member", "Bearer " + ts.rootCred, []byte(`{"type":"mutate","type":"observe","target":"a"}`), http.StatusBadRequest},
		{"trailing data", "Bearer " + ts.rootCred, []byte(good + `{}`), http.StatusBadRequest},
		{"bad target", "Bearer " + ts.rootCred, []byte(`{"type":"mutate","target":"a//b"}`), http.StatusBadRequest},
		{"oversize body", "Bearer " + ts.rootCred, bytes.Repeat([]byte(" "), api.MaxActionBody+1), http.StatusRequestEntityTooLarge},
		{"oversize entry", "Bearer " + ts.rootCred, []byte(`{"type":"mutate","target":"a","payload":"` + strings.Repeat("x", 70000) + `"}`), http.StatusRequestEntityTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := ts.size(t)
			req, _ := http.NewRequest(http.MethodPost, ts.srv.URL+"/v1/actions", bytes.NewReader(tc.body))
			if tc.auth != "" {
				req.Header.Set("Authorization", tc.auth)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var e api.Error
			if err := json.NewDecoder(resp.Body).Decode(&e); err != nil {
				t.Fatalf("error body is not JSON: %v", err)
			}
			if resp.StatusCode != tc.status || e.Error == "" {
				t.Fatalf("status %d %q, want %d with a message", resp.StatusCode, e.Error, tc.status)
			}
			if after := ts.size(t); after != before {
				t.Fatalf("log grew from %d to %d on a refused request", before, after)
			}
		})
	}
}

func TestTileServingHeadersAndPaths(t *testing.T) {
	ts := newTestServer(t)
	ctx := context.Background()
	for i := 0; i < 3; i++ {
		if _, err := ts.root.Submit(ctx, api.ActionRequest{Type: "observe", Target: "workspace"}); err != nil {
			t.Fatal(err)
		}
	}
	r, err := ts.root.SubmitAndWait(ctx, api.ActionRequest{Type: "observe", Target: "workspace"})
	if err != nil || r.Proof == "" {
		t.Fatalf("wait=published: %v %+v", err, r)
	}
	get := func(path string, hdr map[string]string) *http.Response {
		req, _ := http.NewRequest(http.MethodGet, ts.srv.URL+path, nil)
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		// Ask for no transparent decompression so headers are seen as sent.
		resp, err := (&http.Client{Transport: &http.Transport{DisableCompression: true}}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	cp := get("/checkpoint", nil)
	if cp.StatusCode != 200 || cp.Header.Get("Content-Type") != "text/plain; charset=utf-8" || cp.Header.Get("Cache-Control") != "public, max-age=1" {
		t.Fatalf("checkpoint: %d %v", cp.StatusCode, cp.Header)
	}
	size := ts.size(t)
	partial := get("/tile/0/000.p/"+itoa(size), nil)
	if partial.StatusCode != 200 || partial.Header.Get("Content-Type") != "application/octet-stream" {
		t.Fatalf("partial tile: %d %v", partial.StatusCode, partial.Header)
	}
	if body, _ := io.ReadAll(partial.Body); len(body) != int(size)*32 {
		t.Fatalf("partial tile of width %d has %d bytes", size, len(body))
	}
	bundle := get("/tile/entries/000.p/"+itoa(size), map[string]string{"Accept-Encoding": "gzip"})
	if bundle.StatusCode != 200 || bundle.Header.Get("Content-Encoding") != "gzip" {
		t.Fatalf("entry bundle: %d %v", bundle.StatusCode, bundle.Header)
	}
	for _, p := range []string{
		"/tile/0/0.p/" + itoa(size),    // not zero-padded
		"/tile/00/000.p/" + itoa(size), // leading zero in level
		"/tile/0/000.p/0" + itoa(size), // leading zero in width
		"/tile/entries/../.state/treeState",
		"/tile/0/x000/../.state",
		"/tile/64/000",
		"/.state/treeState",
	} {
		if resp := get(p, nil); resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s = %d, want 404", p, resp.StatusCode)
		}
	}
}

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }

// readBody reads a body of a known length in one buffer of that length,
// and still refuses one shorter than its length says, or longer than the
// limit, as the limit reader did.
func TestReadBody_KnownLength(t *testing.T) {
	read := func(body string, length, limit int64) ([]byte, error) {
		r := httptest.NewRequest(http.MethodPost, "/v1/actions", strings.NewReader(body))
		r.ContentLength = length
		return readBody(httptest.NewRecorder(), r, limit)
	}
	if got, err := read(`{"a":1}`, 7, 64); err != nil || string(got) != `{"a":1}` || cap(got) != 7 {
		t.Errorf("a whole body: %q (cap %d), %v", got, cap(got), err)
	}
	if got, err := read(``, 0, 64); err != nil || len(got) != 0 {
		t.Errorf("an empty body: %q, %v", got, err)
	}
	if _, err := read(`{"a"`, 7, 64); !errors.Is(err, kernel.ErrInvalid) {
		t.Errorf("a body shorter than its length: %v, want ErrInvalid", err)
	}
	if _, err := read(strings.Repeat("x", 65), 65, 64); !errors.Is(err, kernel.ErrTooLarge) {
		t.Errorf("a body past the limit: %v, want ErrTooLarge", err)
	}
	if got, err := read(`{"b":2}`, -1, 64); err != nil || string(got) != `{"b":2}` {
		t.Errorf("a body of unknown length: %q, %v", got, err)
	}
	if _, err := read(strings.Repeat("x", 65), -1, 64); !errors.Is(err, kernel.ErrTooLarge) {
		t.Errorf("a body of unknown length past the limit: %v, want ErrTooLarge", err)
	}
}
