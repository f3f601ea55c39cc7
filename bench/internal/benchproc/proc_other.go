//go:build !linux

package benchproc

import "time"

// ProcessCPU is not available outside Linux; it always reports false.
func ProcessCPU(int) (time.Duration, bool) { return 0, false }
