package witness

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Content types of the witness's answers.
const (
	// TLogSizeContentType is the Content-Type of a 409 answer, exactly as
	// c2sp.org/tlog-witness names it (clients compare it byte for byte).
	TLogSizeContentType = "text/x.tlog.size"
	// textContentType is used for cosignatures, checkpoints and errors.
	textContentType = "text/plain; charset=utf-8"
)

// Handler serves the witness over HTTP:
//
//	POST /add-checkpoint                     c2sp.org/tlog-witness
//	GET  /<hex SHA-256(origin)>/checkpoint   the latest cosigned checkpoint
//	GET  /evidence                           the evidence found (JSON []EvidenceRecord)
//	GET  /evidence/<ID>                      one evidence file
//	GET  /metrics                            Prometheus metrics
func (w *Witness) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /add-checkpoint", w.serveAddCheckpoint)
	// One pattern for both two-segment paths: "/{id}/checkpoint" and
	// "/evidence/{id}" would both match "/evidence/checkpoint", which
	// ServeMux refuses. A log ID is 64 hex digits, never "evidence".
	mux.HandleFunc("GET /{first}/{second}", func(rw http.ResponseWriter, r *http.Request) {
		switch {
		case r.PathValue("first") == "evidence":
			w.serveEvidenceFile(rw, r.PathValue("second"))
		case r.PathValue("second") == "checkpoint":
			w.serveCheckpoint(rw, r.PathValue("first"))
		default:
			http.NotFound(rw, r)
		}
	})
	mux.HandleFunc("GET /evidence", func(rw http.ResponseWriter, r *http.Request) {
		list, err := w.store.Evidence()
		if err != nil {
			w.log.Error("read evidence", "error", err)
			writeError(rw, http.StatusInternalServerError, errors.New("internal error; see the witness's log"))
			return
		}
		writeJSON(rw, list)
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(w.metrics.registry, promhttp.HandlerOpts{}))
	return mux
}

// serveEvidenceFile answers one evidence file, exactly as stored.
func (w *Witness) serveEvidenceFile(rw http.ResponseWriter, id string) {
	file, err := w.store.EvidenceFile(id)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		writeError(rw, http.StatusNotFound, err)
		return
	case err != nil:
		w.log.Error("read evidence", "evidence_id", id, "error", err)
		writeError(rw, http.StatusInternalServerError, errors.New("internal error; see the witness's log"))
		return
	}
	rw.Header().Set("Content-Type", "application/json")
	rw.Write(file)
}

// writeJSON answers v as JSON; a nil slice is written as [].
func writeJSON[T any](rw http.ResponseWriter, v []T) {
	if v == nil {
		v = []T{}
	}
	rw.Header().Set("Content-Type", "application/json")
	json.NewEncoder(rw).Encode(v)
}

func (w *Witness) serveAddCheckpoint(rw http.ResponseWriter, r *http.Request) {
	start := time.Now()
	status := w.answerAddCheckpoint(rw, r)
	w.metrics.requests.WithLabelValues(strconv.Itoa(status)).Inc()
	w.metrics.latency.WithLabelValues(strconv.Itoa(status)).Observe(time.Since(start).Seconds())
}

func (w *Witness) answerAddCheckpoint(rw http.ResponseWriter, r *http.Request) int {
	body, err := readBody(rw, r)
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		return writeError(rw, http.StatusRequestEntityTooLarge, fmt.Errorf("%w: body is more than %d bytes", ErrRequestTooLarge, MaxRequestSize))
	case err != nil:
		return writeError(rw, http.StatusBadRequest, fmt.Errorf("read request body: %w", err))
	}
	cosignature, err := w.AddCheckpoint(r.Context(), body)
	var conflict *ConflictError
	switch {
	case err == nil:
		rw.Header().Set("Content-Type", textContentType)
		// Framed by its length: an answer with an ML-DSA-44 line is past
		// net/http's 2 KiB buffer, which would otherwise send it chunked.
		rw.Header().Set("Content-Length", strconv.Itoa(len(cosignature)))
		rw.WriteHeader(http.StatusOK)
		rw.Write(cosignature)
		return http.StatusOK
	case errors.As(err, &conflict):
		rw.Header().Set("Content-Type", TLogSizeContentType)
		rw.WriteHeader(http.StatusConflict)
		fmt.Fprintf(rw, "%d\n", conflict.StoredSize)
		return http.StatusConflict
	case errors.Is(err, ErrRequestTooLarge):
		return writeError(rw, http.StatusRequestEntityTooLarge, err)
	case errors.Is(err, ErrMalformedRequest):
		return writeError(rw, http.StatusBadRequest, err)
	case errors.Is(err, ErrUnknownLog):
		return writeError(rw, http.StatusNotFound, err)
	case errors.Is(err, ErrUntrustedCheckpoint):
		return writeError(rw, http.StatusForbidden, err)
	case errors.Is(err, ErrInconsistent):
		return writeError(rw, http.StatusUnprocessableEntity, err)
	case errors.Is(err, ErrBusy):
		rw.Header().Set("Retry-After", "1")
		return writeError(rw, http.StatusTooManyRequests, err)
	case errors.Is(err, ErrClosed):
		return writeError(rw, http.StatusServiceUnavailable, err)
	case r.Context().Err() != nil:
		// The client has gone; nobody reads this answer.
		return 499
	}
	w.log.Error("add-checkpoint failed", "error", err)
	return writeError(rw, http.StatusInternalServerError, errors.New("internal error; see the witness's log"))
}

