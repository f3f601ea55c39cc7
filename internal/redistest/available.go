package redistest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"testing"
)

// ErrUnavailable is wrapped by the error from [Available], and so by the
// errors from [StartServer], [StartCluster] and [StartSentinel], when
// redis-server cannot be run on this machine (not on PATH, or an OS without
// process groups). Use errors.Is, or hand the error to [Check].
var ErrUnavailable = errors.New("redistest: redis-server unavailable")

// binaryName is the program started for every node, sentinels included
// (redis-server <conf> --sentinel), so redis-cli is never needed.
const binaryName = "redis-server"

// Available reports whether redis-server can be started: it returns nil when
// the binary is on PATH, and an error wrapping [ErrUnavailable] otherwise.
func Available() error {
	if err := platformSupported(); err != nil {
		return err
	}
	if _, err := exec.LookPath(binaryName); err != nil {
		return fmt.Errorf("%w: %s not found on PATH (install redis-server 7 or later)", ErrUnavailable, binaryName)
	}
	return nil
}

// Require skips the test when redis-server is unavailable, with a message
// saying why, or fails it when the environment has CI=true, so that a missing
// install in CI is noticed instead of silently skipping every Redis test.
func Require(t testing.TB) {
	t.Helper()
	Check(t, Available())
}

// Check ends the test when err is not nil: it skips when err wraps
// [ErrUnavailable] and CI is not "true", and fails otherwise. It is meant for
// the error kept from a [StartServer] call in TestMain:
//
//	func client(t *testing.T) *redistest.Server {
//		t.Helper()
//		redistest.Check(t, startErr)
//		return srv
//	}
func Check(t testing.TB, err error) {
	t.Helper()
	if err == nil {
		return
	}
	if errors.Is(err, ErrUnavailable) && os.Getenv("CI") != "true" {
		t.Skipf("%v (with CI=true this is a failure)", err)
	} else {
		t.Fatal(err)
	}
}
