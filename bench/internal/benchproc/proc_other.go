//go:build !linux

package benchproc

import (
	"os/exec"
	"time"
)

// SetDeathSignal does nothing outside Linux: an interrupted run may leave
// children behind there.
func SetDeathSignal(*exec.Cmd) {}

// ProcessCPU is not available outside Linux; it always reports false.
func ProcessCPU(int) (time.Duration, bool) { return 0, false }
