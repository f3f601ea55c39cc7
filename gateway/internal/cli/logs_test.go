package cli

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestServeLogs checks the log section on a running server:
// with format json every line of the process log and the access log is a
// JSON object with time, level and msg; level warn drops the info lines of
// the process log but not the access log's records; a reload applies a new
// level at once.
func TestServeLogs(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sluice.yaml")
	config := func(level string) string {
		return `
server: {listen: "127.0.0.1:0", shutdown_timeout: 5s, access_log: {sample: 1}}
admin: {listen: "127.0.0.1:0"}
log: {format: json, level: ` + level + `}
routes:
  - id: hello
    match: {path: /hello}
    respond: {body: "hi"}
`
	}
	if err := os.WriteFile(path, []byte(config("warn")), 0o600); err != nil {
		t.Fatal(err)
	}
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
	body(t, "http://"+a[0]+"/hello")
	os.WriteFile(path, []byte("routes: [\n"), 0o600)
	sigs <- syscall.SIGHUP // refused: an error line
	// The signal is taken before the file is read: the next file may be
	// written only once this reload is over.
	waitForLog(t, &logs, "reload failed")
	os.WriteFile(path, []byte(config("info")), 0o600)
	sigs <- syscall.SIGHUP // an info line, at the new level
	waitForLog(t, &logs, "config reloaded")
	sigs <- syscall.SIGTERM
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not stop within 10s of SIGTERM")
	}

	type record struct {
		Time, Level, Msg string
		Route            string
		Status           int
	}
	var got []record
	for line := range strings.Lines(logs.String()) {
		var r record
		if err := json.Unmarshal([]byte(line), &r); err != nil || r.Time == "" || r.Level == "" || r.Msg == "" {
			t.Fatalf("log line is not a JSON record with time, level and msg: %q", line)
		}
		got = append(got, r)
	}
	has := func(level, msg string) bool {
		for _, r := range got {
			if r.Level == level && r.Msg == msg {
				return true
			}
		}
		return false
	}
	if !has("INFO", "access") {
		t.Errorf("at level warn, the access log's record is missing: %+v", got)
	}
	if !has("ERROR", "reload failed; keeping the running config") {
		t.Errorf("the refused reload's error line is missing: %+v", got)
	}
	if !has("INFO", "config reloaded") || !has("INFO", "stopped") {
		t.Errorf("after the reload to level info, its info lines are missing: %+v", got)
	}
	if has("INFO", "sluice listening") || has("INFO", "config loaded") {
		t.Errorf("at level warn, the startup's info lines were written: %+v", got)
	}
}

// waitForLog waits until logs holds text, for at most 10 s.
func waitForLog(t *testing.T, logs *lockedBuffer, text string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(logs.String(), text); {
		if time.Now().After(deadline) {
			t.Fatalf("no %q in the log within 10s:\n%s", text, logs.String())
		}
		time.Sleep(10 * time.Millisecond) // polling the log, bounded above
	}
}
