package sluicetest

import (
	"os/exec"
	"syscall"
)

// dieWithParent makes the kernel kill cmd if the caller dies first, so an
// interrupted run leaves no gateway behind.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
