package logstore

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/transparency-dev/tessera"
)

// ErrNotWritten marks an append the log refused before committing
// anything: the entry is not in the log and never will be, so the request
// may be sent again as it is. An append error without it may have landed
// (its outcome is unknown).
var ErrNotWritten = errors.New("not written")

// awsDefiniteFailures are the beginnings of the errors Tessera's AWS
// driver answers a batch with when it failed before its transaction's
// commit was sent (storage/aws assignEntries): the database rolled the
// transaction back, or it never began. Tessera formats the cause with %v,
// so its text is all there is to tell them by. "failed to commit Tx" is not
// among them: a commit whose answer was lost may have landed.
var awsDefiniteFailures = []string{
	"failed to read integration coordination info:", // before the transaction
	"failed to begin Tx:",
	"failed to read seqcoord:",
	"failed to serialise batch:",
	"insert into seq:", // the fence's refusal (fenceRefusal) comes as this
	"update seqcoord:",
}

// classifyAWSAppend marks err with ErrNotWritten when Tessera's AWS driver
// failed before committing the batch.
func classifyAWSAppend(err error) error {
	if err == nil || errors.Is(err, tessera.ErrPushback) {
		return err
	}
	msg := err.Error()
	for _, prefix := range awsDefiniteFailures {
		if strings.HasPrefix(msg, prefix) {
			if strings.Contains(msg, fenceRefusal) {
				return fmt.Errorf("%w: the log's fence refused the batch (this kernel does not hold an unexpired write lease): %v", ErrNotWritten, err)
			}
			return fmt.Errorf("%w: %v", ErrNotWritten, err)
		}
	}
	return err
}

// classifiedAWSAdd is add with its failures classified (classifyAWSAppend).
func classifiedAWSAdd(add tessera.AddFn) tessera.AddFn {
	return func(ctx context.Context, e *tessera.Entry) tessera.IndexFuture {
		f := add(ctx, e)
		return func() (tessera.Index, error) {
			idx, err := f()
			return idx, classifyAWSAppend(err)
		}
	}
}
