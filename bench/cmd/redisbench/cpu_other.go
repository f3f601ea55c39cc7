//go:build !linux

package main

import "time"

// selfCPU is not measured outside Linux.
func selfCPU() (time.Duration, bool) { return 0, false }
