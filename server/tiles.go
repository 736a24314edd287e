package server

import (
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"net/http"
	"os"
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
//
// A partial tile or bundle of width W that Tessera's garbage collector has
// removed, because the full one replaced it, is answered with the full
// one's first W hashes or entries: the same bytes, since a tile's hashes
// and a bundle's entries never change once written. So a client holding
// an older checkpoint gets what it asks for, whether or not it would fall
// back to the full tile itself (c2sp.org/tlog-tiles lets a log delete
// partials, and Tessera's own clients do fall back).
func (s *Server) handleTile(w http.ResponseWriter, r *http.Request) {
	rest := strings.TrimPrefix(r.URL.Path, "/tile/")
	level, index, found := strings.Cut(rest, "/")
	if !found {
		http.NotFound(w, r)
		return
	}
	var canonical string
	var read func(p uint8) ([]byte, error)
	var width uint8
	entries := level == "entries"
	if entries {
		n, p, err := layout.ParseTileIndexPartial(index)
		if err != nil {
			http.NotFound(w, r)
			return
		}
		canonical, width = layout.EntriesPath(n, p), p
		read = func(p uint8) ([]byte, error) { return s.k.EntryBundleBytes(r.Context(), n, p) }
	} else {
		l, n, p, err := layout.ParseTileLevelIndexPartial(level, index)
		if err != nil {
			http.NotFound(w, r)
			return
		}
		canonical, width = layout.TilePath(l, n, p), p
		read = func(p uint8) ([]byte, error) { return s.k.TileBytes(r.Context(), l, n, p) }
	}
	if "/"+canonical != r.URL.Path {
		http.NotFound(w, r)
		return
	}
	data, err := read(width)
	if errors.Is(err, os.ErrNotExist) && width > 0 {
		data, err = read(0)
	}
	if err == nil && width > 0 {
		// The storage may answer with the full tile itself (Tessera's
		// POSIX reader does once the partial is gone): the partial is its
		// prefix.
		data, err = partialOf(data, width, entries)
	}
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

// partialOf cuts a full hash tile to its first width hashes, or a full entry
// bundle to its first width entries (each a big-endian uint16 length and
// that many bytes): the partial tile or bundle of that width.
func partialOf(full []byte, width uint8, entries bool) ([]byte, error) {
	if !entries {
		n := int(width) * 32
		if len(full) < n {
			return nil, fmt.Errorf("full tile has %d bytes, a partial of width %d needs %d", len(full), width, n)
		}
		return full[:n], nil
	}
	end := 0
	for i := 0; i < int(width); i++ {
		if end+2 > len(full) {
			return nil, fmt.Errorf("full entry bundle ends within entry %d", i)
		}
		end += 2 + int(binary.BigEndian.Uint16(full[end:]))
		if end > len(full) {
			return nil, fmt.Errorf("full entry bundle ends within entry %d", i)
		}
	}
	return full[:end], nil
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
