//go:build !unix

package redistest

import (
	"fmt"
	"syscall"
)

func platformSupported() error {
	return fmt.Errorf("%w: process control needs a unix system", ErrUnavailable)
}

func sysProcAttr() *syscall.SysProcAttr { return nil }

func signalGroup(pid int, sig syscall.Signal) error { return platformSupported() }

func signalProcess(pid int, sig syscall.Signal) error { return platformSupported() }

const (
	sigKill = syscall.Signal(9)
	sigStop = syscall.Signal(19)
	sigCont = syscall.Signal(18)
)
