//go:build unix && !linux

package redistest

import "syscall"

// sysProcAttr puts the server in its own process group. Without Linux's
// Pdeathsig a server outlives a test binary that dies without cleanup, so
// always Close servers (t.Cleanup, or a deferred Close in TestMain).
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
