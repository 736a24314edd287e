//go:build linux

package witness

import (
	"errors"
	"fmt"
	"runtime"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Linux native AIO (io_submit) for the journal's direct writes
// (journal_direct.go): submitted, the write of a frame goes on in the
// device while the goroutine that made it does something else, and it
// waits for it after. Why: with one client, a request's ML-DSA-44
// signature (~0.15 ms) and its durable write (~0.14 ms, mostly the
// device) can overlap on one thread; on a goroutine of its own the
// signature needs a second processor at that moment, which a shared
// machine often does not have (then the two take turns, and the write's
// own processor time waits behind the signature).

// aioContext is a kernel AIO context of one slot.
type aioContext uintptr

// aioIocb is struct iocb of linux/aio_abi.h (little-endian layout).
type aioIocb struct {
	data      uint64
	key       uint32
	rwFlags   int32
	opcode    uint16
	reqprio   int16
	fildes    uint32
	buf       uint64
	nbytes    uint64
	offset    int64
	reserved2 uint64
	flags     uint32
	resfd     uint32
}

// aioEvent is struct io_event.
type aioEvent struct {
	data, obj uint64
	res, res2 int64
}

const aioCmdPwrite = 1

// newAIO makes a context, or returns 0 if the system refuses one.
func newAIO() aioContext {
	if runtime.GOARCH != "amd64" && runtime.GOARCH != "arm64" {
		return 0 // the layouts above are those of little-endian 64-bit systems
	}
	var ctx aioContext
	if _, _, e := unix.Syscall(unix.SYS_IO_SETUP, 1, uintptr(unsafe.Pointer(&ctx)), 0); e != 0 {
		return 0
	}
	return ctx
}

func (c aioContext) destroy() { unix.Syscall(unix.SYS_IO_DESTROY, uintptr(c), 0, 0) }

// submitWrite starts writing b at off in fd. b must stay as it is until
// wait returns.
func (c aioContext) submitWrite(fd uintptr, b []byte, off int64) error {
	cb := aioIocb{opcode: aioCmdPwrite, fildes: uint32(fd), buf: uint64(uintptr(unsafe.Pointer(unsafe.SliceData(b)))), nbytes: uint64(len(b)), offset: off}
	list := [1]*aioIocb{&cb}
	for {
		n, _, e := unix.Syscall(unix.SYS_IO_SUBMIT, uintptr(c), 1, uintptr(unsafe.Pointer(&list[0])))
		switch {
		case e == unix.EINTR || e == unix.EAGAIN:
			continue
		case e != 0:
			return e
		case n != 1:
			return fmt.Errorf("io_submit took %d of 1 writes", n)
		}
		return nil
	}
}

// wait waits for the write submitted, and returns the bytes it wrote. It
// sleeps in io_getevents: polling for the completion instead (a zero
// timeout, up to 200 µs) was 0.02–0.03 ms faster at p50 on a quiet
// machine and 0.15 ms slower on a busy one (2026-11-28, one client,
// interleaved), where a thread that sleeps is given a processor sooner
// when it wakes.
func (c aioContext) wait() (int, error) {
	var ev aioEvent
	for {
		n, _, e := unix.Syscall6(unix.SYS_IO_GETEVENTS, uintptr(c), 1, 1, uintptr(unsafe.Pointer(&ev)), 0, 0)
		if e == unix.EINTR {
			continue
		}
		if e != 0 {
			return 0, e
		}
		if n == 1 {
			break
		}
	}
	if ev.res < 0 {
		return 0, syscall.Errno(-ev.res)
	}
	return int(ev.res), nil
}

// aioRefusedKind says whether a submission was refused for the kind of
// write (not for a failure of the device): the write is then made at
// once instead, and later ones too.
func aioRefusedKind(err error) bool {
	return errors.Is(err, unix.EINVAL) || errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOSYS)
}
