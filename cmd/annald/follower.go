package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/annal-dev/annal/api"
	"github.com/annal-dev/annal/kernel"
	"github.com/annal-dev/annal/server"
)

// followInterval is how often a follower folds what the log integrated
// (Tessera's AWS driver integrates about once a second): a follower's
// history and stream lag the log by about this much more than the
// holder's. A read of one entry, a proof or a tile reads the log itself
// and does not lag.
const followInterval = 250 * time.Millisecond

// followReadyWithin is how recently a follower must have read the log to
// say it is ready (GET /v1/readyz 200): a follower that cannot reach the
// database or the bucket serves stale reads, and a balancer should send
// requests elsewhere.
const followReadyWithin = 5 * time.Second

// followerAPI is what a follower serves: every read from its own kernel
// (kernel.OpenFollower), every write forwarded to the lease holder.
type followerAPI struct {
	k     *kernel.Kernel
	local *server.Server
	fw    *forwarder
	// reading counts the reads being served from k, which the takeover
	// lets finish before it closes k.
	reading atomic.Int64
}

// reads are the methods a follower answers itself; every other request
// asks for a decision, which only the lease holder takes. A read whose
// credential the follower does not know goes to the holder too: it may
// be new (an agent created a moment ago through another kernel), and the
// holder answers it, or says 401.
var reads = map[string]bool{http.MethodGet: true, http.MethodHead: true, http.MethodOptions: true}

func (a *followerAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Header.Get(ForwardedHeader) != "":
		notHolder(w, a.fw.leader().Holder)
	case r.URL.Path == "/v1/readyz" || r.URL.Path == "/v1/healthz":
		a.ready(w)
	case reads[r.Method] && !a.local.UnknownCredential(r):
		a.reading.Add(1)
		defer a.reading.Add(-1)
		if !askHolderWhenMissing(r) {
			a.local.ServeHTTP(w, r)
			return
		}
		here := &missingHere{ResponseWriter: w}
		a.local.ServeHTTP(here, r)
		if here.missing {
			a.fw.ServeHTTP(w, r)
		}
	default:
		a.fw.ServeHTTP(w, r)
	}
}

// askHolderWhenMissing reports whether a read the follower answers 404
// goes to the holder instead: a lookup by id in the API (an actor, a hold,
// an envelope, a session, a saga …) that a client makes right after a
// write the holder acknowledged — a hold it was just told to wait for —
// may name what the follower has not folded yet (about 1.25 s behind).
// The holder answers it, or says 404 itself.
func askHolderWhenMissing(r *http.Request) bool {
	return (r.Method == http.MethodGet || r.Method == http.MethodHead) && strings.HasPrefix(r.URL.Path, "/v1/") &&
		r.URL.Path != "/v1/events/stream"
}

// missingHere passes a local answer through unless its status is 404,
// which it drops, header and body, so that the request can be asked of
// the holder instead.
type missingHere struct {
	http.ResponseWriter
	wrote, missing bool
}

func (w *missingHere) WriteHeader(status int) {
	if w.wrote {
		return
	}
	w.wrote = true
	if status == http.StatusNotFound {
		w.missing = true
		clear(w.ResponseWriter.Header())
		return
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *missingHere) Write(b []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	if w.missing {
		return len(b), nil
	}
	return w.ResponseWriter.Write(b)
}

func (w *missingHere) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok && !w.missing {
		f.Flush()
	}
}

func (w *missingHere) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// followerReadiness is a follower's answer to GET /v1/readyz and healthz.
type followerReadiness struct {
	api.Readiness
	Follower    bool   `json:"follower"`
	LeaseHolder string `json:"lease_holder,omitempty"`
	Folded      uint64 `json:"folded"`
}

// ready: a follower is ready while it follows the log (it read the log
// within followReadyWithin): it serves reads, and forwards writes.
func (a *followerAPI) ready(w http.ResponseWriter) {
	st := a.k.Followed()
	out := followerReadiness{Follower: true, LeaseHolder: a.fw.leader().Holder, Folded: st.Folded}
	status := http.StatusOK
	switch age := time.Since(st.At); {
	case st.At.IsZero():
		status, out.Reason = http.StatusServiceUnavailable, "follower: it has not read the log yet"
	case age > followReadyWithin:
		status, out.Reason = http.StatusServiceUnavailable, fmt.Sprintf("follower: it last read the log %v ago: %v", age.Round(time.Millisecond), st.Err)
	default:
		out.Ready = true
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	if status != http.StatusOK {
		w.Header().Set("Retry-After", "1")
	}
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(out)
}

// notHolder answers a forwarded request that reached a kernel which does
// not hold the lease (the holder changed on the way): 503, retry.
func notHolder(w http.ResponseWriter, holder string) {
	forwardFailure(w, http.StatusServiceUnavailable, api.Error{Retryable: true,
		Error: fmt.Sprintf("a forwarded request reached a kernel that does not hold the write lease (held by %q): it is not forwarded twice", holder)}, true)
}

// runFollower opens a follower on the data folder and serves it at fr
// until ctx ends: reads from its state, writes forwarded by fw. It closes
// the follower before it returns, so that the writing kernel can open the
// data folder.
func runFollower(ctx context.Context, f serveFlags, cfg kernel.Config, tracer trace.Tracer, logger *slog.Logger, fr *front, fw *forwarder, takingOver http.Handler) error {
	k, err := kernel.OpenFollower(ctx, cfg)
	if err != nil {
		return err
	}
	defer func() {
		if err := k.Close(); err != nil {
			logger.Warn("follower: close", "err", err)
		}
	}()
	local, err := newAPIServer(k, f, tracer, logger, fr.fast)
	if err != nil {
		return err
	}
	fa := &followerAPI{k: k, local: local, fw: fw}
	handler := withMCP(fa)
	fr.current.Store(&handler)
	err = k.Follow(ctx, followInterval)
	// From here until the writing kernel serves, requests hear that this
	// kernel is taking over (503, Retry-After), and the reads under way
	// get a moment to finish before the follower closes (a live stream is
	// cut then).
	fr.current.Store(&takingOver)
	for deadline := time.Now().Add(readsDrain); fa.reading.Load() > 0 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	return err
}

// readsDrain bounds how long a takeover waits for a follower's reads.
const readsDrain = time.Second
