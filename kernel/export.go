package kernel

import (
	"context"
	"io"

	"github.com/annal-dev/annal/kernel/internal/history"
)

// Export writes an audit bundle (format/bundle, testvectors/FORMATS.md,
// "Audit bundles") of the selected events to w, against the
// latest published checkpoint exactly as the log serves it (with the
// witnesses' cosignatures when the kernel runs with a witness policy). It
// reads the log's entry bundles in order and holds one of them, a few tiles
// and one output buffer at a time, whatever the number of events. Nothing
// is written until the first selected event is found: a selection of no
// event is ErrNotFound with w untouched. progress, if not nil, is called
// with the entries scanned and the entries to scan.
func (k *Kernel) Export(ctx context.Context, sel ExportSelection, w io.Writer, progress func(done, total uint64)) (*ExportResult, error) {
	return history.Export(ctx, k.log, k.openingOf, sel, w, progress)
}
