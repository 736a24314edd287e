package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
)

// listPageSize is the page the client asks the list endpoints for: small
// enough that a page of the largest items (rings with their elevations)
// stays well under MaxResponseBody.
const listPageSize = 200

// maxListPages bounds how many pages one list follows: a kernel that
// keeps answering "next" cannot keep the client busy for ever.
const maxListPages = 10_000

// nextLink finds the rel="next" target of an RFC 8288 Link header.
var nextLink = regexp.MustCompile(`<([^>]*)>\s*;\s*rel="?next"?`)

// listPages reads every page of a list endpoint (annald answers lists in
// pages, the next one named by a Link header) and returns the items of
// all of them, in order.
func listPages(ctx context.Context, c *Client, path string) ([]json.RawMessage, error) {
	var all []json.RawMessage
	next := path + "?limit=" + fmt.Sprint(listPageSize)
	for pages := 0; next != ""; pages++ {
		if pages == maxListPages {
			return nil, fmt.Errorf("annal: GET %s: more than %d pages", path, maxListPages)
		}
		raw, header, err := c.doRawHeader(ctx, http.MethodGet, next, nil)
		if err != nil {
			return nil, err
		}
		var items []json.RawMessage
		if err := json.Unmarshal(raw, &items); err != nil {
			return nil, fmt.Errorf("annal: GET %s: answer is not a JSON list: %w", next, err)
		}
		all = append(all, items...)
		next = ""
		if m := nextLink.FindStringSubmatch(header.Get("Link")); m != nil {
			if !strings.HasPrefix(m[1], "/"+path+"?") || len(items) == 0 {
				return nil, fmt.Errorf("annal: GET %s: the next page %q is not a page of the same list", path, m[1])
			}
			next = strings.TrimPrefix(m[1], "/")
		}
	}
	return all, nil
}

// listAll is listPages with each item decoded as T.
func listAll[T any](ctx context.Context, c *Client, path string) ([]T, error) {
	items, err := listPages(ctx, c, path)
	if err != nil {
		return nil, err
	}
	out := make([]T, len(items))
	for i, it := range items {
		if err := json.Unmarshal(it, &out[i]); err != nil {
			return nil, fmt.Errorf("annal: GET %s: item %d: %w", path, i, err)
		}
	}
	return out, nil
}

// listAllRaw is listPages as one JSON array.
func listAllRaw(ctx context.Context, c *Client, path string) (json.RawMessage, error) {
	items, err := listPages(ctx, c, path)
	if err != nil {
		return nil, err
	}
	if items == nil {
		items = []json.RawMessage{}
	}
	return json.Marshal(items)
}
