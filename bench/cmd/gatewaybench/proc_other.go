//go:build !linux

package main

import (
	"os/exec"
	"time"
)

// setDeathSignal does nothing outside Linux: an interrupted run may leave
// children behind there.
func setDeathSignal(*exec.Cmd) {}

// processCPU is not available outside Linux.
func processCPU(int) (time.Duration, bool) { return 0, false }

// loadAvg is not available outside Linux.
func loadAvg() string { return "n/a" }
