//go:build !linux

package upconn

import "net"

// peerClosedFirst reports false: without Linux's EPIPE after a FIN, a
// request whose write succeeded counts as reached.
func peerClosedFirst(*net.TCPConn) bool { return false }
