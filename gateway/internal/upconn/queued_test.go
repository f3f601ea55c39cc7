package upconn

import (
	"net"
	"syscall"
	"testing"
	"unsafe"
)

// queued reports whether c's receive queue holds a byte (FIONREAD).
func queued(t *testing.T, c *net.TCPConn) bool {
	t.Helper()
	rc, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var n int32
	rc.Control(func(fd uintptr) {
		syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TIOCINQ, uintptr(unsafe.Pointer(&n)))
	})
	return n > 0
}
