package redistest

import "syscall"

// sysProcAttr puts the server in its own process group, so Kill reaches any
// child it forked, and asks the kernel to SIGKILL it when the thread that
// started it exits. That covers a test binary that dies without cleanup
// (panic, os.Exit, go test -timeout, kill -9): the server does not outlive it.
// The Go runtime does not end its threads unless a goroutine exits while
// locked with runtime.LockOSThread, so do not start servers from such a
// goroutine.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
