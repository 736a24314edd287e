package servicestest

import (
	"net"
	"testing"
	"time"
)

// FreePort returns a port of 127.0.0.1 that nothing listens on now, for a
// server a test starts (and may start again on the same port).
func FreePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// Listening waits up to timeout until something accepts connections at
// addr, and reports whether it did.
func Listening(addr string, timeout time.Duration) bool {
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return true
		}
	}
	return false
}
