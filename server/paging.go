package server

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
)

// The list endpoints (/v1/actors, /v1/envelopes, /v1/rings, /v1/sessions)
// answer in pages, so that a kernel with many thousands of agents answers
// each list with a bounded body. A page is the JSON array the endpoint
// always answered; when more items follow, a Link header (RFC 8288,
// rel="next") gives the URL of the next page, which continues after the
// last item of this one (?after=<its id>). Items are never removed from
// these lists, so a cursor stays valid; an item created while a client
// pages may be missed if it sorts before the cursor.
const (
	// defaultPageSize is a page's size when the request names no limit:
	// large, so that a caller that does not follow Link still gets every
	// item of a small deployment.
	defaultPageSize = 1000
	maxPageSize     = 1000
)

// listPage is a list endpoint's answer: the page's items and, when more
// follow, the query of the next page.
type listPage struct {
	items any
	next  url.Values
}

// pageOf cuts the page the request asks for (?limit=, ?after=) out of
// items, which are in the list's order, each named by key.
func pageOf[T any](r *http.Request, items []T, key func(T) string) (*listPage, error) {
	q := r.URL.Query()
	limit := defaultPageSize
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > maxPageSize {
			return nil, invalid("limit %q is not a number from 1 to %d", s, maxPageSize)
		}
		limit = n
	}
	start := 0
	if after := q.Get("after"); after != "" {
		start = -1
		for i, it := range items {
			if key(it) == after {
				start = i + 1
				break
			}
		}
		if start < 0 {
			return nil, invalid("after %q names no item of this list you may see", after)
		}
	}
	end := min(start+limit, len(items))
	page := &listPage{items: items[start:end]}
	if end < len(items) {
		page.next = url.Values{"after": {key(items[end-1])}, "limit": {strconv.Itoa(limit)}}
	}
	if page.items == nil || end == start {
		page.items = []T{}
	}
	return page, nil
}

// writeList writes a listPage: its items, and the next page's URL in a
// Link header.
func writeList(w http.ResponseWriter, r *http.Request, status int, p *listPage) {
	if p.next != nil {
		next := url.URL{Path: r.URL.Path, RawQuery: p.next.Encode()}
		w.Header().Set("Link", fmt.Sprintf("<%s>; rel=\"next\"", next.String()))
	}
	writeJSON(w, status, p.items)
}
