// Package upconn is the connection both engines keep to an upstream
// target. It tells whether any byte of a request reached the target, the
// fact a pool's retries turn on (docs/operations.md, "Upstream pools"):
// a request is tried again only when none did.
//
// A byte reached the target when a write of it succeeded, unless the
// target had closed the connection before it arrived. The sender sees
// that case as a reset answering its bytes after the target's FIN (on
// Linux, SO_ERROR is EPIPE) and trusts it only for a request written in
// one write: a target that read the first part of a request in two writes
// and then closed resets the second the same way. Bytes a target received
// and never read (in its socket's queue when it closed) reached it.
package upconn

import (
	"crypto/tls"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// ErrRefused is the error of a write on a connection that refuses the
// request (Refuse): nothing is written.
var ErrRefused = errors.New("upconn: the request already reached the target on another connection")

// Conn is a TCP connection to an upstream target that counts what is
// written on it.
type Conn struct {
	*net.TCPConn
	written atomic.Int64 // bytes
	writes  atomic.Int64 // successful Write calls
	refuse  atomic.Bool
	// closedFirst is set when the connection is closed: the target had
	// closed it before the last bytes written arrived (peerClosedFirst).
	closedFirst atomic.Bool
	closeOnce   sync.Once
	closed      atomic.Bool
	used        atomic.Int64 // Unix nanoseconds: Use
}

// Wrap returns c as a Conn; c is a *net.TCPConn, else Wrap returns nil.
func Wrap(c net.Conn) *Conn {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return nil
	}
	return &Conn{TCPConn: tc}
}

// Of returns the Conn under c (itself, or under TLS), or nil.
func Of(c net.Conn) *Conn {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	uc, _ := c.(*Conn)
	return uc
}

func (c *Conn) Write(p []byte) (int, error) {
	if c.refuse.Load() {
		return 0, ErrRefused
	}
	n, err := c.TCPConn.Write(p)
	if n > 0 {
		c.written.Add(int64(n))
		c.writes.Add(1)
	}
	return n, err
}

// Close closes the connection, first noting whether the target had
// closed it before the last bytes written arrived.
func (c *Conn) Close() error {
	c.closeOnce.Do(func() {
		if c.written.Load() > 0 {
			c.firstClosed()
		}
		c.closed.Store(true)
	})
	return c.TCPConn.Close()
}

// Use notes that a request was answered on the connection at now (Unix
// nanoseconds); Idle tells how long ago, for a pool deciding whether a
// kept-alive connection is worth a look (PeerClosed) before it is used.
func (c *Conn) Use(now int64) { c.used.Store(now) }

// Idle returns how long before now (Unix nanoseconds) the connection was
// last used (Use), or now itself when it never was.
func (c *Conn) Idle(now int64) time.Duration { return time.Duration(now - c.used.Load()) }

// Refuse makes every later write fail with ErrRefused, writing nothing.
func (c *Conn) Refuse() { c.refuse.Store(true) }

// Mark is a point in a connection's writes: taken before a request is
// written, it tells afterwards whether the request reached the target.
type Mark struct{ written, writes int64 }

// Mark returns the connection's writes so far.
func (c *Conn) Mark() Mark { return Mark{c.written.Load(), c.writes.Load()} }

// Reached reports whether any byte written since m reached the target: a
// write succeeded, and (for a request written in one write) the target had
// not closed the connection before it arrived.
func (c *Conn) Reached(m Mark) bool {
	if c.written.Load() == m.written {
		return false
	}
	if c.writes.Load()-m.writes != 1 {
		return true
	}
	return !c.firstClosed()
}

// firstClosed reports whether the target had closed the connection before
// the last bytes written arrived. Reading the socket's pending error
// clears it, so what it saw is kept.
func (c *Conn) firstClosed() bool {
	if c.closedFirst.Load() {
		return true
	}
	if !c.closed.Load() && peerClosedFirst(c.TCPConn) {
		c.closedFirst.Store(true)
		return true
	}
	return false
}

// PeerClosed reports whether the target has closed or reset an idle
// connection, without reading from it (a non-blocking peek at the TCP
// connection: over TLS, a record the target sent, its close_notify say,
// reads as open).
func (c *Conn) PeerClosed() bool {
	rc, err := c.TCPConn.SyscallConn()
	if err != nil {
		return false
	}
	closed := false
	var b [1]byte
	rc.Read(func(fd uintptr) bool { //nolint:errcheck // the callback does all the work
		n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		closed = err == nil && n == 0 || err != nil && err != syscall.EAGAIN && err != syscall.EINTR
		return true
	})
	return closed
}
