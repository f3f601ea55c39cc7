// Package e2e drives the sluice binary over HTTP: it builds cmd/sluice once,
// runs it on temporary configs with httptest upstreams, and checks what a
// client and an upstream see (SPEC §1, §2, §4, §6).
package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-gw/sluice/internal/faultload"
	"github.com/sluice-gw/sluice/internal/redistest"
)

// Built and started once by TestMain.
var (
	binary        string // the sluice executable
	standalone    *redistest.Server
	standaloneErr error
	cluster       *redistest.Cluster
	clusterErr    error
)

// listening finds the addresses in sluice's "sluice listening" log line.
var listening = regexp.MustCompile(`sluice listening"? public=(\S+) admin=(\S+)`)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "sluice-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	binary = filepath.Join(dir, "sluice")
	args := []string{"build", "-o", binary}
	if os.Getenv("SLUICE_E2E_RACE") == "1" {
		args = append(args, "-race")
	}
	cmd := exec.Command("go", append(args, "../cmd/sluice")...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building sluice:", err)
		return 1
	}
	// Redis for the shared-store variants: one standalone server and a
	// 3-master cluster, for the whole package. Tests skip (or fail under
	// CI=true) when redis-server is missing.
	if standalone, standaloneErr = redistest.StartServer(redistest.ServerOptions{}); standaloneErr == nil {
		defer standalone.Close()
	}
	if cluster, clusterErr = redistest.StartCluster(redistest.ClusterOptions{Masters: 3}); clusterErr == nil {
		defer cluster.Close()
	}
	return m.Run()
}

// proc is a running sluice process.
type proc struct {
	t      *testing.T
	cmd    *exec.Cmd
	config string // path of its config file
	base   string // http://public
	admin  string // http://admin
	logs   *syncBuffer
	exited chan struct{}
	code   int
}

// syncBuffer is a goroutine-safe log sink.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// writeConfig writes yaml to a fresh file and returns its path.
func writeConfig(t *testing.T, yaml string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "sluice.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// start runs `sluice serve --config` on yaml (which should listen on port 0)
// and waits until both listeners are bound. The process is stopped at the
// end of the test.
func start(t *testing.T, yaml string) *proc {
	t.Helper()
	return startFile(t, writeConfig(t, yaml))
}

func startFile(t *testing.T, path string) *proc {
	t.Helper()
	return startArgs(t, path, "serve", "--config", path)
}

// startArgs runs sluice with args, which name the config file path, and
// waits as start does.
func startArgs(t *testing.T, path string, args ...string) *proc {
	t.Helper()
	p := &proc{t: t, config: path, logs: &syncBuffer{}, exited: make(chan struct{})}
	p.cmd = exec.Command(binary, args...)
	pr, pw := io.Pipe()
	p.cmd.Stderr = io.MultiWriter(p.logs, pw)
	p.cmd.Stdout = p.logs
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		err := p.cmd.Wait()
		pw.Close()
		p.code = p.cmd.ProcessState.ExitCode()
		_ = err
		close(p.exited)
	}()
	found := faultload.WatchListening(pr)
	select {
	case m := <-found:
		p.base, p.admin = "http://"+m[0], "http://"+m[1]
	case <-p.exited:
		t.Fatalf("sluice exited with %d before listening:\n%s", p.code, p.logs)
	case <-time.After(15 * time.Second):
		p.cmd.Process.Kill()
		t.Fatalf("sluice did not start within 15s:\n%s", p.logs)
	}
	t.Cleanup(func() {
		// Go's Shutdown waits up to 5s for connections that never carried a
		// request; close the client's spare ones so the drain is immediate.
		client.CloseIdleConnections()
		p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(20 * time.Second):
			p.cmd.Process.Kill()
			<-p.exited
		}
		if p.code != 0 {
			t.Errorf("sluice exited with %d after SIGTERM, want 0", p.code)
		}
		if strings.Contains(p.logs.String(), "DATA RACE") {
			t.Error("the race detector reported a data race in sluice")
		}
		if t.Failed() {
			t.Logf("sluice logs:\n%s", p.logs)
		}
	})
	return p
}

// signal sends sig to the process.
func (p *proc) signal(sig os.Signal) {
	p.t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Fatal(err)
	}
}

// wait waits (bounded) for the process to exit and returns its exit code.
func (p *proc) wait(timeout time.Duration) int {
	p.t.Helper()
	select {
	case <-p.exited:
		return p.code
	case <-time.After(timeout):
		p.t.Fatalf("sluice still running after %v", timeout)
		return -1
	}
}

// waitLog waits (bounded) until the logs contain s, n times in total.
func (p *proc) waitLog(s string, n int) {
	p.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for strings.Count(p.logs.String(), s) < n {
		if time.Now().After(deadline) {
			p.t.Fatalf("logs never contained %q %d times:\n%s", s, n, p.logs)
		}
		time.Sleep(10 * time.Millisecond) // polling another process, bounded
	}
}

// response is a read answer.
type response struct {
	code   int
	body   string
	header http.Header
}

var client = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}

// do sends a request; header holds name/value pairs.
func do(t testing.TB, method, url string, body io.Reader, header ...string) response {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading body: %v", method, url, err)
	}
	return response{resp.StatusCode, string(b), resp.Header}
}

func get(t testing.TB, url string, header ...string) response {
	t.Helper()
	return do(t, "GET", url, nil, header...)
}

// metric returns the value of one sample line of /metrics, or "" when absent.
func (p *proc) metric(sample string) string {
	p.t.Helper()
	m := get(p.t, p.admin+"/metrics").body
	for line := range strings.SplitSeq(m, "\n") {
		if v, ok := strings.CutPrefix(line, sample+" "); ok {
			return v
		}
	}
	return ""
}
