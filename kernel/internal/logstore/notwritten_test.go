package logstore

import (
	"errors"
	"fmt"
	"testing"

	"github.com/transparency-dev/tessera"
)

// Tessera's AWS driver's errors, as its assignEntries words them: those
// before the commit was sent are definite (ErrNotWritten), a failed commit
// is not (its answer may have been lost after it landed), and pushback
// stays pushback.
func TestClassifyAWSAppend(t *testing.T) {
	for _, c := range []struct {
		err        string
		notWritten bool
	}{
		{"failed to read integration coordination info: dial tcp 127.0.0.1:3306: connect: connection refused", true},
		{"failed to begin Tx: driver: bad connection", true},
		{"failed to read seqcoord: Error 1205 (HY000): Lock wait timeout exceeded", true},
		{"insert into seq: Error 1644 (45000): " + fenceRefusal, true},
		{"update seqcoord: invalid connection", true},
		{"failed to commit Tx: invalid connection", false},
		{"something else", false},
		{"prefix then failed to begin Tx: x", false},
	} {
		err := classifyAWSAppend(errors.New(c.err))
		if got := errors.Is(err, ErrNotWritten); got != c.notWritten {
			t.Errorf("%q: not written %v, want %v", c.err, got, c.notWritten)
		}
	}
	push := fmt.Errorf("%w: too many", tessera.ErrPushback)
	if err := classifyAWSAppend(push); err != push {
		t.Errorf("pushback became %v", err)
	}
	if classifyAWSAppend(nil) != nil {
		t.Error("no error became one")
	}
}
