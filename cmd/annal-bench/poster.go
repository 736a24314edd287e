package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/annal-dev/annal/api"
	"github.com/annal-dev/annal/cmd/annal-bench/loadconn"
	"github.com/annal-dev/annal/kernel"
)

// actionPoster is one client of the throughput phases: POST /v1/actions
// with its actor's credential on its own kept connection
// (cmd/annal-bench/loadconn), as each of the conformance server's clients posts
// /add on its own, so that the load generator takes the same small share
// of the two cores whichever server it drives. Every answer must be a
// committed receipt. The product's client (client/), with
// http.Client under it, drives the latency phases, the holds, and one
// reference row of the governed phase.
type actionPoster struct {
	conn *loadconn.Conn
}

func newActionPoster(url, cred string) (*actionPoster, error) {
	c, err := loadconn.New(url+"/v1/actions", http.Header{
		"Authorization": {"Bearer " + cred},
		"Content-Type":  {"application/json"},
	}, time.Minute)
	if err != nil {
		return nil, err
	}
	return &actionPoster{conn: c}, nil
}

// newActionPosters makes n posters for the same credential.
func newActionPosters(url, cred string, n int) ([]*actionPoster, error) {
	ps := make([]*actionPoster, n)
	for i := range ps {
		var err error
		if ps[i], err = newActionPoster(url, cred); err != nil {
			return nil, err
		}
	}
	return ps, nil
}

// closePosters closes the posters made so far (nil ones are skipped).
func closePosters(ps []*actionPoster) {
	for _, p := range ps {
		if p != nil {
			p.conn.Close()
		}
	}
}

// submit posts req and checks that the answer is its committed receipt.
func (p *actionPoster) submit(ctx context.Context, req api.ActionRequest) error {
	body, err := json.Marshal(req)
	if err != nil {
		return err
	}
	return p.post(ctx, body, req.Target)
}

// mutate posts the mutate action on target with benchPayload(i), the
// action of the throughput phases, and checks its receipt. The body is
// appended by hand rather than by encoding/json, and the receipt checked
// by search rather than decoded, because the generator shares the two
// cores with the server it measures: its own work per request should be
// as small as the conformance server's generator's (one Appendf).
func (p *actionPoster) mutate(ctx context.Context, target string, i int) error {
	return p.post(ctx, appendMutateBody(nil, target, i), target)
}

// post posts body, an action on target, and checks that the answer is a
// committed receipt for target.
func (p *actionPoster) post(ctx context.Context, body []byte, target string) error {
	code, answer, err := p.conn.Post(ctx, body)
	if err != nil {
		return fmt.Errorf("POST /v1/actions: %w", err)
	}
	if code != http.StatusOK {
		return fmt.Errorf("POST /v1/actions: %d %s", code, firstLine(string(answer)))
	}
	if isCommittedReceipt(answer, target) {
		return nil
	}
	var r struct {
		Status string `json:"status"`
		Target string `json:"target"`
	}
	if err := json.Unmarshal(answer, &r); err != nil {
		return fmt.Errorf("POST /v1/actions: receipt: %w", err)
	}
	return fmt.Errorf("POST /v1/actions: receipt for %q says %q, target %q", target, r.Status, r.Target)
}

// isCommittedReceipt reports whether answer is a JSON object holding the
// members "status":"committed" and "target":target, as the server writes
// them (compact, then a newline). Inside a string every quote is escaped,
// so neither can be matched inside another member's string.
func isCommittedReceipt(answer []byte, target string) bool {
	answer = bytes.TrimSpace(answer)
	if len(answer) < 2 || answer[0] != '{' || answer[len(answer)-1] != '}' || !bytes.Contains(answer, []byte(`"status":"`+kernel.StatusCommitted+`"`)) {
		return false
	}
	want := make([]byte, 0, len(target)+12)
	want = append(want, `"target":`...)
	want = strconv.AppendQuote(want, target)
	return bytes.Contains(answer, want)
}

// appendMutateBody appends the JSON request of a mutate action on target
// with benchPayload(i). target is one of the phases' own, plain ASCII with
// nothing JSON escapes.
func appendMutateBody(dst []byte, target string, i int) []byte {
	dst = append(dst, `{"type":"mutate","target":"`...)
	dst = append(dst, target...)
	dst = append(dst, `","payload":`...)
	dst = appendBenchPayload(dst, i)
	return append(dst, '}')
}
