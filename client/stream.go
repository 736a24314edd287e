package client

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/annal-dev/annal/api"
)

// Stream follows GET /v1/events/stream with query's filters and calls fn
// for each event, in log order, until ctx ends or fn returns an error.
// after, if set, starts the stream after that index; else it starts with
// the next event logged. A dropped connection is reopened (after 1 s)
// from the last event seen, so no event is missed or repeated; an answer
// other than 200 ends the stream with its error.
func (c *Client) Stream(ctx context.Context, query url.Values, after *uint64, fn func(api.HistoryItem) error) error {
	for {
		err := c.streamOnce(ctx, query, &after, fn)
		if ctx.Err() != nil {
			return nil
		}
		if _, ok := err.(*Error); ok {
			return err
		}
		if stop, ok := err.(fnError); ok {
			return stop.err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Second):
		}
	}
}

type fnError struct{ err error }

func (e fnError) Error() string { return e.err.Error() }

// streamOnce opens the stream once and reads its events until it ends.
func (c *Client) streamOnce(ctx context.Context, query url.Values, after **uint64, fn func(api.HistoryItem) error) error {
	resp, err := c.openStream(ctx, query, *after)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return readEvents(resp.Body, after, fn)
}

// openStream asks for the stream with query's filters, after the event
// at after if it is set; an answer other than 200 is its *Error.
func (c *Client) openStream(ctx context.Context, query url.Values, after *uint64) (*http.Response, error) {
	u, err := c.base.Parse("v1/events/stream?" + query.Encode())
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/event-stream")
	if c.credential != "" {
		req.Header.Set("Authorization", "Bearer "+c.credential)
	}
	if after != nil {
		req.Header.Set("Last-Event-ID", strconv.FormatUint(*after, 10))
	}
	// The stream is long-lived: no overall timeout, only the context.
	h := *c.http
	h.Timeout = 0
	resp, err := h.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
		e := &Error{Status: resp.StatusCode, Message: strings.TrimSpace(string(raw))}
		var body api.Error
		if json.Unmarshal(raw, &body) == nil && body.Error != "" {
			e.Message = body.Error
		}
		return nil, e
	}
	return resp, nil
}

// readEvents reads Server-Sent Events from body and calls fn for each
// history item, moving after to it once fn took it. An "event: error"
// ends the stream with the kernel's message; so does a stream cut short
// (io.ErrUnexpectedEOF), and fn's error, as an fnError.
func readEvents(body io.Reader, after **uint64, fn func(api.HistoryItem) error) error {
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 64<<10), MaxResponseBody)
	var data string
	kind := ""
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "data: "):
			data = strings.TrimPrefix(line, "data: ")
		case strings.HasPrefix(line, "event: "):
			kind = strings.TrimPrefix(line, "event: ")
		case line == "" && data != "":
			if kind == "error" {
				msg, _ := strconv.Unquote(data)
				return &Error{Status: http.StatusInternalServerError, Message: msg}
			}
			var item api.HistoryItem
			if err := json.Unmarshal([]byte(data), &item); err != nil {
				return &Error{Status: http.StatusBadGateway, Message: "a stream event is not a history item: " + err.Error()}
			}
			if err := fn(item); err != nil {
				return fnError{err}
			}
			idx := item.Index
			*after = &idx
			data, kind = "", ""
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return io.ErrUnexpectedEOF
}
