//go:build !unix || aix

package client

import (
	"errors"
	"net"
	"syscall"
)

// connAlive cannot peek here without waiting: a kept connection is taken
// as alive, and a request that finds it closed is sent again as
// sendAgain allows.
func connAlive(net.Conn) bool { return true }

// isConnReset reports whether err is the server resetting the connection.
func isConnReset(err error) bool {
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}
