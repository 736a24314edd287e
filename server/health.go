package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"regexp"
	"strings"
	"sync"
	"time"

	fnote "github.com/transparency-dev/formats/note"
	"golang.org/x/mod/sumdb/note"

	"github.com/annal-dev/annal/api"
	"github.com/annal-dev/annal/kernel"
)

const (
	// evidenceTTL is how long a witness's evidence list is reused.
	evidenceTTL = 30 * time.Second
	// evidenceTimeout bounds one fetch of a witness's evidence list, and
	// maxEvidenceBody its size.
	evidenceTimeout = 2 * time.Second
	maxEvidenceBody = 1 << 20
)

// healthWatch answers GET /v1/health: the log's size and checkpoint age,
// and for each witness of the kernel's policy the newest cosignature annald
// has seen from it and the equivocation evidence it publishes about this
// log. Cosignatures are read off each published checkpoint when health is
// asked for, so a witness that missed the latest checkpoint shows the last
// one it cosigned (since annald started).
type healthWatch struct {
	k         *kernel.Kernel
	logger    *slog.Logger
	client    *http.Client
	quorum    string
	witnesses []*watchedWitness
}

type watchedWitness struct {
	name, key, url string
	verifier       note.Verifier

	mu         sync.Mutex
	lastSize   uint64
	lastAt     time.Time
	evidence   []api.WitnessEvidence
	evidenceOK time.Time
	evidenceEr string
}

func newHealthWatch(k *kernel.Kernel, logger *slog.Logger) *healthWatch {
	h := &healthWatch{k: k, logger: logger, client: &http.Client{Timeout: evidenceTimeout}}
	// The kernel refused to start on a policy Tessera could not parse, so
	// only the lines this needs are read here.
	for _, line := range strings.Split(string(k.WitnessPolicy()), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) >= 3 && f[0] == "witness":
			v, err := fnote.NewVerifierForCosignatureV1(f[2])
			if err != nil {
				logger.Warn("witness policy: a key the console cannot check", "witness", f[1], "err", err)
				continue
			}
			w := &watchedWitness{name: f[1], key: f[2], verifier: v}
			if len(f) >= 4 {
				w.url = strings.TrimRight(f[3], "/")
			}
			h.witnesses = append(h.witnesses, w)
		case len(f) == 2 && f[0] == "quorum":
			h.quorum = f[1]
		}
	}
	return h
}

// observe records the cosignatures of the witnesses on a checkpoint.
func (h *healthWatch) observe(raw []byte, size uint64) {
	for _, w := range h.witnesses {
		n, err := note.Open(raw, note.VerifierList(w.verifier))
		if err != nil || len(n.Sigs) == 0 {
			continue
		}
		at, err := fnote.CoSigV1Timestamp(n.Sigs[0])
		if err != nil {
			continue
		}
		w.mu.Lock()
		if size >= w.lastSize {
			w.lastSize, w.lastAt = size, at
		}
		w.mu.Unlock()
	}
}

// fetchEvidence refreshes w's evidence list when it is older than
// evidenceTTL, keeping only the records about origin.
func (h *healthWatch) fetchEvidence(ctx context.Context, w *watchedWitness, origin string) {
	w.mu.Lock()
	fresh := time.Since(w.evidenceOK) < evidenceTTL
	w.mu.Unlock()
	if fresh || w.url == "" {
		return
	}
	list, err := h.readEvidence(ctx, w.url, origin)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.evidenceOK = time.Now()
	if err != nil {
		w.evidenceEr = err.Error()
		return
	}
	w.evidence, w.evidenceEr = list, ""
	if len(list) > 0 {
		h.logger.Error("a witness holds evidence that this log showed two histories", "witness", w.name, "records", len(list))
	}
}

func (h *healthWatch) readEvidence(ctx context.Context, url, origin string) ([]api.WitnessEvidence, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/evidence", nil)
	if err != nil {
		return nil, err
	}
	resp, err := h.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxEvidenceBody+1))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode == http.StatusNotFound {
		return nil, errors.New("the witness publishes no evidence list (GET /evidence: 404)")
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s/evidence: %s", url, resp.Status)
	}
	if len(body) > maxEvidenceBody {
		return nil, fmt.Errorf("GET %s/evidence: more than %d bytes", url, maxEvidenceBody)
	}
	return parseEvidenceList(body, url, origin)
}

// parseEvidenceList reads a witness's GET /evidence answer (a JSON array
// of records) and keeps the records about origin. It is outside input: a
// malformed list is an error, and a record is checked before it is shown.
func parseEvidenceList(body []byte, url, origin string) ([]api.WitnessEvidence, error) {
	var records []struct {
		ID      string    `json:"id"`
		Origin  string    `json:"origin"`
		Sizes   [2]uint64 `json:"sizes"`
		Source  string    `json:"source"`
		FoundAt time.Time `json:"found_at"`
	}
	if err := json.NewDecoder(bytes.NewReader(body)).Decode(&records); err != nil {
		return nil, fmt.Errorf("GET %s/evidence: %v", url, err)
	}
	out := []api.WitnessEvidence{}
	for _, r := range records {
		if r.Origin != origin {
			continue
		}
		if !evidenceID.MatchString(r.ID) {
			return nil, fmt.Errorf("GET %s/evidence: a record's id %q is not 64 lower-case hex digits", url, r.ID)
		}
		out = append(out, api.WitnessEvidence{ID: r.ID, Sizes: r.Sizes, Source: r.Source,
			FoundAt: r.FoundAt.UTC().Format(time.RFC3339), URL: url + "/evidence/" + r.ID})
	}
	return out, nil
}

// evidenceID is how a witness names an evidence file: a SHA-256 in hex.
var evidenceID = regexp.MustCompile(`^[0-9a-f]{64}$`)

// handleLogHealth answers GET /v1/health to any signed-in actor.
func (s *Server) handleLogHealth(w http.ResponseWriter, r *http.Request) {
	if _, err := s.authenticate(r); err != nil {
		s.fail(w, r, err)
		return
	}
	info, err := s.k.Info(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := api.LogHealth{Origin: info.Origin, VerifierKey: info.VerifierKey, Size: info.Size, CheckpointSize: info.Checkpoint,
		Ready: info.NotReady == nil, Quorum: s.health.quorum, WitnessProblems: s.k.WitnessProblems(), Witnesses: []api.WitnessHealth{}, CheckpointAgeSeconds: -1}
	if info.NotReady != nil {
		out.NotReady = info.NotReady.Error()
	}
	if age, err := s.k.CheckpointAge(); err == nil {
		out.CheckpointAgeSeconds = age.Seconds()
	} else if !errors.Is(err, os.ErrNotExist) {
		s.fail(w, r, err)
		return
	}
	if cp, err := s.k.LatestCheckpoint(r.Context()); err == nil {
		s.health.observe(cp.Raw, cp.Size)
	}
	var wg sync.WaitGroup
	for _, wt := range s.health.witnesses {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.health.fetchEvidence(r.Context(), wt, info.Origin)
		}()
	}
	wg.Wait()
	for _, wt := range s.health.witnesses {
		wt.mu.Lock()
		wh := api.WitnessHealth{Name: wt.name, Key: wt.key, URL: wt.url, LastCosignedSize: wt.lastSize,
			Evidence: append([]api.WitnessEvidence{}, wt.evidence...), EvidenceError: wt.evidenceEr}
		if !wt.lastAt.IsZero() {
			wh.LastCosignedAt = wt.lastAt.UTC().Format(time.RFC3339)
		}
		wt.mu.Unlock()
		out.Witnesses = append(out.Witnesses, wh)
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, out)
}
