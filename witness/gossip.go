package witness

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/annal-dev/annal/checkpoints"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/mod/sumdb/note"
)

// Defaults of the gossip options.
const (
	// DefaultGossipInterval is the time between gossip rounds of
	// `annal-witness serve`.
	DefaultGossipInterval = time.Minute
	// DefaultGossipTimeout bounds one check: one log against one peer, the
	// peer's answer and the log's tiles included.
	DefaultGossipTimeout = 30 * time.Second
	// DefaultGossipConcurrency bounds the checks run at once.
	DefaultGossipConcurrency = 8
)

// ErrBadPeerAnswer wraps every refusal of a checkpoint served to gossip: a
// peer's monitoring answer, or a log's own checkpoint.
var ErrBadPeerAnswer = errors.New("served checkpoint refused")

// GossipReport sums up one gossip round.
type GossipReport struct {
	// Consistent counts the peers' checkpoints found consistent with this
	// witness's.
	Consistent int
	// Equivocations are the IDs of the evidence files the round wrote or
	// found again, sorted, without repeats.
	Equivocations []string
	// Failed counts the checks that could not be made: a peer that did not
	// answer or answered garbage, a log without a tile URL, tiles missing or
	// matching neither checkpoint, evidence that could not be written. Each
	// is logged.
	Failed int
	// Skipped counts the (peer, log) pairs with nothing to compare: this
	// witness or the peer has cosigned no checkpoint of the log.
	Skipped int
	// ThroughLog counts the peers' checkpoints read from the log's own
	// published checkpoint (cosigned by the peer), because the peer has no
	// monitoring endpoint for it (404): omniwitness and litewitness have
	// none.
	ThroughLog int
	// NoMonitoring names the peers that answered 404 for every log of the
	// round and for which no log publishes a cosignature: gossip checks
	// nothing with them. Each is logged as a warning.
	NoMonitoring []string
}

// gossip is the gossip state of a Witness.
type gossip struct {
	client      *http.Client
	timeout     time.Duration
	concurrency int

	round sync.Mutex // held by the round in progress

	mu sync.Mutex
	// known maps the pairs of trees checked in the last round to their
	// outcome: "" for consistent, else the evidence ID. A pair seen again
	// is not checked against the tiles again.
	known map[[sha256.Size]byte]string
	// blind are the peers last warned about as having no monitoring
	// endpoint, so that the warning is given when it starts, not every
	// round.
	blind map[string]bool
}

// Gossip runs one gossip round now: for every configured peer and every log
// this witness has cosigned, it fetches the peer's latest cosigned
// checkpoint from its monitoring endpoint and checks it against this
// witness's (see the package comment, "Peers and gossip"). Rounds do not
// overlap: a call made during a round waits for it. ctx bounds the round.
func (w *Witness) Gossip(ctx context.Context) GossipReport {
	g := w.gossip
	g.round.Lock()
	defer g.round.Unlock()
	peers, err := w.store.Peers()
	if err != nil {
		w.log.Error("gossip: read peers", "error", err)
		return GossipReport{}
	}
	logs, err := w.store.Logs()
	if err != nil {
		w.log.Error("gossip: read logs", "error", err)
		return GossipReport{}
	}

	round := newGossipRound(w.metrics.gossipChecks)
	sem := make(chan struct{}, g.concurrency)
	var wg sync.WaitGroup
schedule:
	for _, p := range peers {
		if slices.Contains(w.cosigner.VerifierKeys(), p.Key) {
			continue
		}
		pv, err := p.verifier()
		if err != nil {
			w.log.Warn("gossip: peer skipped", "peer", p.Name, "error", err)
			continue
		}
		for _, l := range logs {
			if l.Latest == nil {
				round.tally(checkResult{kind: checkSkipped})
				continue
			}
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				break schedule
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				round.tally(w.gossipCheck(ctx, p, pv, l))
			}()
		}
	}
	wg.Wait()
	w.endGossipRound(round)
	slices.Sort(round.rep.Equivocations)
	slices.Sort(round.rep.NoMonitoring)
	return round.rep
}

// gossipRound is what the checks of one gossip round find, tallied as
// each ends.
type gossipRound struct {
	checks *prometheus.CounterVec // the gossip counter, by result

	mu  sync.Mutex
	rep GossipReport
	// known is the next gossip.known: the pairs found consistent or
	// equivocating, with the evidence ID.
	known map[[sha256.Size]byte]string
	// evidence holds the IDs in rep.Equivocations.
	evidence map[string]bool
	// peerChecks and peerNotFound count, by peer, the checks made and
	// those its monitoring endpoint answered 404.
	peerChecks, peerNotFound map[string]int
}

