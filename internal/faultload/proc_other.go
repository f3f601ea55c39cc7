//go:build !linux

package faultload

import "os/exec"

// dieWithParent does nothing outside Linux: an interrupted run may leave
// the gateway running there.
func dieWithParent(*exec.Cmd) {}
