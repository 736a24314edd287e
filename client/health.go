package client

import (
	"context"
	"net/http"

	"github.com/annal-dev/annal/api"
)

// Health reads GET /v1/health: the log's size and checkpoint age, its
// witnesses' last cosignatures, the equivocation evidence they publish,
// and why any of them refuse the log.
func (c *Client) Health(ctx context.Context) (*api.LogHealth, error) {
	var h api.LogHealth
	return &h, c.doJSON(ctx, http.MethodGet, "v1/health", nil, &h)
}
