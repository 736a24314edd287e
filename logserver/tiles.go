package logserver

import (
	"compress/gzip"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/annal-dev/annal/kernel"
	"github.com/transparency-dev/tessera/api/layout"
)

// handleCheckpoint serves the latest signed checkpoint, once it has
// verified under the log's key: a checkpoint damaged on disk is never
// served (the last one that verified is, for a short grace, then 503). It
// is mutable, so caches may keep it for at most a second (tlog-tiles:
// "SHOULD prevent caching beyond a few seconds").
func (s *Server) handleCheckpoint(w http.ResponseWriter, r *http.Request) {
	cp, err := s.k.LatestCheckpoint(r.Context())
	if errors.Is(err, os.ErrNotExist) {
		http.Error(w, "no checkpoint has been published yet", http.StatusNotFound)
		return
	} else if err != nil {
		s.fail(w, r, fmt.Errorf("%w: %v", kernel.ErrUnavailable, err))
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "public, max-age=1")
	w.Write(cp.Raw)
}

// handleTile serves /tile/<L>/<N>[.p/<W>] and /tile/entries/<N>[.p/<W>].
// The request path must be exactly the canonical path of the tile it names,
// which also rules out any path outside the tile tree.
func (s *Server) handleTile(w http.ResponseWriter, r *http.Request) {
	rest := strings.TrimPrefix(r.URL.Path, "/tile/")
	level, index, found := strings.Cut(rest, "/")
	if !found {
		http.NotFound(w, r)
		return
	}
	var canonical string
	entries := level == "entries"
	if entries {
		n, p, err := layout.ParseTileIndexPartial(index)
		if err != nil {
			http.NotFound(w, r)
			return
		}
		canonical = layout.EntriesPath(n, p)
	} else {
		l, n, p, err := layout.ParseTileLevelIndexPartial(level, index)
		if err != nil {
			http.NotFound(w, r)
			return
		}
		canonical = layout.TilePath(l, n, p)
	}
	if "/"+canonical != r.URL.Path {
		http.NotFound(w, r)
		return
	}
	data, err := os.ReadFile(filepath.Join(s.k.LogPath(), filepath.FromSlash(canonical)))
	if errors.Is(err, os.ErrNotExist) {
		http.NotFound(w, r)
		return
	} else if err != nil {
		s.fail(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	if strings.Contains(canonical, ".p/") {
		// A partial tile never changes, but it may be deleted once full.
		w.Header().Set("Cache-Control", "public, max-age=3600")
	} else {
		w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
	}
	if entries && acceptsGzip(r) {
		w.Header().Set("Content-Encoding", "gzip")
		w.Header().Add("Vary", "Accept-Encoding")
		gz, _ := gzip.NewWriterLevel(w, gzip.BestSpeed)
		gz.Write(data)
		gz.Close()
		return
	}
	w.Write(data)
}

func acceptsGzip(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept-Encoding"), ",") {
		coding, _, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.EqualFold(coding, "gzip") {
			return true
		}
	}
	return false
}
