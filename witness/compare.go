package witness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
)

// Reasons a pair of checkpoints could not be checked. None is evidence.
var (
	errNoTileURL      = errors.New("the log has no tile URL: checkpoints of different sizes cannot be checked")
	errEmptyTreeRoots = errors.New("two roots for the empty tree: the evidence format cannot show it")
	errTilesMatchNone = errors.New("the log's tiles match neither checkpoint")
)

// compare checks two checkpoints of one log, both signed by it. It returns
// nil for consistent, a split for an equivocation, and an error when it
// cannot tell (which is never evidence):
//
//   - Same size: consistent if the roots are equal, else a split.
//   - Different sizes: the log's tiles give the tree at the larger size,
//     its prefix at the smaller size, and the consistency proof between
//     them (checked, so that tiles contradicting themselves are refused).
//     If the tiles' tree has the larger checkpoint's root, the smaller
//     checkpoint is consistent if it has the prefix's root, and a split
//     otherwise: that proof against the larger root is the evidence.
//   - If instead the tiles follow the smaller checkpoint (same prefix
//     root) but not the larger one, the tiles cannot prove anything against
//     the larger root. The log's own checkpoint at <tile URL>/checkpoint
//     can: if the log signed it, it is at least the larger size, and the
//     tiles have its root, then it and the larger checkpoint are the split,
//     with the proof from the larger size to it.
//   - Tiles that match neither checkpoint, or are missing, prove nothing.
func (w *Witness) compare(ctx context.Context, cfg LogConfig, a, b sighting) (*split, error) {
	small, large := a, b
	if treeLess(large.cp, small.cp) {
		small, large = large, small
	}
	switch {
	case small.cp.Size == large.cp.Size && small.cp.Hash == large.cp.Hash:
		return nil, nil
	case small.cp.Size == large.cp.Size && small.cp.Size == 0:
		return nil, errEmptyTreeRoots
	case small.cp.Size == large.cp.Size:
		return &split{small: small, large: large}, nil
	case small.cp.Size == 0:
		// Every tree extends the empty one.
		return nil, nil
	case cfg.TileURL == "":
		return nil, errNoTileURL
	}
	tiles, err := newLogTiles(cfg.TileURL, w.gossip.client)
	if err != nil {
		return nil, err
	}
	smallRoot, largeRoot, p, err := tileRange(ctx, tiles, small.cp.Size, large.cp.Size)
	if err != nil {
		return nil, err
	}
	switch {
	case bytes.Equal(largeRoot, large.cp.Hash[:]) && bytes.Equal(smallRoot, small.cp.Hash[:]):
		return nil, nil
	case bytes.Equal(largeRoot, large.cp.Hash[:]):
		return &split{small: small, large: large, prefixRoot: smallRoot, proof: p}, nil
	case bytes.Equal(smallRoot, small.cp.Hash[:]):
		return w.againstPublished(ctx, cfg, tiles, large, largeRoot)
	}
	return nil, fmt.Errorf("%w: at size %d the tiles have root %s, the checkpoint %s; at size %d the tiles have %s, the checkpoint %s",
		errTilesMatchNone, large.cp.Size, b64(largeRoot), b64(large.cp.Hash[:]), small.cp.Size, b64(smallRoot), b64(small.cp.Hash[:]))
}

// againstPublished builds the split between a checkpoint the tiles
// contradict at its own size (tilesRoot is theirs) and the log's own
// published checkpoint, when the tiles prove that one.
func (w *Witness) againstPublished(ctx context.Context, cfg LogConfig, tiles *logTiles, contradicted sighting, tilesRoot []byte) (*split, error) {
	size := contradicted.cp.Size
	answer, err := tiles.checkpoint(ctx)
	if err != nil {
		return nil, fmt.Errorf("the tiles follow the smaller checkpoint, not the larger; the log's checkpoint: %w", err)
	}
	published, err := openServedCheckpoint(answer, cfg, nil)
	if err != nil {
		return nil, fmt.Errorf("the tiles follow the smaller checkpoint, not the larger; the log's checkpoint: %w", err)
	}
	published.by, published.at = w.cosigner.Name(), time.Now()
	n := published.cp.Size
	switch {
	case n < size:
		return nil, fmt.Errorf("the tiles follow the smaller checkpoint, not the larger; the log's checkpoint, size %d, is behind the larger size %d", n, size)
	case n == size:
		if !bytes.Equal(published.cp.Hash[:], tilesRoot) {
			return nil, fmt.Errorf("the log's checkpoint of size %d has root %s, its tiles %s", n, b64(published.cp.Hash[:]), b64(tilesRoot))
		}
		return &split{small: contradicted, large: published}, nil
	}
	prefix, root, p, err := tileRange(ctx, tiles, size, n)
	if err != nil {
		return nil, err
	}
	if !bytes.Equal(root, published.cp.Hash[:]) || !bytes.Equal(prefix, tilesRoot) {
		return nil, fmt.Errorf("the log's checkpoint of size %d has root %s, its tiles %s", n, b64(published.cp.Hash[:]), b64(root))
	}
	return &split{small: contradicted, large: published, prefixRoot: prefix, proof: p}, nil
}

// tileRange reads, from the tiles, the roots of the trees of sizes small
// and large (small < large) and the consistency proof between them, and
// checks that proof: tiles that contradict themselves prove nothing.
func tileRange(ctx context.Context, tiles *logTiles, small, large uint64) (smallRoot, largeRoot []byte, p [][]byte, err error) {
	if largeRoot, err = tiles.rootAt(ctx, large); err != nil {
		return nil, nil, nil, err
	}
	if smallRoot, err = tiles.rootAt(ctx, small); err != nil {
		return nil, nil, nil, err
	}
	if p, err = tiles.consistency(ctx, small, large); err != nil {
		return nil, nil, nil, err
	}
	if err := proof.VerifyConsistency(rfc6962.DefaultHasher, small, large, p, smallRoot, largeRoot); err != nil {
		return nil, nil, nil, fmt.Errorf("the log's tiles contradict themselves between sizes %d and %d: %w", small, large, err)
	}
	return smallRoot, largeRoot, p, nil
}
