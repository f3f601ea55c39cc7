package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"

	"github.com/sluice-gw/sluice/bench/internal/benchproc"
	"github.com/sluice-gw/sluice/internal/redistest"
	"github.com/sluice-gw/sluice/internal/sluicetest"
)

// bench starts Redis and the servers, runs the correctness check and the
// interleaved rounds, stops everything and returns the report.
func bench(ctx context.Context, c *config, logw io.Writer) (*report, error) {
	redisBin, err := exec.LookPath(c.redisServer)
	if err != nil {
		return nil, fmt.Errorf("find redis-server: %w", err)
	}
	dir, err := os.MkdirTemp("", "rlsbench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	sluiceBin := c.sluiceBin
	if sluiceBin == "" {
		fmt.Fprintln(logw, "rlsbench: building sluice")
		if sluiceBin, err = sluicetest.Build(dir, false); err != nil {
			return nil, err
		}
	}

	rs, err := redistest.StartServer(redistest.ServerOptions{Bin: redisBin})
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	rep := &report{cfg: c, started: time.Now().UTC(), goVersion: runtime.Version(), cpus: runtime.NumCPU(),
		cpuModel: cpuModel(), loadBefore: benchproc.LoadAvg(), sluiceVersion: repoVersion()}
	if info, err := rs.Info("server"); err == nil {
		rep.redisVersion = info["redis_version"]
	}

	// Each server listens on ports picked free just before it starts; if
	// another process takes one first, the server fails and starts again
	// on new ports.
	sl, err := withFreshPorts(func() (*target, error) {
		rlsAddr, _, err := freeAddr()
		if err != nil {
			return nil, err
		}
		cfgPath, err := writeConfigs(dir, c.checkLimit, rlsAddr, rs.Addr())
		if err != nil {
			return nil, fmt.Errorf("write configs: %w", err)
		}
		return startSluice(ctx, sluiceBin, cfgPath, rlsAddr)
	})
	if err != nil {
		return nil, err
	}
	defer sl.stop()
	targets := []*target{sl}
	if c.ratelimitBin != "" {
		rep.peerVersion = binaryVersion(c.ratelimitBin)
		if c.ratelimitCommit != "" && !strings.Contains(rep.peerVersion, "commit ") {
			rep.peerVersion += ", commit " + c.ratelimitCommit + " (as given by -ratelimit-commit)"
		}
		peer, err := withFreshPorts(func() (*target, error) {
			var ports [3]int
			for i := range ports {
				if _, ports[i], err = freeAddr(); err != nil {
					return nil, err
				}
			}
			env := ratelimitEnv(dir, rs.Addr(), ports[0], ports[1], ports[2])
			return startRatelimit(ctx, c.ratelimitBin, dir, env, fmt.Sprintf("127.0.0.1:%d", ports[0]))
		})
		if err != nil {
			return nil, err
		}
		defer peer.stop()
		targets = append(targets, peer)
	}

	for _, t := range targets {
		r := check(ctx, t, c.checkLimit, c.checkOver)
		fmt.Fprintf(logw, "rlsbench: check %s: %d of %d admitted, first denied call %d, %d errors\n", r.server, r.admitted, r.calls, r.firstDenied, r.errs)
		rep.checks = append(rep.checks, r)
	}

	reqs := requests(c.keys)
	for round := range c.repeat {
		for _, conc := range c.conc {
			order := targets
			if round%2 == 1 {
				order = reversed(targets)
			}
			for _, t := range order {
				if ctx.Err() != nil {
					return nil, ctx.Err()
				}
				res := cell(ctx, t, rs, reqs, conc, c.warmup, c.duration)
				res.round = round + 1
				fmt.Fprintf(logw, "rlsbench: %v\n", res)
				rep.cells = append(rep.cells, res)
			}
		}
	}
	rep.loadAfter = benchproc.LoadAvg()
	for _, t := range targets {
		if isExited(t.proc) {
			return nil, fmt.Errorf("%s exited during the run:\n%s", t.name, t.proc.Logs())
		}
	}
	return rep, nil
}

// withFreshPorts calls start up to three times, until it succeeds, and
// returns the last error otherwise.
func withFreshPorts(start func() (*target, error)) (*target, error) {
	var err error
	for range 3 {
		var t *target
		if t, err = start(); err == nil {
			return t, nil
		}
	}
	return nil, err
}

// reversed returns a reversed copy of ts.
func reversed(ts []*target) []*target {
	out := make([]*target, len(ts))
	for i, t := range ts {
		out[len(ts)-1-i] = t
	}
	return out
}

// cpuModel returns the first "model name" of /proc/cpuinfo, or "unknown".
func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown"
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

// repoVersion returns the commit of the repository the harness runs in
// (git rev-parse), with "+dirty" when it has uncommitted changes, or
// "unknown".
func repoVersion() string {
	out, err := exec.Command("git", "rev-parse", "--short=12", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	v := strings.TrimSpace(string(out))
	if st, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(strings.TrimSpace(string(st))) > 0 {
		v += "+dirty"
	}
	return v
}
