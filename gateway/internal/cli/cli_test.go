package cli

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// lockedBuffer is a goroutine-safe io.Writer.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func noEnv(string) (string, bool) { return "", false }

func run(args ...string) (string, string, int) {
	var out, errb bytes.Buffer
	code := Run(context.Background(), args, Env{Stdout: &out, Stderr: &errb, LookupEnv: noEnv})
	return out.String(), errb.String(), code
}

func TestVersionAndUsage(t *testing.T) {
	out, _, code := run("version")
	if !regexp.MustCompile(`^sluice \S+ \S+ `+regexp.QuoteMeta(runtime.Version())+"\n$").MatchString(out) || code != 0 {
		t.Errorf("version = %q (exit %d)", out, code)
	}
	if _, errOut, code := run("frobnicate"); code != exitUsage || !strings.Contains(errOut, "usage:") {
		t.Errorf("unknown command: exit %d, stderr %q; want 2 and usage", code, errOut)
	}
	if _, _, code := run("check", "--config", "a.yaml", "extra"); code != exitUsage {
		t.Errorf("check with an extra argument: exit %d, want 2", code)
	}
	if out, errOut, code := run("version", "extra"); code != exitUsage || out != "" || !strings.Contains(errOut, `unexpected argument "extra"`) {
		t.Errorf("version with an extra argument: exit %d, stdout %q, stderr %q; want 2 naming it", code, out, errOut)
	}
}

const helloConfig = `
server: {listen: "127.0.0.1:0", shutdown_timeout: 5s}
admin: {listen: "127.0.0.1:0"}
routes:
  - id: hello
    match: {path: /hello}
    respond: {body: "%s"}
`

