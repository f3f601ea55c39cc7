//go:build unix

package redistest

import (
	"errors"
	"syscall"
)

func platformSupported() error { return nil }

// signalGroup sends sig to the process group led by pid. Each redis-server
// leads its own group (Setpgid), so this also reaches any child it forked
// (a replication or cluster RDB child). ESRCH means the group is already gone.
func signalGroup(pid int, sig syscall.Signal) error {
	err := syscall.Kill(-pid, sig)
	if errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return err
}

// signalProcess sends sig to pid alone.
func signalProcess(pid int, sig syscall.Signal) error {
	return syscall.Kill(pid, sig)
}

const (
	sigKill = syscall.SIGKILL
	sigStop = syscall.SIGSTOP
	sigCont = syscall.SIGCONT
)
