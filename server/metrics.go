package server

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/annal-dev/annal/kernel"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metrics are the server's Prometheus metrics, in a registry of its own so
// that several servers can live in one process (as in tests).
type metrics struct {
	reg         *prometheus.Registry
	serve       http.Handler // the registry's exposition, GET /metrics
	submissions *prometheus.CounterVec
	denials     *prometheus.CounterVec
	latency     prometheus.Histogram
}

func newMetrics(k *kernel.Kernel) *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		submissions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "annal_submissions_total", Help: "Actions submitted, by outcome (committed or denied).",
		}, []string{"outcome"}),
		denials: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "annal_denials_total", Help: "Actions denied, by the stage that denied them and the error class.",
		}, []string{"stage", "class"}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "annal_submit_latency_seconds", Help: "Time from request to durable receipt for committed actions.",
			Buckets: prometheus.ExponentialBuckets(0.0002, 2, 16),
		}),
	}
	m.reg.MustRegister(m.submissions, m.denials, m.latency,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "annal_log_size", Help: "Entries durably integrated into the log.",
		}, func() float64 {
			info, err := k.Info(context.Background())
			if err != nil {
				return -1
			}
			return float64(info.Size)
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "annal_proof_tiles_kept", Help: "Full level-0 tiles whose top nodes proofs keep (kept from the first proof on, in the background).",
		}, func() float64 {
			kept, _, err := k.ProofTilesKept()
			if err != nil {
				return -1
			}
			return float64(kept)
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "annal_proof_tiles_keepable", Help: "Full level-0 tiles whose top nodes proofs will keep: proofs cost their steady price once annal_proof_tiles_kept reaches it.",
		}, func() float64 {
			_, keepable, err := k.ProofTilesKept()
			if err != nil {
				return -1
			}
			return float64(keepable)
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "annal_checkpoint_size", Help: "Tree size of the latest published checkpoint.",
		}, func() float64 {
			info, err := k.Info(context.Background())
			if err != nil {
				return -1
			}
			return float64(info.Checkpoint)
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "annal_checkpoint_age_seconds", Help: "Seconds since the published checkpoint was last written.",
		}, func() float64 {
			age, err := k.CheckpointAge()
			if err != nil {
				return -1
			}
			return age.Seconds()
		}),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "annal_sequencer_refusals_total",
			Help: "Entries the sequencer kept out of the log and had decided again: decisions taken on a state an event in flight changed. Any is a claim a rule misses.",
		}, func() float64 { return float64(k.SequencerRefusals()) }),
		// The process's runtime (heap, collector, goroutines, the
		// collector's percentage as annald serve --gc-headroom sets it)
		// and its resources (RSS, CPU seconds, open files), for the
		// operator watching its memory and load.
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	m.serve = promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
	return m
}

func (m *metrics) committed(d time.Duration) {
	m.submissions.WithLabelValues("committed").Inc()
	m.latency.Observe(d.Seconds())
}

func (m *metrics) denied(stage string, err error) {
	m.submissions.WithLabelValues("denied").Inc()
	m.denials.WithLabelValues(stage, errorClass(err)).Inc()
}

func errorClass(err error) string {
	for _, c := range []struct {
		err  error
		name string
	}{
		{kernel.ErrUnauthenticated, "unauthenticated"},
		{kernel.ErrForbidden, "forbidden"},
		{kernel.ErrInvalid, "invalid"},
		{kernel.ErrTooLarge, "too_large"},
		{kernel.ErrUnavailable, "unavailable"},
	} {
		if errors.Is(err, c.err) {
			return c.name
		}
	}
	return "other"
}

// RegisterMetrics adds collectors to the server's metrics (GET /metrics):
// what the process around it measures, such as its front's connections.
func (s *Server) RegisterMetrics(cs ...prometheus.Collector) error {
	for _, c := range cs {
		if err := s.metrics.reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}
