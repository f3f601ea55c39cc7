package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-gw/sluice/internal/sluicetest"
)

// runSluice runs the binary to completion in dir and returns stdout, stderr
// and the exit code.
func runSluice(t *testing.T, dir string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Dir = dir
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatal(err)
	}
	return out.String(), errb.String(), cmd.ProcessState.ExitCode()
}

func TestVersion(t *testing.T) {
	t.Parallel()
	out, _, code := runSluice(t, t.TempDir(), "version")
	want := regexp.MustCompile(`^sluice \S+ \S+ ` + regexp.QuoteMeta(runtime.Version()) + "\n$")
	if code != 0 || !want.MatchString(out) {
		t.Errorf("sluice version = %q (exit %d), want `sluice <version> <commit> %s`", out, code, runtime.Version())
	}
}

func TestCheck(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	os.WriteFile(good, []byte(header+`
policies:
  p: {algorithm: token_bucket, capacity: 10, rate: 1}
routes:
  - id: hello
    match: {path: /hello}
    respond: {body: "hi"}
    limits: [{policy: p, key: ip}]
`), 0o600)
	out, errOut, code := runSluice(t, dir, "check", "--config", good)
	if code != 0 || strings.Count(out, "\n") != 1 || errOut != "" {
		t.Errorf("check on a valid file: exit %d, stdout %q, stderr %q; want 0 and a one-line summary", code, out, errOut)
	}

	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte(`policies:
  p: {algorithm: token_bucket, capacity: 0, rate: 1}
routes:
  - id: a
    match: {path: /a}
    upstream: "http://[::1"
    limits: [{policy: nope, key: ip}]
  - id: a
    match: {path: /b}
    respond: {body: x}
    bogus: 1
`), 0o600)
	out, errOut, code = runSluice(t, dir, "check", "--config", bad)
	lines := strings.Split(strings.TrimSpace(errOut), "\n")
	if code != 1 || out != "" || len(lines) < 4 {
		t.Fatalf("check on a file with 4 problems: exit %d, stdout %q, stderr:\n%s\nwant exit 1 and every problem", code, out, errOut)
	}
	loc := regexp.MustCompile(`^` + regexp.QuoteMeta(bad) + `:\d+:\d+: `)
	for _, l := range lines {
		if !loc.MatchString(l) {
			t.Errorf("problem line %q is not FILE:LINE:COL: message", l)
		}
	}
	for _, want := range []string{":2:", ":6:", ":7:", ":8:", ":11:"} {
		if !strings.Contains(errOut, bad+want) {
			t.Errorf("no problem reported on line %s in:\n%s", strings.Trim(want, ":"), errOut)
		}
	}

	if _, errOut, code := runSluice(t, dir, "check", "--config", filepath.Join(dir, "missing.yaml")); code != 1 || errOut == "" {
		t.Errorf("check on a missing file: exit %d, stderr %q; want 1 and a message", code, errOut)
	}
}

func TestBareSluiceServesSluiceYAML(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "sluice.yaml"), []byte(header+`
routes:
  - id: hello
    match: {path: /hello}
    respond: {body: "from the default file"}
`), 0o600)
	p, err := sluicetest.Start(binary, sluicetest.Options{Dir: dir, StartTimeout: 10 * time.Second})
	if err != nil {
		t.Fatalf("bare sluice did not start: %v", err)
	}
	defer p.Stop(time.Second)
	if r := get(t, p.Base+"/hello"); r.body != "from the default file" {
		t.Errorf("GET /hello = %q", r.body)
	}
	p.Signal(syscall.SIGINT)
	select {
	case <-p.Exited():
		if code := p.ExitCode(); code != 0 {
			t.Errorf("exit after SIGINT: %d, want 0", code)
		}
	case <-time.After(20 * time.Second):
		t.Errorf("sluice still running 20s after SIGINT")
	}
}
