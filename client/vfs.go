package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"

	"github.com/annal-dev/annal/api"
	"github.com/annal-dev/annal/format/oid"
	"github.com/annal-dev/annal/format/vfspath"
)

// The agent file system (seed 002, Virtual File System): paths are
// vfs://{agent}/{path} URIs, parsed by format/vfspath before anything is
// sent.

func vfsURL(p vfspath.Path) string {
	u := "v1/vfs/" + seg(p.Agent)
	if p.Rel != "" {
		u += "/" + p.Rel // vfspath allows no byte that needs escaping
	}
	return u
}

// VFSPut writes data to the file uri names, under envelope (empty: the
// oldest of the agent's envelopes that allows it). The kernel logs the
// write as an action naming the content's OID, which the answer must
// match.
func (c *Client) VFSPut(ctx context.Context, uri string, data []byte, envelope string) (*api.VFSWritten, error) {
	p, err := vfspath.ParseURI(uri)
	if err != nil {
		return nil, err
	}
	if err := p.Writable(); err != nil {
		return nil, err
	}
	if len(data) > api.MaxVFSContent {
		return nil, fmt.Errorf("%s: %d bytes, more than a file of the agent file system holds (%d)", uri, len(data), api.MaxVFSContent)
	}
	path := vfsURL(p)
	if envelope != "" {
		path += "?envelope=" + url.QueryEscape(envelope)
	}
	raw, err := c.doRaw(ctx, http.MethodPut, path, data)
	if err != nil {
		return nil, err
	}
	var out api.VFSWritten
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, err
	}
	if want := oid.Of(data); out.OID != want || out.Size != int64(len(data)) {
		return nil, fmt.Errorf("annal: %s: the kernel answered %s (%d bytes) for %s (%d bytes)", uri, out.OID, out.Size, want, len(data))
	}
	return &out, nil
}

// VFSList lists the files at or under the directory uri names (the
// agent's whole tree for vfs://{agent}/).
func (c *Client) VFSList(ctx context.Context, uri string) (*api.VFSListing, error) {
	p, err := vfspath.ParseURI(uri)
	if err != nil {
		return nil, err
	}
	if !p.IsDir() {
		return nil, fmt.Errorf("%s is not a directory of the tree", uri)
	}
	var out api.VFSListing
	return &out, c.doJSON(ctx, http.MethodGet, vfsURL(p), nil, &out)
}

// VFSRead returns the content of the file uri names, after checking that
// it hashes to the OID the log recorded for it (f), or a view of the log
// (policy/active.json, policy/history.json, audit/events.jsonl; f is then
// the zero VFSFile).
func (c *Client) VFSRead(ctx context.Context, uri string) (data []byte, f api.VFSFile, err error) {
	p, err := vfspath.ParseURI(uri)
	if err != nil {
		return nil, f, err
	}
	if p.IsDir() {
		return nil, f, fmt.Errorf("%s is a directory: list it", uri)
	}
	if p.IsView() {
		data, err = c.doRaw(ctx, http.MethodGet, vfsURL(p), nil)
		return data, f, err
	}
	l, err := c.VFSList(ctx, vfspath.Path{Agent: p.Agent, Rel: p.Dir()}.URI())
	if err != nil {
		return nil, f, err
	}
	for _, lf := range l.Files {
		if lf.Path == p.Rel {
			f = lf
		}
	}
	if f.OID == "" {
		return nil, f, fmt.Errorf("annal: %s: no such file", uri)
	}
	if data, err = c.doRaw(ctx, http.MethodGet, vfsURL(p), nil); err != nil {
		return nil, f, err
	}
	if got := oid.Of(data); got != f.OID {
		return nil, f, fmt.Errorf("annal: %s: the bytes served hash to %s, not %s (written at index %d; or written again meanwhile)", uri, got, f.OID, f.Index)
	}
	return data, f, nil
}
