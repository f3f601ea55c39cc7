package main

import (
	"os/exec"
	"syscall"
)

// setDeathSignal makes the kernel kill the child when the harness dies, so an
// interrupted run leaves no redis-server behind.
func setDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
