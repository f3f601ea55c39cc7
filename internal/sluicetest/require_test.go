package sluicetest

import (
	"strings"
	"testing"
)

// recorder is a testing.TB that records Skip and Fatal instead of ending
// the goroutine, so RequireProgram's choice can be checked.
type recorder struct {
	testing.TB
	skipped, failed string
}

func (r *recorder) Helper()           {}
func (r *recorder) Skip(args ...any)  { r.skipped = args[0].(string) }
func (r *recorder) Fatal(args ...any) { r.failed = args[0].(string) }

func TestRequireProgram(t *testing.T) {
	if p := RequireProgram(t, "coreutils", "", "no-such-program-x7", "sh"); !strings.HasSuffix(p, "/sh") {
		t.Errorf("RequireProgram found %q, want the path of sh", p)
	}
	t.Setenv("CI", "")
	r := &recorder{TB: t}
	RequireProgram(r, "pkg-x7", "no-such-program-x7")
	if r.failed != "" || !strings.Contains(r.skipped, "install pkg-x7") {
		t.Errorf("without CI: skipped %q, failed %q; want a skip naming the package", r.skipped, r.failed)
	}
	t.Setenv("CI", "true")
	r = &recorder{TB: t}
	RequireProgram(r, "pkg-x7", "no-such-program-x7")
	if r.skipped != "" || !strings.Contains(r.failed, "CI=true requires it") {
		t.Errorf("with CI=true: skipped %q, failed %q; want a failure", r.skipped, r.failed)
	}
}