func newGossipRound(checks *prometheus.CounterVec) *gossipRound {
	return &gossipRound{
		checks:       checks,
		known:        map[[sha256.Size]byte]string{},
		evidence:     map[string]bool{},
		peerChecks:   map[string]int{},
		peerNotFound: map[string]int{},
	}
}

// tally adds the result of one check.
func (round *gossipRound) tally(r checkResult) {
	round.mu.Lock()
	defer round.mu.Unlock()
	round.checks.WithLabelValues(r.kind).Inc()
	rep := &round.rep
	switch r.kind {
	case checkConsistent:
		rep.Consistent++
	case checkEquivocation:
		if !round.evidence[r.evidenceID] {
			round.evidence[r.evidenceID] = true
			rep.Equivocations = append(rep.Equivocations, r.evidenceID)
		}
	case checkFailed:
		rep.Failed++
	case checkSkipped:
		rep.Skipped++
	}
	if r.throughLog {
		rep.ThroughLog++
	}
	if r.peer != "" {
		round.peerChecks[r.peer]++
		if r.notFound {
			round.peerNotFound[r.peer]++
		}
	}
	if r.kind == checkConsistent || r.kind == checkEquivocation {
		round.known[r.pair] = r.evidenceID
	}
}

// endGossipRound keeps what the round found for the next: the pairs it
// checked, and the peers with no monitoring endpoint, which it names in
// the report and warns about when they become so.
func (w *Witness) endGossipRound(round *gossipRound) {
	g := w.gossip
	g.mu.Lock()
	defer g.mu.Unlock()
	g.known = round.known
	if g.blind == nil {
		g.blind = map[string]bool{}
	}
	for peer, n := range round.peerChecks {
		blind := n > 0 && round.peerNotFound[peer] == n
		if blind {
			round.rep.NoMonitoring = append(round.rep.NoMonitoring, peer)
			if !g.blind[peer] {
				w.log.Warn("gossip: the peer has no checkpoint on its monitoring endpoint for any log (404), and no log publishes one it cosigned: gossip checks nothing against it. Witnesses such as omniwitness and litewitness have no monitoring endpoint; give each log a tile URL (annal-witness logs add --tile-url) and ask the logs to publish their witnesses' cosignatures, which gossip then reads instead",
					"peer", peer, "logs", n)
			}
		}
		g.blind[peer] = blind
	}
}

