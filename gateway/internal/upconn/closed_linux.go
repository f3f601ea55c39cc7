package upconn

import (
	"net"
	"syscall"
)

// peerClosedFirst reports whether the target reset the connection after
// closing it (its FIN came first): the reset answers bytes that arrived
// after the close, which its application never read. It reads the
// socket's pending error, which a read returning EOF leaves in place.
func peerClosedFirst(c *net.TCPConn) bool {
	rc, err := c.SyscallConn()
	if err != nil {
		return false
	}
	first := false
	rc.Control(func(fd uintptr) { //nolint:errcheck // the callback does all the work
		v, err := syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_ERROR)
		first = err == nil && syscall.Errno(v) == syscall.EPIPE
	})
	return first
}
