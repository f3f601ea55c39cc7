//go:build !linux

package benchproc

import "errors"

// Pin is not supported outside Linux.
func Pin(pid int, cpus []int) error { return errors.New("pinning to CPUs needs Linux") }
