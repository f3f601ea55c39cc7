package sluicetest

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
)

// RequireProgram returns the path of the first of names found on PATH (an
// empty name is passed over). When none is installed it skips t with a
// message naming pkg, the Debian package to install, or fails t when
// CI=true, where .ci/run installs every program a test needs, so that a
// missing install is noticed rather than skipped.
func RequireProgram(t testing.TB, pkg string, names ...string) string {
	t.Helper()
	var last error
	for _, name := range names {
		if name == "" {
			continue
		}
		path, err := exec.LookPath(name)
		if err == nil {
			return path
		}
		last = err
	}
	msg := fmt.Sprintf("%v not found (install %s): %v", names, pkg, last)
	if os.Getenv("CI") == "true" {
		t.Fatal(msg + "; CI=true requires it")
	} else {
		t.Skip(msg + "; with CI=true this is a failure")
	}
	return ""
}