// RunGossip runs a gossip round at once and then every interval, until ctx
// ends; it returns after the round in progress, which ctx's end cuts
// short. The caller MUST wait for it to return before closing the Store.
func (w *Witness) RunGossip(ctx context.Context, interval time.Duration) {
	if interval <= 0 {
		return
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		rep := w.Gossip(ctx)
		w.log.Debug("gossip round", "consistent", rep.Consistent, "equivocations", len(rep.Equivocations), "failed", rep.Failed, "skipped", rep.Skipped,
			"through_log", rep.ThroughLog, "no_monitoring", rep.NoMonitoring)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// The outcomes of one check, also the "result" label of the gossip
// counter.
const (
	checkConsistent   = "consistent"
	checkEquivocation = "equivocation"
	checkFailed       = "failed"
	checkSkipped      = "skipped"
)

type checkResult struct {
	kind       string
	pair       [sha256.Size]byte
	evidenceID string
	// peer is the peer checked; notFound, that its monitoring endpoint
	// answered 404 and the log publishes no checkpoint it cosigned;
	// throughLog, that its checkpoint was read from the log's own
	// published one instead.
	peer       string
	notFound   bool
	throughLog bool
}

// gossipCheck checks the peer's latest checkpoint of one log against this
// witness's.
func (w *Witness) gossipCheck(ctx context.Context, p PeerConfig, pv note.Verifier, st LogStatus) checkResult {
	ctx, cancel := context.WithTimeout(ctx, w.gossip.timeout)
	defer cancel()
	r := w.gossipCheckPeer(ctx, p, pv, st)
	r.peer = p.Name
	return r
}

func (w *Witness) gossipCheckPeer(ctx context.Context, p PeerConfig, pv note.Verifier, st LogStatus) checkResult {
	attrs := []any{"peer", p.Name, "origin", st.Origin}
	answer, err := w.fetchPeerCheckpoint(ctx, p, st.Origin)
	throughLog := false
	if errors.Is(err, fs.ErrNotExist) {
		// No checkpoint of the log on the peer's monitoring endpoint, or no
		// such endpoint at all. The log's own checkpoint carries the peer's
		// cosignature when the log asks the peer to witness it.
		if answer = w.logCheckpointCosignedBy(ctx, st, pv); answer == nil {
			w.log.Debug("gossip: peer has no checkpoint of the log, and the log publishes none it cosigned", attrs...)
			return checkResult{kind: checkSkipped, notFound: true}
		}
		throughLog = true
		attrs = append(attrs, "source", "the log's published checkpoint")
	} else if err != nil {
		w.log.Warn("gossip: peer's checkpoint not fetched", append(attrs, "error", err)...)
		return checkResult{kind: checkFailed}
	}
	theirs, err := openServedCheckpoint(answer, st.LogConfig, pv)
	if err != nil {
		w.log.Warn("gossip: peer's checkpoint refused", append(attrs, "error", err)...)
		return checkResult{kind: checkFailed, throughLog: throughLog}
	}
	r := w.compareSighting(ctx, st, theirs, p, attrs)
	r.throughLog = throughLog
	return r
}

// logCheckpointCosignedBy returns the log's own published checkpoint if it
// carries a valid cosignature by the peer, else nil.
func (w *Witness) logCheckpointCosignedBy(ctx context.Context, st LogStatus, pv note.Verifier) []byte {
	if st.TileURL == "" {
		return nil
	}
	tiles, err := newLogTiles(st.TileURL, w.gossip.client)
	if err != nil {
		return nil
	}
	answer, err := tiles.checkpoint(ctx)
	if err != nil || len(answer) > MaxGossipAnswerSize {
		return nil
	}
	if _, err := note.Open(answer, note.VerifierList(pv)); err != nil {
		return nil
	}
	return answer
}

// compareSighting checks a peer's sighting of a log against this
// witness's.
func (w *Witness) compareSighting(ctx context.Context, st LogStatus, theirs sighting, p PeerConfig, attrs []any) checkResult {
	theirs.by, theirs.at = p.Name, time.Now()
	ours, err := w.ownSighting(st)
	if err != nil {
		w.log.Error("gossip: stored checkpoint unreadable", append(attrs, "error", err)...)
		return checkResult{kind: checkFailed}
	}
	pair := evidenceID(st.Origin, ours.cp, theirs.cp)
	w.gossip.mu.Lock()
	id, known := w.gossip.known[pair]
	w.gossip.mu.Unlock()
	if known {
		if id == "" {
			return checkResult{kind: checkConsistent, pair: pair}
		}
		return checkResult{kind: checkEquivocation, pair: pair, evidenceID: id}
	}
	attrs = append(attrs, "own_size", ours.cp.Size, "peer_size", theirs.cp.Size)
	s, err := w.compare(ctx, st.LogConfig, ours, theirs)
	switch {
	case err != nil:
		w.log.Warn("gossip: could not check the peer's checkpoint against this witness's", append(attrs, "error", err)...)
		return checkResult{kind: checkFailed}
	case s == nil:
		w.log.Debug("gossip: consistent", attrs...)
		return checkResult{kind: checkConsistent, pair: pair}
	}
	id, err = w.recordEvidence(st.LogConfig, *s, EvidenceFromGossip)
	if err != nil {
		return checkResult{kind: checkFailed}
	}
	return checkResult{kind: checkEquivocation, pair: pair, evidenceID: id}
}

// fetchPeerCheckpoint GETs the peer's monitoring endpoint for origin. A 404
// is an error wrapping fs.ErrNotExist; the answer is bounded by the gossip
// client's transport.
func (w *Witness) fetchPeerCheckpoint(ctx context.Context, p PeerConfig, origin string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.checkpointURL(origin), nil)
	if err != nil {
		return nil, err
	}
	resp, err := w.gossip.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusNotFound:
		return nil, fmt.Errorf("%s answered 404: %w", req.URL, fs.ErrNotExist)
	default:
		return nil, fmt.Errorf("%s answered %s", req.URL, resp.Status)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", req.URL, err)
	}
	return body, nil
}

