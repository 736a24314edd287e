package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/annal-dev/annal/api"
	"github.com/annal-dev/annal/kernel"
)

// ForwardedHeader marks a request a follower forwarded to the lease
// holder, naming the follower. A kernel that does not hold the lease
// answers such a request 503 with Retry-After rather than forward it
// again: a request goes through at most one hop, and two kernels that each
// believe the other holds the lease cannot pass it back and forth.
const ForwardedHeader = "Annal-Forwarded-By"

// forwarder sends the requests a follower cannot decide (the writes) to
// the lease holder's advertised URL, and its answer back unchanged.
//
// What the caller hears when the holder does not answer:
//   - no holder known, its lease expired, or its URL unreachable before
//     the request was written (a refused or timed-out connection): 503
//     with Retry-After and "retryable": nothing was done, send again;
//   - the connection broke after the request was written: 503 with
//     "outcome_unknown" and no Retry-After, as the kernel answers a write
//     whose entry may be logged: look the entry up before sending again.
type forwarder struct {
	// holder reads the lease's holder and its URL (Leaders.Current).
	holder  func(context.Context) (kernel.Leader, error)
	self    string // this kernel's name in the lease
	client  *http.Client
	logger  *slog.Logger
	maxBody int64

	current atomic.Pointer[readLeader]
	// refreshing serializes the refreshes a request asks for.
	refreshing sync.Mutex
}

// forwardDial bounds the connection to the holder: past it nothing was
// sent, and the caller is told to retry.
const forwardDial = 2 * time.Second

