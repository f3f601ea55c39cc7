// Package e2e drives the sluice binary over HTTP: it builds cmd/sluice once,
// runs it on temporary configs with httptest upstreams, and checks what a
// client and an upstream see (docs/semantics.md, docs/operations.md).
package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-gw/sluice/internal/redistest"
	"github.com/sluice-gw/sluice/internal/sluicetest"
)

// Built and started once by TestMain.
var (
	binary        string // the sluice executable
	standalone    *redistest.Server
	standaloneErr error
	cluster       *redistest.Cluster
	clusterErr    error
)

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
	if binary, err = sluicetest.Build(dir, os.Getenv("SLUICE_E2E_RACE") == "1"); err != nil {
		fmt.Fprintln(os.Stderr, err)
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
	*sluicetest.Proc
	t      *testing.T
	config string // path of its config file
	base   string // http://public
	admin  string // http://admin
	logs   *sluicetest.Log
}

// syncBuffer is a goroutine-safe log sink.
type syncBuffer = sluicetest.Log

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
	sp, err := sluicetest.Start(binary, sluicetest.Options{Args: args})
	if err != nil {
		t.Fatal(err)
	}
	p := &proc{Proc: sp, t: t, config: path, base: sp.Base, admin: sp.Admin, logs: sp.Logs()}
	t.Cleanup(func() {
		// Go's Shutdown waits up to 5s for connections that never carried a
		// request; close the client's spare ones so the drain is immediate.
		client.CloseIdleConnections()
		if code := p.Stop(20 * time.Second); code != 0 {
			t.Errorf("sluice exited with %d after SIGTERM, want 0", code)
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
	if err := p.Signal(sig); err != nil {
		p.t.Fatal(err)
	}
}

// wait waits (bounded) for the process to exit and returns its exit code.
func (p *proc) wait(timeout time.Duration) int {
	p.t.Helper()
	select {
	case <-p.Exited():
		return p.ExitCode()
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
