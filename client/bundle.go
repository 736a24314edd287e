package client

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/annal-dev/annal/api"
)

// Bundle asks for an audit bundle (GET /v1/bundle) of the selection in q
// (from, to, actor, session, kind, since, until, old_size) and returns its
// body as it streams; the caller MUST close it. The client's own timeout
// does not apply (a bundle of millions of events takes a while): bound it
// with ctx. The credential must be a human's.
func (c *Client) Bundle(ctx context.Context, q url.Values) (io.ReadCloser, error) {
	u, err := c.base.Parse("v1/bundle")
	if err != nil {
		return nil, err
	}
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	if c.credential != "" {
		req.Header.Set("Authorization", "Bearer "+c.credential)
	}
	h := *c.http
	h.Timeout = 0
	resp, err := h.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, MaxResponseBody))
		e := &Error{Status: resp.StatusCode, Message: strings.TrimSpace(string(raw))}
		var body api.Error
		if json.Unmarshal(raw, &body) == nil && body.Error != "" {
			e.Message = body.Error
		}
		return nil, e
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/jsonl") {
		resp.Body.Close()
		return nil, fmt.Errorf("annal: GET /v1/bundle: answer of type %q is not a bundle", ct)
	}
	return resp.Body, nil
}
