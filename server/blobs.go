package server

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/annal-dev/annal/api"
	"github.com/annal-dev/annal/blobstore"
	"github.com/annal-dev/annal/kernel"
	"github.com/annal-dev/annal/kernel/event"
)

// KeepBlobs makes the server take blobs (POST /v1/blobs) into store and
// serve them to humans (GET /v1/blobs/<oid>). Without it both answer 404.
// The agent file system keeps its files there too.
func (s *Server) KeepBlobs(store *blobstore.Store) { s.blobs, s.files = store, store }

// KeepFiles makes the server keep the agent file system's files in store
// (PUT /v1/vfs/...) without taking other blobs: an agent's memory and
// messages are kept whenever the server runs, arbitrary uploads only when
// asked for (KeepBlobs).
func (s *Server) KeepFiles(store *blobstore.Store) { s.files = store }

// errNoBlobs is the answer of a server that keeps no blobs.
var errNoBlobs = fmt.Errorf("%w: annald keeps no blobs (start it with --keep-blobs)", kernel.ErrNotFound)

// errNoFiles is the answer of a server that keeps no files of the agent
// file system (one built without KeepFiles: annald always keeps them).
var errNoFiles = fmt.Errorf("%w: this server keeps no files of the agent file system", kernel.ErrNotFound)

// handlePutBlob stores the body as a blob for any authenticated actor and
// answers its OID: what an execute record or a tool call names.
func (s *Server) handlePutBlob(w http.ResponseWriter, r *http.Request) {
	if _, err := s.authenticate(r); err != nil {
		s.fail(w, r, err)
		return
	}
	if s.blobs == nil {
		s.fail(w, r, errNoBlobs)
		return
	}
	oid, size, ok := s.takeBlob(w, r, s.blobs, s.blobs.MaxBlob()+1, fmt.Sprintf("a blob is at most %d bytes", s.blobs.MaxBlob()))
	if ok {
		writeJSON(w, http.StatusCreated, api.Blob{OID: oid, Size: size})
	}
}

// takeBlob stores the request's body, of at most limit bytes, in store
// and answers its OID and size; or answers the error itself (tooBig says
// what the limit is) and false.
func (s *Server) takeBlob(w http.ResponseWriter, r *http.Request, store *blobstore.Store, limit int64, tooBig string) (oid string, size int64, ok bool) {
	r.Body = http.MaxBytesReader(w, r.Body, limit)
	oid, size, err := store.Put(r.Body)
	var overLimit *http.MaxBytesError
	switch {
	case errors.As(err, &overLimit), errors.Is(err, blobstore.ErrTooLarge):
		s.fail(w, r, fmt.Errorf("%w: %s", kernel.ErrTooLarge, tooBig))
		return "", 0, false
	case errors.Is(err, blobstore.ErrQuota):
		writeJSON(w, http.StatusInsufficientStorage, api.Error{Error: err.Error()})
		return "", 0, false
	case err != nil:
		s.fail(w, r, err)
		return "", 0, false
	}
	return oid, size, true
}

// handleGetBlob serves a blob to a human, after checking its bytes still
// hash to its name. Agents get 403: a blob may hold another agent's input
// or output.
func (s *Server) handleGetBlob(w http.ResponseWriter, r *http.Request) {
	viewer, err := s.authenticate(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if s.blobs == nil {
		s.fail(w, r, errNoBlobs)
		return
	}
	if viewer.Kind != event.Human {
		s.fail(w, r, fmt.Errorf("%w: blobs are served to humans (overseers and auditors), not to agents", kernel.ErrForbidden))
		return
	}
	data, err := s.blobs.Get(r.PathValue("oid"))
	switch {
	case errors.Is(err, blobstore.ErrInvalidID):
		s.fail(w, r, fmt.Errorf("%w: %v", kernel.ErrInvalid, err))
		return
	case errors.Is(err, blobstore.ErrNotFound):
		s.fail(w, r, fmt.Errorf("%w: %v", kernel.ErrNotFound, err))
		return
	case err != nil:
		s.fail(w, r, err)
		return
	}
	// Bytes an agent produced: never rendered by a browser.
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", "attachment")
	w.Header().Set("Cache-Control", "private, max-age=31536000, immutable")
	w.Write(data)
}
