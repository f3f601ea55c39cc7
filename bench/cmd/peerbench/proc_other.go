//go:build !linux

package main

import (
	"os/exec"
	"syscall"
)

// setDeathSignal does nothing outside Linux: an interrupted run may leave
// servers behind there.
func setDeathSignal(*exec.Cmd, syscall.Signal) {}
