package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/annal-dev/annal/internal/loadconn"
	"github.com/annal-dev/annal/kernel"
	"github.com/annal-dev/annal/logserver/api"
)

// actionPoster is one client of the throughput phases: POST /v1/actions
// with its actor's credential on its own kept connection
// (internal/loadconn), as each of the conformance server's clients posts
// /add on its own, so that the load generator takes the same small share
// of the two cores whichever server it drives. Every answer must be a
// committed receipt. The product's client (logserver/client), with
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
	code, answer, err := p.conn.Post(ctx, body)
	if err != nil {
		return fmt.Errorf("POST /v1/actions: %w", err)
	}
	if code != http.StatusOK {
		return fmt.Errorf("POST /v1/actions: %d %s", code, firstLine(string(answer)))
	}
	// Only the two fields checked are decoded: the generator shares the
	// cores with the server it measures.
	var r struct {
		Status string `json:"status"`
		Target string `json:"target"`
	}
	if err := json.Unmarshal(answer, &r); err != nil {
		return fmt.Errorf("POST /v1/actions: receipt: %w", err)
	}
	if r.Status != kernel.StatusCommitted || r.Target != req.Target {
		return fmt.Errorf("POST /v1/actions: receipt for %q says %q, target %q", req.Target, r.Status, r.Target)
	}
	return nil
}
