//go:build !linux

package benchproc

import "time"

// ProcessCPU is not available outside Linux; it always reports false.
func ProcessCPU(int) (time.Duration, bool) { return 0, false }

// TreeCPU is not available outside Linux; it always reports false.
func TreeCPU(int) (time.Duration, bool) { return 0, false }

// Descendants is not available outside Linux; it always returns nil.
func Descendants(int) []int { return nil }