func newForwarder(holder func(context.Context) (kernel.Leader, error), self string, maxBody int64, logger *slog.Logger) *forwarder {
	transport := &http.Transport{
		Proxy:               nil, // kernels reach each other directly
		DialContext:         (&net.Dialer{Timeout: forwardDial, KeepAlive: 30 * time.Second}).DialContext,
		TLSHandshakeTimeout: forwardDial,
		MaxIdleConnsPerHost: 256,
		IdleConnTimeout:     90 * time.Second,
		// The holder's answer is passed on as it comes: no decompression.
		DisableCompression: true,
	}
	return &forwarder{holder: holder, self: self, logger: logger, maxBody: maxBody,
		client: &http.Client{Transport: transport, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// readLeader is the holder as last read, and when, by this kernel's
// clock, its lease expires unless renewed.
type readLeader struct {
	kernel.Leader
	expires time.Time
}

// leader is the holder last read (the zero Leader before any read), its
// ExpiresIn counted from now.
func (fw *forwarder) leader() kernel.Leader {
	if l := fw.current.Load(); l != nil {
		out := l.Leader
		out.ExpiresIn = time.Until(l.expires)
		return out
	}
	return kernel.Leader{}
}

// refresh reads the lease's holder and its URL again.
func (fw *forwarder) refresh(ctx context.Context) (kernel.Leader, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	read := time.Now()
	l, err := fw.holder(ctx)
	if err != nil {
		return fw.leader(), err
	}
	fw.current.Store(&readLeader{Leader: l, expires: read.Add(l.ExpiresIn)})
	return l, nil
}

// keepFresh refreshes the holder every interval until ctx ends: a
// takeover is seen within about interval.
func (fw *forwarder) keepFresh(ctx context.Context, interval time.Duration) {
	for {
		if _, err := fw.refresh(ctx); err != nil && ctx.Err() == nil {
			fw.logger.Debug("follower: could not read the lease holder", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(interval):
		}
	}
}

// liveLeader is the holder a request goes to: the one last read if its
// lease is live, else read again once.
func (fw *forwarder) liveLeader(ctx context.Context) (kernel.Leader, error) {
	if l := fw.leader(); l.Live() && l.Holder != fw.self {
		return l, nil
	}
	fw.refreshing.Lock()
	defer fw.refreshing.Unlock()
	l, err := fw.refresh(ctx)
	switch {
	case err != nil:
		return l, err
	case l.Holder == fw.self:
		return l, errors.New("this kernel is taking the write lease over")
	case !l.Live():
		return l, fmt.Errorf("no kernel holds the write lease now (last holder %q): a follower is taking it over", l.Holder)
	}
	return l, nil
}

// hopHeaders are a connection's own, never passed on (RFC 9110 §7.6.1).
var hopHeaders = []string{"Connection", "Keep-Alive", "Proxy-Connection", "Proxy-Authenticate", "Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

func copyHeaders(dst, src http.Header) {
	for k, v := range src {
		dst[k] = append([]string(nil), v...)
	}
	for _, c := range src.Values("Connection") {
		for _, name := range strings.Split(c, ",") {
			dst.Del(strings.TrimSpace(name))
		}
	}
	for _, h := range hopHeaders {
		dst.Del(h)
	}
}

// ServeHTTP forwards r to the holder. The body is read whole first (at
// most maxBody, the largest body any route of the holder takes; each route
// then applies its own limit), so that a request is either sent whole or
// not at all, and a failure before it was written is known to have done
// nothing.
func (fw *forwarder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, fw.maxBody))
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		forwardFailure(w, http.StatusRequestEntityTooLarge, api.Error{Error: fmt.Sprintf("the body is larger than %d bytes", fw.maxBody)}, false)
		return
	} else if err != nil {
		forwardFailure(w, http.StatusBadRequest, api.Error{Error: "reading the body: " + err.Error()}, false)
		return
	}
	l, err := fw.liveLeader(r.Context())
	if err != nil {
		fw.retryLater(w, "cannot forward the write to the lease holder: "+err.Error())
		return
	}
	resp, wrote, err := fw.send(r, l, body)
	if err != nil && !wrote && r.Context().Err() == nil {
		// Nothing was sent: the holder this follower last read may have
		// lost the lease since (a takeover). If another kernel holds it
		// now, the request goes there, once.
		if again, rerr := fw.refresh(r.Context()); rerr == nil && again.Live() && again.Holder != l.Holder && again.Holder != fw.self {
			l = again
			resp, wrote, err = fw.send(r, l, body)
		}
	}
	if err != nil {
		fw.failed(w, r, l, err, wrote)
		return
	}
	defer resp.Body.Close()
	copyHeaders(w.Header(), resp.Header)
	w.WriteHeader(resp.StatusCode)
	if _, err := io.Copy(flushingWriter{w}, resp.Body); err != nil {
		fw.logger.Warn("follower: the lease holder's answer broke off", "holder", l.Holder, "path", r.URL.Path, "err", err)
	}
}

// send sends r, with body, to the holder l; wrote says whether any of it
// was written to the connection.
func (fw *forwarder) send(r *http.Request, l kernel.Leader, body []byte) (resp *http.Response, wrote bool, err error) {
	out, err := http.NewRequestWithContext(r.Context(), r.Method, strings.TrimSuffix(l.URL, "/")+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		return nil, false, err
	}
	copyHeaders(out.Header, r.Header)
	out.Header.Set(ForwardedHeader, fw.self)
	var written atomic.Bool
	out = out.WithContext(httptrace.WithClientTrace(out.Context(), &httptrace.ClientTrace{WroteHeaders: func() { written.Store(true) }}))
	resp, err = fw.client.Do(out)
	return resp, written.Load(), err
}

// failed answers a request whose forwarding failed: retry if nothing was
// written to the holder, else the outcome is unknown (a write).
func (fw *forwarder) failed(w http.ResponseWriter, r *http.Request, l kernel.Leader, err error, wrote bool) {
	if r.Context().Err() != nil {
		return // the caller left
	}
	fw.current.Store(&readLeader{}) // read the holder again next time
	if !wrote {
		fw.retryLater(w, fmt.Sprintf("the lease holder %s at %s could not be reached: %v", l.Holder, l.URL, err))
		return
	}
	fw.logger.Warn("follower: the connection to the lease holder broke after the request was sent", "holder", l.Holder, "path", r.URL.Path, "err", err)
	forwardFailure(w, http.StatusServiceUnavailable, api.Error{OutcomeUnknown: true,
		Error: fmt.Sprintf("%v: the connection to the lease holder %s broke after the request was sent (%v); look the entry up before sending it again", kernel.ErrOutcomeUnknown, l.Holder, err)}, false)
}

// retryLater answers 503 with Retry-After: nothing was done.
func (fw *forwarder) retryLater(w http.ResponseWriter, why string) {
	forwardFailure(w, http.StatusServiceUnavailable, api.Error{Error: why, Retryable: true}, true)
}

func forwardFailure(w http.ResponseWriter, status int, body api.Error, retryAfter bool) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	if retryAfter {
		w.Header().Set("Retry-After", "1")
	}
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(body)
}

// flushingWriter flushes each write, so that an answer that streams (a
// long poll, server-sent events) reaches the caller as it comes.
type flushingWriter struct{ w http.ResponseWriter }

func (f flushingWriter) Write(p []byte) (int, error) {
	n, err := f.w.Write(p)
	if err == nil {
		_ = http.NewResponseController(f.w).Flush()
	}
	return n, err
}
