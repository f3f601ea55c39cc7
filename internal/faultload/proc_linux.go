package faultload

import (
	"os/exec"
	"syscall"
)

// dieWithParent makes the kernel kill cmd if the harness dies first, so an
// interrupted run leaves no gateway behind.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
