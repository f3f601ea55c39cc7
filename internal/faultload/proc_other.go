//go:build !linux

package faultload

import (
	"errors"
	"os/exec"
)

// dieWithParent does nothing outside Linux: an interrupted run may leave
// the gateway running there.
func dieWithParent(*exec.Cmd) {}

// fdCount needs /proc; outside Linux it reports an error.
func fdCount(pid, port int, http ...int) (total, toPort, onHTTP int, err error) {
	return 0, 0, 0, errors.New("faultload: fd count needs /proc (Linux)")
}
