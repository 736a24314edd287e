package logstore

import (
	"fmt"
	"io"
	"path/filepath"
	"syscall"

	"github.com/transparency-dev/tessera/api/layout"
)

// leafChunkReader reads n bytes at off of full level-0 tiles in the data
// folder root with open, pread and close: an os.File would add an fstat
// or a poller registration and a finalizer to each proof's read.
func leafChunkReader(root string) func(index uint64, off, n int) ([]byte, error) {
	return func(index uint64, off, n int) ([]byte, error) {
		name := filepath.Join(root, layout.TilePath(0, index, 0))
		fd, err := syscall.Open(name, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
		for err == syscall.EINTR {
			fd, err = syscall.Open(name, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
		}
		if err != nil {
			return nil, fmt.Errorf("open %s: %w", name, err)
		}
		defer syscall.Close(fd)
		buf := make([]byte, n)
		for read := 0; read < n; {
			k, err := syscall.Pread(fd, buf[read:], int64(off+read))
			switch {
			case err == syscall.EINTR:
				continue
			case err != nil:
				return nil, fmt.Errorf("read %s: %w", name, err)
			case k == 0:
				return nil, fmt.Errorf("read %d bytes at %d of %s: %w", n, off, name, io.ErrUnexpectedEOF)
			}
			read += k
		}
		return buf, nil
	}
}
