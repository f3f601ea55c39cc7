//go:build !linux

package faultload

import "errors"

// fdCount needs /proc; outside Linux it reports an error.
func fdCount(pid, port int, http ...int) (total, toPort, onHTTP int, err error) {
	return 0, 0, 0, errors.New("faultload: fd count needs /proc (Linux)")
}
