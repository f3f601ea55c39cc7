//go:build !linux

package e2e

import (
	"errors"
	"syscall"
)

// canCountQueued reports whether queuedBytes and drainPending work here:
// they need Linux.
const canCountQueued = false

func queuedBytes(syscall.Conn) (int, []byte, error) { return 0, nil, errors.ErrUnsupported }

func drainPending(syscall.Conn, func([]byte)) (conns, reached int, err error) {
	return 0, 0, errors.ErrUnsupported
}
