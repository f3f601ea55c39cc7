package faultload

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-gw/sluice/internal/sluicetest"
)

// Gateway is a running sluice process.
type Gateway struct {
	p     *sluicetest.Proc
	Base  string // http://public-addr
	Admin string // http://admin-addr
}

// StartGateway writes yaml to dir/sluice.yaml, runs `binary serve` on it
// and waits (at most 15 s) until both listeners are bound.
func StartGateway(binary, dir, yaml string) (*Gateway, error) {
	path := filepath.Join(dir, "sluice.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		return nil, err
	}
	p, err := sluicetest.Start(binary, sluicetest.Options{Args: []string{"serve", "--config", path}, MaxLog: 1 << 20})
	if err != nil {
		return nil, fmt.Errorf("faultload: %w", err)
	}
	return &Gateway{p: p, Base: p.Base, Admin: p.Admin}, nil
}

// PID returns the gateway's process id.
func (g *Gateway) PID() int { return g.p.PID() }

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
func (g *Gateway) Logs() string { return g.p.Logs().String() }

// Close stops the gateway with SIGTERM (SIGKILL after 10 s).
func (g *Gateway) Close() error {
	if c := g.p.Stop(10 * time.Second); c != 0 {
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
