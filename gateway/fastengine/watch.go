package fastengine

import (
	"net"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sluice-gw/sluice/httplimit"
)

var _ httplimit.ClientWatcher = (*exchange)(nil)

// WatchClient watches the client's connection while shape mode holds the
// request: gone is closed when the client closes or resets it. The
// connection is peeked at, never read, so a request the client pipelined
// behind this one stays where the engine reads it (and ends the watch).
func (x *exchange) WatchClient() (<-chan struct{}, func()) {
	tc := tcpConnOf(x.ctx.Conn())
	if tc == nil {
		return nil, func() {}
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return nil, func() {}
	}
	// The watch reads within read_timeout of the request's start, or
	// without a bound; a request without a body still has its headers'
	// deadline (see newPublicServer).
	tc.SetReadDeadline(x.readDeadline) //nolint:errcheck // a closed connection ends the watch
	gone := make(chan struct{})
	exited := make(chan struct{})
	var stopped atomic.Bool
	go func() {
		defer close(exited)
		var b [1]byte
		rc.Read(func(fd uintptr) bool { //nolint:errcheck // a deadline or a closed connection ends the watch
			if stopped.Load() {
				return true
			}
			n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
			switch {
			case err == syscall.EAGAIN || err == syscall.EINTR:
				return false // nothing yet: wait until the connection is readable
			case err != nil || n == 0:
				close(gone) // reset, or closed: the client left
			}
			return true // a pipelined request, or gone
		})
	}()
	return gone, func() {
		stopped.Store(true)
		tc.SetReadDeadline(time.Now()) //nolint:errcheck // wakes the watch; restored below
		<-exited
		tc.SetReadDeadline(x.readDeadline) //nolint:errcheck // as the watch began
	}
}

// tcpConnOf returns the TCP connection under a public connection, or nil.
func tcpConnOf(c net.Conn) *net.TCPConn {
	switch c := c.(type) {
	case interface{ TCP() *net.TCPConn }: // connlimit.Conn
		return c.TCP()
	case *net.TCPConn:
		return c
	}
	return nil
}
