package witness

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
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
//	POST /add-checkpoint             c2sp.org/tlog-witness
//	GET  /<hex SHA-256(origin)>/checkpoint   the latest cosigned checkpoint
//	GET  /metrics                    Prometheus metrics
func (w *Witness) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /add-checkpoint", w.serveAddCheckpoint)
	mux.HandleFunc("GET /{id}/checkpoint", w.serveCheckpoint)
	mux.Handle("GET /metrics", promhttp.HandlerFor(w.metrics.registry, promhttp.HandlerOpts{}))
	return mux
}

func (w *Witness) serveAddCheckpoint(rw http.ResponseWriter, r *http.Request) {
	start := time.Now()
	status := w.answerAddCheckpoint(rw, r)
	w.metrics.requests.WithLabelValues(strconv.Itoa(status)).Inc()
	w.metrics.latency.WithLabelValues(strconv.Itoa(status)).Observe(time.Since(start).Seconds())
}

func (w *Witness) answerAddCheckpoint(rw http.ResponseWriter, r *http.Request) int {
	body, err := io.ReadAll(http.MaxBytesReader(rw, r.Body, MaxRequestSize))
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

// serveCheckpoint answers the latest cosigned checkpoint of the origin
// whose SHA-256 is the path's lowercase hex id.
func (w *Witness) serveCheckpoint(rw http.ResponseWriter, r *http.Request) {
	idText := r.PathValue("id")
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
	rw.Header().Set("Content-Type", textContentType)
	// The answer changes with every cosignature: caches must revalidate.
	rw.Header().Set("Cache-Control", "no-cache")
	rw.Write(cp.Note)
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
}

func newMetrics() *metrics {
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
	m.registry.MustRegister(m.requests, m.latency, m.groupSize)
	return m
}
