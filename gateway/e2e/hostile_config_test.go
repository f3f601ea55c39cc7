package e2e

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Malformed configuration at the binary (rows G1 and G2 of the fault
// scenarios; docs/reliability.md lists their letters).

// brokenConfigs are files `sluice serve` must refuse, each with the line
// its first error must name.
var brokenConfigs = []struct {
	name, yaml string
	line       int
}{
	{"truncated", "routes:\n  - id: a\n    match: {path: /a\n", 3},
	{"tab indentation", "routes:\n\t- id: a\n", 2},
	{"duplicate key", "routes:\n  - id: a\n    id: b\n    match: {path: /a}\n    respond: {body: x}\n", 3},
	{"unknown field", "routes:\n  - id: a\n    match: {path: /a}\n    respond: {body: x}\n    upstrem: http://127.0.0.1:1\n", 5},
	{"wrong type", "server: {listen: \"127.0.0.1:0\", shutdown_timeout: [1]}\nroutes:\n  - {id: a, match: {path: /a}, respond: {body: x}}\n", 1},
	{"empty file", "", 1},
	{"negative rate", "policies:\n  p: {algorithm: token_bucket, capacity: 1, rate: -1}\nroutes:\n  - {id: a, match: {path: /a}, respond: {body: x}, limits: [{policy: p, key: ip}]}\n", 2},
	{"NaN rate", "policies:\n  p: {algorithm: token_bucket, capacity: 1, rate: .nan}\nroutes:\n  - {id: a, match: {path: /a}, respond: {body: x}, limits: [{policy: p, key: ip}]}\n", 2},
	{"capacity beyond 2^53", "policies:\n  p: {algorithm: token_bucket, capacity: 9007199254740993, rate: 1}\nroutes:\n  - {id: a, match: {path: /a}, respond: {body: x}, limits: [{policy: p, key: ip}]}\n", 2},
	{"zero window", "policies:\n  p: {algorithm: fixed_window, limit: 1, window: 0s}\nroutes:\n  - {id: a, match: {path: /a}, respond: {body: x}, limits: [{policy: p, key: ip}]}\n", 2},
	{"unknown algorithm", "policies:\n  p: {algorithm: leaky_window, limit: 1, window: 1s}\nroutes:\n  - {id: a, match: {path: /a}, respond: {body: x}, limits: [{policy: p, key: ip}]}\n", 2},
	{"binary garbage", "\x00\x01\x02\xff\xfe", 1},
}

// TestHostileConfigServeRefuses is row G1/G2 at startup: `sluice serve` on a
// malformed file exits non-zero and names FILE:LINE. The row's "within a
// second" is checked as the process's own CPU time (user + system), which
// a loaded machine does not inflate; the wall clock only catches a hang.
// The files are tried one after another, so that the test's own processes
// do not compete for the CPU.
func TestHostileConfigServeRefuses(t *testing.T) {
	t.Parallel()
	for _, tt := range brokenConfigs {
		t.Run(tt.name, func(t *testing.T) {
			path := writeConfig(t, tt.yaml)
			cmd := exec.Command(binary, "serve", "--config", path)
			var logs syncBuffer
			cmd.Stdout, cmd.Stderr = &logs, &logs
			began := time.Now()
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan struct{})
			go func() { cmd.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				cmd.Process.Kill()
				<-done
				t.Fatalf("sluice serve on a broken file still running after 5s:\n%s", logs.String())
			}
			if code := cmd.ProcessState.ExitCode(); code == 0 {
				t.Errorf("exit code 0 on a broken file, want non-zero")
			}
			ps := cmd.ProcessState
			if cpu := ps.UserTime() + ps.SystemTime(); cpu > time.Second {
				t.Errorf("refusing a broken file took %v of CPU (%v on the clock), want ≤ 1 s", cpu, time.Since(began))
			}
			want := regexp.MustCompile(regexp.QuoteMeta(path) + `:` + itoa(int64(tt.line)) + `:\d+: \S`)
			if !want.MatchString(logs.String()) {
				t.Errorf("output does not name %s:%d:COL:\n%s", filepath.Base(path), tt.line, logs.String())
			}
			if strings.Contains(logs.String(), "sluice listening") {
				t.Errorf("sluice started listening on a broken file:\n%s", logs.String())
			}
		})
	}
}

// TestHostileConfigReloadKeepsOld is row G1 on reload: each broken file
// sent with SIGHUP is logged with FILE:LINE, counted in
// sluice_config_reloads_total{result="failed"}, and the running config keeps
// serving, budgets included; a good file afterwards still reloads.
func TestHostileConfigReloadKeepsOld(t *testing.T) {
	t.Parallel()
	good := func(body string) string {
		return `store: {type: memory}` + header + `
policies:
  three: {algorithm: fixed_window, limit: 3, window: 24h}
routes:
  - id: hello
    match: {path: /hello}
    respond: {body: "` + body + `"}
    limits: [{policy: three, key: const:all}]
`
	}
	p := start(t, good("v1"))
	if r := get(t, p.base+"/hello"); r.code != 200 || r.body != "v1" {
		t.Fatalf("before reloads: %d %q", r.code, r.body)
	}
	for i, tt := range brokenConfigs {
		writeFile(t, p.config, tt.yaml)
		p.signal(syscall.SIGHUP)
		p.waitLog("reload failed", i+1)
		if r := get(t, p.base+"/hello"); r.body != "v1" && r.code != 429 {
			t.Fatalf("after broken reload %q: %d %q, want the old config's answer", tt.name, r.code, r.body)
		}
		if !strings.Contains(p.logs.String(), p.config+":"+itoa(int64(tt.line))+":") {
			t.Errorf("reload of %q: the log does not name %s:%d", tt.name, filepath.Base(p.config), tt.line)
		}
	}
	// 1 request before, len(brokenConfigs) after: the budget of 3 was kept
	// across every failed reload, so it is spent.
	if r := get(t, p.base+"/hello"); r.code != 429 {
		t.Errorf("after %d failed reloads: %d, want 429 (the old limiter's budget kept)", len(brokenConfigs), r.code)
	}
	if got, want := p.metric(`sluice_config_reloads_total{result="failed"}`), itoa(int64(len(brokenConfigs))); got != want {
		t.Errorf(`sluice_config_reloads_total{result="failed"} = %q, want %s`, got, want)
	}
	writeFile(t, p.config, good("v2"))
	p.signal(syscall.SIGHUP)
	p.waitLog("config reloaded", 1)
	if got := p.metric(`sluice_config_reloads_total{result="ok"}`); got != "1" {
		t.Errorf(`sluice_config_reloads_total{result="ok"} = %q, want 1`, got)
	}
	if r := get(t, p.base+"/hello"); r.code != 429 {
		t.Errorf("after a good reload: %d %q, want 429 (same store, same budget)", r.code, r.body)
	}
}