func writeConfig(t *testing.T, path, body string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(strings.Replace(helloConfig, "%s", body, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func TestCheckCommand(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	writeConfig(t, good, "hi")
	if out, errOut, code := run("check", "--config", good); code != 0 || !strings.HasPrefix(out, good+": ") || errOut != "" {
		t.Errorf("check valid: exit %d, out %q, err %q", code, out, errOut)
	}
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("routes:\n  - id: x\n    match: {path: nope}\n    color: red\n"), 0o600)
	out, errOut, code := run("check", "-c", bad)
	if code != 1 || out != "" || !strings.Contains(errOut, bad+":3:") || !strings.Contains(errOut, bad+":4:") {
		t.Errorf("check invalid: exit %d, out %q, err:\n%s\nwant exit 1 and problems on lines 3 and 4", code, out, errOut)
	}
}

func body(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func TestServeReloadsAndStops(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sluice.yaml")
	writeConfig(t, path, "one")
	sigs := make(chan os.Signal)
	addrs := make(chan [2]string, 1)
	var logs lockedBuffer
	done := make(chan int)
	go func() {
		done <- Run(context.Background(), []string{"serve", "--config", path}, Env{
			Stdout: io.Discard, Stderr: &logs, LookupEnv: noEnv, Signals: sigs,
			Started: func(public, admin string) { addrs <- [2]string{public, admin} },
		})
	}()
	a := <-addrs
	base := "http://" + a[0]
	if got := body(t, base+"/hello"); got != "one" {
		t.Fatalf("before reload: %q", got)
	}
	writeConfig(t, path, "two")
	// Signals is unbuffered: a send returns once serve took the signal, so
	// a second send returns only after the first reload has finished.
	sigs <- syscall.SIGHUP
	sigs <- syscall.SIGHUP
	os.WriteFile(path, []byte("routes: [\n"), 0o600)
	sigs <- syscall.SIGHUP
	sigs <- syscall.SIGHUP
	// The reload log never repeats a password.
	os.WriteFile(path, []byte("routes:\n  - {id: x, match: {path: /x}, upstream: \"http://u:S3CRET@127.0.0.1:1\"}\n"), 0o600)
	sigs <- syscall.SIGHUP
	sigs <- syscall.SIGHUP
	if l := logs.String(); strings.Contains(l, "S3CRET") || !strings.Contains(l, "u:xxxxx@") {
		t.Errorf("the reload log repeats a password, or names no upstream:\n%s", l)
	}
	if got := body(t, base+"/hello"); got != "two" {
		t.Errorf("after a reload and a broken file: %q, want \"two\"", got)
	}
	if !strings.Contains(logs.String(), "reload failed; keeping the running config") {
		t.Errorf("a broken file is not logged:\n%s", logs.String())
	}
	if got := body(t, "http://"+a[1]+"/readyz"); got != "ready\n" {
		t.Errorf("/readyz = %q", got)
	}
	sigs <- syscall.SIGTERM
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("exit after SIGTERM = %d, want 0", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not stop within 10s of SIGTERM")
	}
}

func TestServeFailsOnBadConfigOrBusyPort(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sluice.yaml")
	os.WriteFile(path, []byte("routes: 3\n"), 0o600)
	if _, errOut, code := run("serve", "--config", path); code != 1 || !strings.Contains(errOut, path+":1:") {
		t.Errorf("serve on an invalid file: exit %d, stderr %q", code, errOut)
	}
	if _, errOut, code := run("--config", filepath.Join(t.TempDir(), "missing.yaml")); code != 1 || errOut == "" {
		t.Errorf("serve on a missing file: exit %d, stderr %q", code, errOut)
	}
}

// TestCLIConventions: help on stdout with exit 0 in
// every usual spelling, --version, --config shown with two dashes, and
// exit 2 for every usage error, simulate's included.
func TestCLIConventions(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"-h"}, {"-help"}, {"help"}} {
		out, errOut, code := run(args...)
		if code != 0 || errOut != "" || !strings.Contains(out, "sluice check --config FILE") || !strings.Contains(out, "sluice simulate") {
			t.Errorf("sluice %s: exit %d, stdout %q, stderr %q; want the command list on stdout, exit 0", args[0], code, out, errOut)
		}
	}
	for _, args := range [][]string{{"serve", "--help"}, {"check", "-h"}} {
		out, errOut, code := run(args...)
		if code != 0 || errOut != "" || !strings.Contains(out, "--config FILE") || strings.Contains(out, "\n  -config") {
			t.Errorf("sluice %s %s: exit %d, stdout %q, stderr %q; want help naming --config on stdout, exit 0", args[0], args[1], code, out, errOut)
		}
	}
	// sluice help COMMAND prints what sluice COMMAND --help prints.
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"help", "serve"}, "usage: sluice serve [--config FILE]"},
		{[]string{"help", "check"}, "usage: sluice check [--config FILE]"},
		{[]string{"help", "simulate"}, "sluice simulate"},
		{[]string{"help", "import"}, "usage: sluice import scg"},
		{[]string{"help", "import", "scg"}, "usage: sluice import scg"},
		{[]string{"help", "version"}, "sluice version"},
		{[]string{"help", "help"}, "sluice help [COMMAND]"},
	} {
		out, errOut, code := run(tt.args...)
		if code != 0 || errOut != "" || !strings.Contains(out, tt.want) {
			t.Errorf("sluice %s: exit %d, stdout %.200q, stderr %.200q; want %q on stdout, exit 0", strings.Join(tt.args, " "), code, out, errOut, tt.want)
		}
	}
	for _, args := range [][]string{{"help", "frobnicate"}, {"help", "serve", "extra"}} {
		if out, errOut, code := run(args...); code != exitUsage || out != "" || !strings.Contains(errOut, "usage") {
			t.Errorf("sluice %s: exit %d, stdout %q, stderr %.200q; want exit 2 with usage on stderr", strings.Join(args, " "), code, out, errOut)
		}
	}
	if out, _, code := run("--version"); code != 0 || !strings.HasPrefix(out, "sluice ") {
		t.Errorf("sluice --version: exit %d, stdout %q", code, out)
	}
	for _, args := range [][]string{
		{"--bogus"},
		{"serve", "-x"},
		{"check", "--config"},
		{"simulate", "--bogus"},
		{"simulate", "--algorithm", "nope", "--limit", "1", "--window", "1s"},
		{"simulate", "--policy", "token_bucket:capacity=x"},
		{"simulate", "--algorithm", "token_bucket", "--capacity", "5"},
		{"simulate", "--compare", "--pattern", "nope"},
		{"simulate", "--compare", "--duration", "-1s"},
		{"simulate", "--compare", "--step", "-1s"},
		{"simulate", "--compare", "--measure", "1ns"},
	} {
		out, errOut, code := run(args...)
		if code != exitUsage || out != "" || !strings.Contains(errOut, "usage") {
			t.Errorf("sluice %s: exit %d, stdout %q, stderr %.200q; want exit 2 with usage on stderr", strings.Join(args, " "), code, out, errOut)
		}
	}
}
