package faultload

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Gateway is a running sluice process.
type Gateway struct {
	cmd    *exec.Cmd
	Base   string // http://public-addr
	Admin  string // http://admin-addr
	logs   *logBuffer
	exited chan struct{}
}

var listening = regexp.MustCompile(`sluice listening"? public=(\S+) admin=(\S+)`)

// StartGateway writes yaml to dir/sluice.yaml, runs `binary serve` on it
// and waits (at most 15 s) until both listeners are bound.
func StartGateway(binary, dir, yaml string) (*Gateway, error) {
	path := filepath.Join(dir, "sluice.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		return nil, err
	}
	g := &Gateway{logs: &logBuffer{max: 1 << 20}, exited: make(chan struct{})}
	g.cmd = exec.Command(binary, "serve", "--config", path)
	dieWithParent(g.cmd)
	pr, pw := io.Pipe()
	g.cmd.Stderr = io.MultiWriter(g.logs, pw)
	g.cmd.Stdout = g.logs
	if err := g.cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		g.cmd.Wait()
		pw.Close()
		close(g.exited)
	}()
	found := WatchListening(pr)
	select {
	case m := <-found:
		g.Base, g.Admin = "http://"+m[0], "http://"+m[1]
		return g, nil
	case <-g.exited:
		return nil, fmt.Errorf("faultload: sluice exited before listening:\n%s", g.logs)
	case <-time.After(15 * time.Second):
		g.cmd.Process.Kill()
		<-g.exited
		return nil, fmt.Errorf("faultload: sluice did not start within 15s:\n%s", g.logs)
	}
}

// PID returns the gateway's process id.
func (g *Gateway) PID() int { return g.cmd.Process.Pid }

// Ports returns the gateway's public and admin ports.
func (g *Gateway) Ports() []int {
	var ps []int
	for _, u := range []string{g.Base, g.Admin} {
		if p, err := strconv.Atoi(u[strings.LastIndexByte(u, ':')+1:]); err == nil {
			ps = append(ps, p)
		}
	}
	return ps
}

// Logs returns the last MiB of the gateway's output.
func (g *Gateway) Logs() string { return g.logs.String() }

// Close stops the gateway with SIGTERM (SIGKILL after 10 s).
func (g *Gateway) Close() error {
	g.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-g.exited:
	case <-time.After(10 * time.Second):
		g.cmd.Process.Kill()
		<-g.exited
	}
	if c := g.cmd.ProcessState.ExitCode(); c != 0 {
		return fmt.Errorf("faultload: sluice exited with %d", c)
	}
	return nil
}

// Metrics are the samples of one /metrics scrape, keyed by the sample as
// written (name and labels, e.g. `sluice_requests_total{code="200",route="acct"}`).
type Metrics map[string]float64

// Sum adds the samples of metric name whose labels contain every one of
// labels (each written as `key="value"`).
func (m Metrics) Sum(name string, labels ...string) float64 {
	var sum float64
	for k, v := range m {
		n, rest, _ := strings.Cut(k, "{")
		if n != name {
			continue
		}
		ok := true
		for _, l := range labels {
			if !strings.Contains(rest, l) {
				ok = false
				break
			}
		}
		if ok {
			sum += v
		}
	}
	return sum
}

// Scrape reads the gateway's /metrics.
func (g *Gateway) Scrape(ctx context.Context, c *http.Client) (Metrics, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", g.Admin+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return nil, fmt.Errorf("faultload: /metrics answered %d", resp.StatusCode)
	}
	return parseMetrics(resp.Body)
}

// parseMetrics reads the Prometheus text format.
func parseMetrics(r io.Reader) (Metrics, error) {
	m := Metrics{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		m[line[:i]] = v
	}
	return m, sc.Err()
}

// logBuffer keeps the last max bytes written to it; safe for concurrent use.
type logBuffer struct {
	mu  sync.Mutex
	max int
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.Write(p)
	if over := b.buf.Len() - b.max; over > 0 {
		b.buf.Next(over)
	}
	return len(p), nil
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// WatchListening reads sluice's log output from r until it ends and sends,
// once, the public and admin addresses of its "sluice listening" line. The
// channel is buffered, so nobody has to receive from it.
func WatchListening(r io.Reader) <-chan [2]string {
	found := make(chan [2]string, 1)
	go func() {
		sc := bufio.NewScanner(r)
		sent := false
		for sc.Scan() {
			if m := listening.FindStringSubmatch(sc.Text()); m != nil && !sent {
				found <- [2]string{m[1], m[2]}
				sent = true
			}
		}
		io.Copy(io.Discard, r)
	}()
	return found
}
