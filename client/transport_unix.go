//go:build unix && !aix

package client

import (
	"errors"
	"net"
	"syscall"
)

// connAlive reports whether a kept connection can carry another request:
// the server has not closed it, reset it, or sent anything unasked (a
// server that times an idle connection out may answer 408 first). It
// peeks without waiting and without taking a byte.
func connAlive(nc net.Conn) bool {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return true
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	alive := false
	var b [1]byte
	err = rc.Read(func(fd uintptr) bool {
		_, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		alive = err == syscall.EAGAIN || err == syscall.EWOULDBLOCK
		return true
	})
	return err == nil && alive
}

// isConnReset reports whether err is the server resetting the connection.
func isConnReset(err error) bool {
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}
