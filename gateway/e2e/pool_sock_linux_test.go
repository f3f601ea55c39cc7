package e2e

import (
	"syscall"
	"unsafe"
)

// canCountQueued reports whether queuedBytes and drainPending work here.
const canCountQueued = true

// queuedBytes returns how many bytes wait unread in c's kernel receive
// queue (ioctl SIOCINQ, which is FIONREAD) and a copy of the first of
// them (up to 16 KiB), left in the queue.
func queuedBytes(c syscall.Conn) (int, []byte, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return 0, nil, err
	}
	var n int
	var head []byte
	var qerr error
	if err := rc.Control(func(fd uintptr) { n, head, qerr = fdQueued(fd) }); err != nil {
		return 0, nil, err
	}
	return n, head, qerr
}

func fdQueued(fd uintptr) (int, []byte, error) {
	var n int32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TIOCINQ, uintptr(unsafe.Pointer(&n))); e != 0 {
		return 0, nil, e
	}
	if n == 0 {
		return 0, nil, nil
	}
	buf := make([]byte, min(int(n), 16<<10))
	k, _, err := syscall.Recvfrom(int(fd), buf, syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	if err != nil {
		return int(n), nil, nil // the count stands; the bytes are unknown
	}
	return int(n), buf[:k], nil
}

// drainPending accepts every connection waiting in ln's accept backlog
// (connected, never accepted) without blocking, and closes each at once
// after looking at its receive queue, whose first bytes it passes to
// queued when there are any. It returns how many connections it found and
// how many held at least one byte (or could not be looked at). A
// connection accepted concurrently by a goroutine blocked in ln.Accept is
// not among them.
func drainPending(ln syscall.Conn, queued func(head []byte)) (conns, reached int, err error) {
	rc, err := ln.SyscallConn()
	if err != nil {
		return 0, 0, err
	}
	cerr := rc.Control(func(fd uintptr) {
		for {
			// The listening socket is non-blocking: EAGAIN once empty.
			nfd, _, aerr := syscall.Accept4(int(fd), syscall.SOCK_CLOEXEC)
			if aerr == syscall.EINTR || aerr == syscall.ECONNABORTED {
				continue
			}
			if aerr != nil {
				if aerr != syscall.EAGAIN {
					err = aerr
				}
				return
			}
			conns++
			q, head, qerr := fdQueued(uintptr(nfd))
			if qerr != nil || q > 0 {
				reached++
			}
			if len(head) > 0 {
				queued(head)
			}
			syscall.Close(nfd) // a reset if bytes wait unread
		}
	})
	if cerr != nil {
		return conns, reached, cerr
	}
	return conns, reached, err
}