// readBody reads the request's body, at most MaxRequestSize bytes (more
// is a *http.MaxBytesError), into one buffer sized by its Content-Length
// when it has one (io.ReadAll would start at 512 bytes and grow), up to
// presizeLimit: a Content-Length is a claim, and memory is taken for it
// before the bytes come.
func readBody(rw http.ResponseWriter, r *http.Request) ([]byte, error) {
	const presizeLimit = 16 << 10
	size := int64(0)
	if r.ContentLength > 0 {
		size = min(r.ContentLength, presizeLimit)
	}
	buf := bytes.NewBuffer(make([]byte, 0, size+bytes.MinRead))
	_, err := buf.ReadFrom(http.MaxBytesReader(rw, r.Body, MaxRequestSize))
	return buf.Bytes(), err
}

// serveCheckpoint answers the latest cosigned checkpoint of the origin
// whose SHA-256 is the path's lowercase hex id.
func (w *Witness) serveCheckpoint(rw http.ResponseWriter, idText string) {
	raw, err := hex.DecodeString(idText)
	if err != nil || len(raw) != 32 || hex.EncodeToString(raw) != idText {
		writeError(rw, http.StatusNotFound, fmt.Errorf("%q is not a log ID: want the lowercase hex SHA-256 of a log origin", abbreviate(idText)))
		return
	}
	cp, err := w.store.Latest([32]byte(raw))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		writeError(rw, http.StatusNotFound, fmt.Errorf("this witness has cosigned no checkpoint for log ID %s", idText))
		return
	case err != nil:
		w.log.Error("read latest checkpoint", "log_id", idText, "error", err)
		writeError(rw, http.StatusInternalServerError, errors.New("internal error; see the witness's log"))
		return
	}
	served, err := w.servedNote([32]byte(raw), cp)
	if err != nil {
		w.log.Error("cosign the latest checkpoint", "log_id", idText, "error", err)
		writeError(rw, http.StatusInternalServerError, errors.New("internal error; see the witness's log"))
		return
	}
	rw.Header().Set("Content-Type", textContentType)
	// The answer changes with every cosignature: caches must revalidate.
	rw.Header().Set("Cache-Control", "no-cache")
	rw.Write(served)
}

func writeError(rw http.ResponseWriter, status int, err error) int {
	rw.Header().Set("Content-Type", textContentType)
	rw.Header().Set("X-Content-Type-Options", "nosniff")
	rw.WriteHeader(status)
	fmt.Fprintln(rw, err.Error())
	return status
}

// metrics are the witness's Prometheus metrics, in a registry of its own so
// that several witnesses can run in one process (tests, benchmarks).
type metrics struct {
	registry  *prometheus.Registry
	requests  *prometheus.CounterVec
	latency   *prometheus.HistogramVec
	groupSize prometheus.Histogram
	// evidence counts new evidence files, by source.
	evidence *prometheus.CounterVec
	// gossipChecks counts gossip checks, by result.
	gossipChecks *prometheus.CounterVec
}

func newMetrics(store *Store, log *slog.Logger) *metrics {
	m := &metrics{
		registry: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "annal_witness_add_checkpoint_requests_total",
			Help: "add-checkpoint requests answered, by HTTP status code.",
		}, []string{"code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "annal_witness_add_checkpoint_seconds",
			Help:    "Time to answer an add-checkpoint request, durable commit included, by HTTP status code.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
		}, []string{"code"}),
		groupSize: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "annal_witness_commit_group_size",
			Help:    "State changes committed together in one transaction (one fsync).",
			Buckets: prometheus.ExponentialBuckets(1, 2, 9),
		}),
	}
	m.evidence = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "annal_witness_equivocation_evidence_total",
		Help: "Equivocation evidence files recorded since start, by source (gossip, add-checkpoint). Any increase means a log signed two histories.",
	}, []string{"source"})
	m.gossipChecks = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "annal_witness_gossip_checks_total",
		Help: "Checks of a peer's checkpoint of a log against this witness's, by result (consistent, equivocation, failed, skipped).",
	}, []string{"result"})
	stored := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "annal_witness_evidence_files",
		Help: "Equivocation evidence files stored, listed at /evidence.",
	}, func() float64 {
		n, err := store.evidenceCount()
		if err != nil {
			log.Error("count evidence", "error", err)
		}
		return float64(n)
	})
	// The counters start at 0 for every label, so that a scrape shows them
	// before the first equivocation.
	for _, s := range []string{EvidenceFromGossip, EvidenceFromAddCheckpoint} {
		m.evidence.WithLabelValues(s)
	}
	for _, r := range []string{checkConsistent, checkEquivocation, checkFailed, checkSkipped} {
		m.gossipChecks.WithLabelValues(r)
	}
	m.registry.MustRegister(m.requests, m.latency, m.groupSize, m.evidence, m.gossipChecks, stored)
	return m
}
