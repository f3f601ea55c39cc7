//go:build !linux

package main

import "os/exec"

// setDeathSignal does nothing outside Linux; the harness kills its server on
// every normal exit path.
func setDeathSignal(*exec.Cmd) {}
