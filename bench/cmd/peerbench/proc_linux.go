package main

import (
	"os"
	"os/exec"
	"strings"
	"syscall"
)

// setDeathSignal makes the kernel send sig to cmd's process if the harness
// dies first, so an interrupted run leaves no server behind.
func setDeathSignal(cmd *exec.Cmd, sig syscall.Signal) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: sig}
}

// loadAvg returns the 1, 5 and 15 minute load averages from /proc/loadavg.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "n/a"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "n/a"
	}
	return strings.Join(f[:3], " ")
}