// openServedCheckpoint checks a checkpoint served for the log cfg by a peer
// (its monitoring answer) or by the log itself: at most
// MaxGossipAnswerSize bytes, a well-formed signed checkpoint
// (ParseSignedCheckpoint) of cfg's origin, a valid signature by a key of
// the log and none failing. The sighting's note holds the text and only the
// signatures that verified: the log's and, if cosigner is not nil and its
// cosignature verifies, that cosignature. A missing or failing cosignature
// is dropped, not refused: the log's signature is what evidence needs.
// Every error wraps ErrBadPeerAnswer.
func openServedCheckpoint(answer []byte, cfg LogConfig, cosigner note.Verifier) (sighting, error) {
	if len(answer) > MaxGossipAnswerSize {
		return sighting{}, fmt.Errorf("%w: %d bytes, more than %d", ErrBadPeerAnswer, len(answer), MaxGossipAnswerSize)
	}
	cp, err := ParseSignedCheckpoint(answer)
	if err != nil {
		return sighting{}, fmt.Errorf("%w: %w", ErrBadPeerAnswer, err)
	}
	if cp.Origin != cfg.Origin {
		return sighting{}, fmt.Errorf("%w: checkpoint of origin %q, not %q", ErrBadPeerAnswer, abbreviate(cp.Origin), abbreviate(cfg.Origin))
	}
	n, err := openCheckpoint(answer, cfg)
	if err != nil {
		return sighting{}, fmt.Errorf("%w: %w", ErrBadPeerAnswer, err)
	}
	if cosigner != nil {
		vs, err := cfg.verifiers()
		if err != nil {
			return sighting{}, fmt.Errorf("%w: %w", ErrBadPeerAnswer, err)
		}
		if both, err := note.Open(answer, withCosigner{vs, cosigner}); err == nil {
			n = both
		}
	}
	kept, err := verifiedNote(n)
	if err != nil {
		return sighting{}, fmt.Errorf("%w: %w", ErrBadPeerAnswer, err)
	}
	return sighting{note: kept, cp: cp}, nil
}

// withCosigner adds one witness key to a log's verifiers.
type withCosigner struct {
	note.Verifiers
	cosigner note.Verifier
}

func (v withCosigner) Verifier(name string, hash uint32) (note.Verifier, error) {
	if name == v.cosigner.Name() && hash == v.cosigner.KeyHash() {
		return v.cosigner, nil
	}
	return v.Verifiers.Verifier(name, hash)
}

// ownSighting is this witness's latest cosigned checkpoint of a log.
func (w *Witness) ownSighting(st LogStatus) (sighting, error) {
	cp, err := ParseSignedCheckpoint(st.Latest.Note)
	if err != nil {
		return sighting{}, err
	}
	return sighting{note: st.Latest.Note, cp: cp, by: w.cosigner.Name(), at: st.Latest.CosignedAt}, nil
}

// recordEvidence writes the evidence file of an equivocation and stores it,
// logged at error level and counted when new. It returns the evidence ID.
func (w *Witness) recordEvidence(cfg LogConfig, s split, source string) (string, error) {
	attrs := []any{"origin", cfg.Origin, "source", source,
		"size_1", s.small.cp.Size, "root_1", b64(s.small.cp.Hash[:]), "seen_by_1", s.small.by,
		"size_2", s.large.cp.Size, "root_2", b64(s.large.cp.Hash[:]), "seen_by_2", s.large.by}
	file, err := makeEvidence(cfg, s)
	if err != nil {
		w.log.Error("LOG EQUIVOCATION: the log signed two histories, but no evidence file could be written", append(attrs, "error", err,
			"checkpoint_1", string(s.small.note), "checkpoint_2", string(s.large.note))...)
		return "", err
	}
	raw := evidenceID(cfg.Origin, s.small.cp, s.large.cp)
	rec := EvidenceRecord{ID: hex.EncodeToString(raw[:]), Origin: cfg.Origin, Source: source,
		Sizes: [2]uint64{min(s.small.cp.Size, s.large.cp.Size), max(s.small.cp.Size, s.large.cp.Size)}, FoundAt: time.Now().UTC()}
	added, err := w.store.putEvidence(rec, file)
	if err != nil {
		w.log.Error("LOG EQUIVOCATION: the log signed two histories, but the evidence was not stored", append(attrs, "evidence_id", rec.ID, "error", err, "evidence", string(file))...)
		return "", err
	}
	if added {
		w.metrics.evidence.WithLabelValues(source).Inc()
		w.log.Error("LOG EQUIVOCATION: the log signed two histories; evidence recorded", append(attrs, "evidence_id", rec.ID)...)
	} else {
		w.log.Debug("equivocation seen again", "evidence_id", rec.ID, "origin", cfg.Origin)
	}
	return rec.ID, nil
}

// observe returns a checkpoint sighting for evidence from an opened note.
func observe(n *note.Note, cp checkpoints.Checkpoint, by string, at time.Time) (sighting, error) {
	kept, err := verifiedNote(n)
	return sighting{note: kept, cp: cp, by: by, at: at}, err
}
