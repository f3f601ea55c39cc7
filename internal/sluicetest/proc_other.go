//go:build !linux

package sluicetest

import "os/exec"

// dieWithParent does nothing outside Linux: an interrupted run may leave
// the gateway behind there.
func dieWithParent(*exec.Cmd) {}
