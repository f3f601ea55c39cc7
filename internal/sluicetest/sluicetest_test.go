package sluicetest

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var binary string

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "sluicetest-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	if binary, err = Build(dir, false); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

func writeConfig(t *testing.T, yaml string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "sluice.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestStartServesAndStops(t *testing.T) {
	path := writeConfig(t, `
server: {listen: "127.0.0.1:0"}
admin: {listen: "127.0.0.1:0"}
routes:
  - id: hello
    match: {path: /hello}
    respond: {body: "hello\n"}
`)
	p, err := Start(binary, Options{Args: []string{"serve", "--config", path}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop(10 * time.Second)
	for url, want := range map[string]string{p.Base + "/hello": "hello\n", p.Admin + "/readyz": ""} {
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || (want != "" && string(body) != want) {
			t.Errorf("GET %s = %d %q, want 200 %q", url, resp.StatusCode, body, want)
		}
	}
	if p.PID() <= 0 || p.ExitCode() != -1 {
		t.Errorf("running: PID %d, ExitCode %d; want a pid and -1", p.PID(), p.ExitCode())
	}
	if code := p.Stop(10 * time.Second); code != 0 {
		t.Errorf("Stop = %d, want 0 after SIGTERM; logs:\n%s", code, p.Logs())
	}
	select {
	case <-p.Exited():
	default:
		t.Error("Exited not closed after Stop")
	}
	if !strings.Contains(p.Logs().String(), "sluice listening") {
		t.Errorf("logs lack the listening line:\n%s", p.Logs())
	}
}

func TestStartReportsAnEarlyExit(t *testing.T) {
	path := writeConfig(t, "routes: [\n")
	p, err := Start(binary, Options{Args: []string{"serve", "--config", path}})
	if err == nil {
		p.Stop(time.Second)
		t.Fatal("Start on a broken config: no error")
	}
	if !strings.Contains(err.Error(), "exited with 1 before listening") || !strings.Contains(err.Error(), path) {
		t.Errorf("Start error = %v, want the exit code and sluice's message naming %s", err, path)
	}
}

func TestWatchListening(t *testing.T) {
	logs := "time=x level=INFO msg=starting\n" +
		`time=x level=INFO msg="sluice listening" public=127.0.0.1:1234 admin=127.0.0.1:5678` + "\n" +
		`time=x level=INFO msg="sluice listening" public=127.0.0.1:1 admin=127.0.0.1:2` + "\n"
	select {
	case got := <-WatchListening(strings.NewReader(logs)):
		if want := [2]string{"127.0.0.1:1234", "127.0.0.1:5678"}; got != want {
			t.Errorf("WatchListening = %v, want %v", got, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("WatchListening sent nothing")
	}
}

func TestLogKeepsTheLastBytes(t *testing.T) {
	l := &Log{max: 4}
	io.WriteString(l, "abc")
	io.WriteString(l, "defg")
	if got := l.String(); got != "defg" {
		t.Errorf("Log{max: 4} after abc, defg = %q, want %q", got, "defg")
	}
	var all Log
	io.WriteString(&all, "abc")
	io.WriteString(&all, "defg")
	if got := all.String(); got != "abcdefg" {
		t.Errorf("Log{} = %q, want everything", got)
	}
}
