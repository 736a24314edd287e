package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/annal-dev/annal/kernel"
	"github.com/annal-dev/annal/kernel/ring"
)

// parseRateLimits reads RING=RATE/BURST flags over the spec's defaults.
func parseRateLimits(flags []string) (map[ring.Ring]kernel.RateLimit, error) {
	limits := kernel.DefaultRateLimits()
	for _, f := range flags {
		r, rb, ok := strings.Cut(f, "=")
		rate, burst, ok2 := strings.Cut(rb, "/")
		if !ok || !ok2 {
			return nil, fmt.Errorf("%q is not RING=RATE/BURST", f)
		}
		n, err := strconv.Atoi(r)
		if err != nil {
			return nil, fmt.Errorf("%q: ring %q is not a number", f, r)
		}
		rg, err := ring.ParseRing(n)
		if err != nil {
			return nil, err
		}
		var l kernel.RateLimit
		if l.Rate, err = strconv.ParseFloat(rate, 64); err != nil {
			return nil, fmt.Errorf("%q: rate: %v", f, err)
		}
		if l.Burst, err = strconv.ParseFloat(burst, 64); err != nil {
			return nil, fmt.Errorf("%q: burst: %v", f, err)
		}
		limits[rg] = l
	}
	return limits, kernel.ValidateRateLimits(limits)
}

// killWebhook returns a kill callback that POSTs the kill to u; any 2xx
// answer confirms the agent's runtime stopped it.
func killWebhook(u string) (kernel.KillCallback, error) {
	parsed, err := url.Parse(u)
	if err != nil || (parsed.Scheme != "http" && parsed.Scheme != "https") || parsed.Host == "" {
		return nil, fmt.Errorf("%q is not an http(s) URL", u)
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return func(ctx context.Context, agent, session string, reason kernel.KillReason) error {
		body, _ := json.Marshal(map[string]string{"agent": agent, "session": session, "reason": string(reason)})
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		if resp.StatusCode/100 != 2 {
			return fmt.Errorf("kill webhook answered %s", resp.Status)
		}
		return nil
	}, nil
}
