//go:build !linux

package witness

import "errors"

// No native AIO here: the journal's writes are made at once.
type aioContext uintptr

func newAIO() aioContext { return 0 }

func (c aioContext) destroy() {}

func (c aioContext) submitWrite(fd uintptr, b []byte, off int64) error {
	return errAIOUnsupported
}

func (c aioContext) wait() (int, error) { return 0, errAIOUnsupported }

var errAIOUnsupported = errors.New("asynchronous write refused")

func aioRefusedKind(err error) bool { return true }
