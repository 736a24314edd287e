package server

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/annal-dev/annal/api"
	"github.com/annal-dev/annal/blobstore"
	"github.com/annal-dev/annal/format/oid"
	"github.com/annal-dev/annal/format/vfspath"
	"github.com/annal-dev/annal/kernel"
)

// The agent file system over HTTP (seed 002, Virtual File System; the
// kernel's kernel/vfs.go):
//
//	PUT /v1/vfs/{agent}/{path}  write a file (the body, at most
//	                            api.MaxVFSContent bytes): its bytes go to
//	                            the blob store, the write is an action
//	GET /v1/vfs/{agent}/{path}  a file's bytes (headers Annal-OID,
//	                            Annal-Index), a directory's listing
//	                            (api.VFSListing), or a view of the log
//	GET /v1/vfs/{agent}         the whole tree's listing
//
// Both need a credential: a tree is read by its agent and the humans who
// oversee it. Writes need a server that keeps files (KeepFiles, which
// annald always does): the content must be there for whoever reads it
// later.
func (s *Server) vfsRoutes() []route {
	return []route{
		{"PUT /v1/vfs/{agent}/{path...}", serve(s.handleVFSPut, api.MaxVFSContent).whole()},
		{"GET /v1/vfs/{agent}/{path...}", serve(s.handleVFSGet, 0).whole()},
		{"GET /v1/vfs/{agent}", serve(s.handleVFSGet, 0).whole()},
	}
}

// vfsPath parses the request's agent and path.
func vfsPath(r *http.Request) (vfspath.Path, error) {
	p, err := vfspath.Parse(r.PathValue("agent"), trimSlash(r.PathValue("path")))
	if err != nil {
		return p, fmt.Errorf("%w: %v", kernel.ErrInvalid, err)
	}
	return p, nil
}

func trimSlash(s string) string {
	if len(s) > 0 && s[len(s)-1] == '/' {
		return s[:len(s)-1]
	}
	return s
}

func (s *Server) handleVFSPut(w http.ResponseWriter, r *http.Request) {
	actor, err := s.authenticate(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	p, err := vfsPath(r)
	if err == nil {
		if werr := p.Writable(); werr != nil {
			err = fmt.Errorf("%w: %v", kernel.ErrForbidden, werr)
		}
	}
	if err == nil && s.files == nil {
		err = errNoFiles
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	limit := min(int64(api.MaxVFSContent), s.files.MaxBlob())
	id, size, ok := s.takeBlob(w, r, s.files, limit, fmt.Sprintf("a file of the agent file system is at most %d bytes", limit))
	if !ok {
		return
	}
	rc, err := s.k.VFSWrite(r.Context(), actor, p, id, r.URL.Query().Get("envelope"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	status := http.StatusCreated
	if rc.Status == kernel.StatusHeld {
		status = http.StatusAccepted
	}
	writeJSON(w, status, api.VFSWritten{URI: p.URI(), OID: id, Size: size, Receipt: receiptOf(rc)})
}

func (s *Server) handleVFSGet(w http.ResponseWriter, r *http.Request) {
	viewer, err := s.authenticate(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	p, err := vfsPath(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if p.IsView() {
		body, err := s.k.VFSView(r.Context(), viewer, p)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if p.Rel == vfspath.AuditEvents {
			w.Header().Set("Content-Type", "application/jsonl")
		}
		w.Header().Set("Cache-Control", "no-store")
		_, _ = w.Write(body)
		return
	}
	tree, err := s.k.VFSTree(r.Context(), viewer, p.Agent)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if p.IsDir() {
		writeJSON(w, http.StatusOK, vfsListing(p, tree))
		return
	}
	s.serveVFSFile(w, r, p, tree)
}

func vfsListing(p vfspath.Path, tree *kernel.VFSTree) api.VFSListing {
	out := api.VFSListing{URI: p.URI(), Files: []api.VFSFile{}, Resumed: tree.Resumed}
	for _, f := range tree.List(p.Rel) {
		out.Files = append(out.Files, api.VFSFile{Path: f.Path, OID: f.OID, Index: f.Index, Writer: f.Writer, Time: f.Time.String()})
	}
	return out
}

// serveVFSFile answers a file's bytes from the blob store, checked
// against the OID its write logged.
func (s *Server) serveVFSFile(w http.ResponseWriter, r *http.Request, p vfspath.Path, tree *kernel.VFSTree) {
	f, ok := tree.Files[p.Rel]
	if !ok {
		s.fail(w, r, fmt.Errorf("%w: %s: no such file", kernel.ErrNotFound, p.URI()))
		return
	}
	if s.files == nil {
		s.fail(w, r, errNoFiles)
		return
	}
	data, err := s.files.Get(f.OID)
	switch {
	case errors.Is(err, blobstore.ErrNotFound):
		s.fail(w, r, fmt.Errorf("%w: %s was written at index %d as %s, but the blob store does not hold those bytes", kernel.ErrNotFound, p.URI(), f.Index, f.OID))
		return
	case err != nil:
		s.fail(w, r, err)
		return
	case oid.Of(data) != f.OID:
		s.fail(w, r, fmt.Errorf("%s: the blob store served bytes that do not hash to %s", p.URI(), f.OID))
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Annal-OID", f.OID)
	w.Header().Set("Annal-Index", strconv.FormatUint(f.Index, 10))
	_, _ = w.Write(data)
}
