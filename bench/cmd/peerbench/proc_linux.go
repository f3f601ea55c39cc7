package main

import (
	"os/exec"
	"syscall"
)

// setDeathSignal makes the kernel send sig to cmd's process if the harness
// dies first, so an interrupted run leaves no server behind.
func setDeathSignal(cmd *exec.Cmd, sig syscall.Signal) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: sig}
}
