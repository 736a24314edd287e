package witness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"

	"github.com/annal-dev/annal/checkpoints"
	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/rfc6962"
	"github.com/transparency-dev/tessera/api/layout"
	"github.com/transparency-dev/tessera/client"
)

// MaxGossipAnswerSize bounds every answer gossip reads: a peer's
// checkpoint, a log's checkpoint, a tile (8 KiB at most).
const MaxGossipAnswerSize = checkpoints.MaxCheckpointSize

// errAnswerTooLarge is the read error of an answer past MaxGossipAnswerSize.
var errAnswerTooLarge = fmt.Errorf("answer is longer than %d bytes", MaxGossipAnswerSize)

// logTiles reads one log's c2sp.org/tlog-tiles with Tessera's client: the
// roots and proofs gossip needs come from the tiles' hashes, a few tiles
// per tree size, never from the log's entries. It is used by one goroutine.
type logTiles struct {
	fetcher *client.HTTPFetcher
	// published is the size of the log's checkpoint, read once if a tile
	// is missing; publishedErr is why it could not be.
	published    *uint64
	publishedErr error
}

func newLogTiles(tileURL string, hc *http.Client) (*logTiles, error) {
	u, err := url.Parse(tileURL)
	if err != nil {
		return nil, fmt.Errorf("tile URL %q: %w", abbreviate(tileURL), err)
	}
	f, err := client.NewHTTPFetcher(u, hc)
	if err != nil {
		return nil, err
	}
	return &logTiles{fetcher: f}, nil
}

// rootAt is the root of the tiles' tree of size entries, from the hashes of
// its compact range.
func (t *logTiles) rootAt(ctx context.Context, size uint64) ([]byte, error) {
	hashes, err := client.FetchRangeNodes(ctx, size, t.readTile)
	if err != nil {
		return nil, fmt.Errorf("tiles of the tree of size %d: %w", size, err)
	}
	rf := compact.RangeFactory{Hash: rfc6962.DefaultHasher.HashChildren}
	r, err := rf.NewRange(0, size, hashes)
	if err != nil {
		return nil, fmt.Errorf("tiles of the tree of size %d: %w", size, err)
	}
	root, err := r.GetRootHash(nil)
	if err != nil {
		return nil, fmt.Errorf("tiles of the tree of size %d: %w", size, err)
	}
	return root, nil
}

// consistency is the consistency proof from small to large, built from the
// tiles of the tree of size large.
func (t *logTiles) consistency(ctx context.Context, small, large uint64) ([][]byte, error) {
	pb, err := client.NewProofBuilder(ctx, large, t.readTile)
	if err != nil {
		return nil, err
	}
	p, err := pb.ConsistencyProof(ctx, small, large)
	if err != nil {
		return nil, fmt.Errorf("consistency proof from %d to %d from the tiles: %w", small, large, err)
	}
	return p, nil
}

// readTile is Tessera's tile fetcher (the partial tile of width p, else the
// full tile) with one more fallback: the wider partial tile of the log's
// current size. A log keeps the partial tiles of the sizes it published,
// or not (c2sp.org/tlog-tiles lets it delete them); a witness may need one
// for a size the log never published, such as a hidden fork's. Only the
// tile's first p hashes are used, and whatever the tile holds, gossip
// checks the roots it gives against the signed checkpoints.
func (t *logTiles) readTile(ctx context.Context, level, index uint64, p uint8) ([]byte, error) {
	tile, err := t.fetcher.ReadTile(ctx, level, index, p)
	if p == 0 || !errors.Is(err, os.ErrNotExist) {
		return tile, err
	}
	size, perr := t.publishedSize(ctx)
	if perr != nil {
		return nil, err
	}
	if w := layout.PartialTileSize(level, index, size); w > p {
		return t.fetcher.ReadTile(ctx, level, index, w)
	}
	return nil, err
}

// publishedSize is the size of the log's checkpoint. It is only a hint of
// which partial tiles exist, so its signature is not checked.
func (t *logTiles) publishedSize(ctx context.Context) (uint64, error) {
	if t.published == nil && t.publishedErr == nil {
		var cp checkpoints.Checkpoint
		answer, err := t.checkpoint(ctx)
		if err == nil {
			cp, err = ParseSignedCheckpoint(answer)
		}
		t.published, t.publishedErr = &cp.Size, err
	}
	return *t.published, t.publishedErr
}

// checkpoint is the log's own latest checkpoint, <tile URL>/checkpoint.
func (t *logTiles) checkpoint(ctx context.Context) ([]byte, error) {
	return t.fetcher.ReadCheckpoint(ctx)
}

// limitedTransport cuts every answer body at max bytes: reading past it
// fails with errAnswerTooLarge. Tessera's fetcher reads whole bodies, so the
// bound has to sit under it.
type limitedTransport struct {
	base http.RoundTripper
	max  int64
}

func (t limitedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	resp.Body = &limitedBody{rc: resp.Body, left: t.max}
	return resp, nil
}

type limitedBody struct {
	rc   io.ReadCloser
	left int64
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		var one [1]byte
		n, err := b.rc.Read(one[:])
		if n > 0 {
			return 0, errAnswerTooLarge
		}
		if err == nil {
			// Nothing read, nothing refused: the caller reads again.
			return 0, nil
		}
		return 0, err
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	return n, err
}

func (b *limitedBody) Close() error { return b.rc.Close() }
