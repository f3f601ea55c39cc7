package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-gw/sluice/bench/internal/benchproc"
)

// ceilingResult is what redis-benchmark measured replaying sluice's script
// call with pipelining: the most decisions per second this Redis gives.
type ceilingResult struct {
	keys     int
	clients  int
	pipeline int
	requests int
	rps      float64
	p50, p99 time.Duration // as redis-benchmark reports them; with -P each waits for its batch
	args     []string      // redis-benchmark's arguments, for the report
	// serverCPUPer is redis-server's CPU time per request; 0 if unknown.
	serverCPUPer time.Duration
	// runs is the number of runs; minRPS and maxRPS their range.
	runs           int
	minRPS, maxRPS float64
}

// busy returns the share of one core redis-server used during the ceiling
// (its CPU per request times requests per second), and false when its CPU
// is unknown. Near 1, Redis itself set the ceiling; well below, the client
// side did (a starved ceiling).
func (c ceilingResult) busy() (float64, bool) {
	if c.serverCPUPer <= 0 || c.rps <= 0 {
		return 0, false
	}
	return c.serverCPUPer.Seconds() * c.rps, true
}

// medianCeiling returns the run with the median rate (the lower middle one
// for an even count), with runs, minRPS and maxRPS set.
func medianCeiling(rs []ceilingResult) ceilingResult {
	sorted := slices.Clone(rs)
	slices.SortFunc(sorted, func(a, b ceilingResult) int { return cmp.Compare(a.rps, b.rps) })
	m := sorted[(len(sorted)-1)/2]
	m.runs, m.minRPS, m.maxRPS = len(rs), sorted[0].rps, sorted[len(sorted)-1].rps
	return m
}

// runCeiling runs redis-benchmark (path bin) against s with call on keys
// random keys: a probe of minRequests, then runs sized from the last rate
// until one lasts at least 70% of measure (at most three). The script must
// already be in the server's cache.
func runCeiling(ctx context.Context, bin string, s *server, call *scriptCall, keys, clients, pipeline int, measure time.Duration, minRequests int) (ceilingResult, error) {
	r, err := redisBenchmark(ctx, bin, s, call, keys, clients, pipeline, minRequests)
	for range 3 {
		if err != nil || float64(r.requests)/r.rps >= 0.7*measure.Seconds() {
			break
		}
		n := min(int(r.rps*measure.Seconds()*1.1), 20_000_000)
		r, err = redisBenchmark(ctx, bin, s, call, keys, clients, pipeline, max(n, minRequests))
	}
	return r, err
}

// redisBenchmark runs redis-benchmark once for n requests and parses its CSV.
func redisBenchmark(ctx context.Context, bin string, s *server, call *scriptCall, keys, clients, pipeline, n int) (ceilingResult, error) {
	r := ceilingResult{keys: keys, clients: clients, pipeline: pipeline, requests: n}
	r.args = []string{"-h", "127.0.0.1", "-p", strconv.Itoa(s.port),
		"-n", strconv.Itoa(n), "-c", strconv.Itoa(clients), "-P", strconv.Itoa(pipeline),
		"-r", strconv.Itoa(keys), "--csv",
		"EVALSHA", call.sha, strconv.Itoa(len(call.keys))}
	// redis-benchmark cannot hash, so the tag becomes 10 fixed characters and
	// 12 random digits: as long as the store's 22-character tag.
	r.args = append(r.args, call.withKey("bench-key:__rand_int__")...)
	r.args = append(r.args, call.args...)
	for _, a := range r.args {
		if strings.ContainsAny(a, "\x00") {
			return r, errors.New("redis-benchmark: script call has a NUL byte, which cannot be passed on a command line")
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, r.args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cpu0, ok0 := benchproc.ProcessCPU(s.pid())
	if err := cmd.Run(); err != nil {
		return r, fmt.Errorf("redis-benchmark: %w: %s", err, bytes.TrimSpace(stderr.Bytes()))
	}
	if cpu1, ok1 := benchproc.ProcessCPU(s.pid()); ok0 && ok1 {
		r.serverCPUPer = (cpu1 - cpu0) / time.Duration(n)
	}
	rps, p50, p99, err := parseBenchmarkCSV(stdout.Bytes())
	if err != nil {
		return r, fmt.Errorf("redis-benchmark: %w (output %q)", err, stdout.String())
	}
	r.rps, r.p50, r.p99 = rps, p50, p99
	return r, nil
}

// parseBenchmarkCSV reads the requests per second and the p50 and p99
// latencies from redis-benchmark --csv output (a header row, then one row).
func parseBenchmarkCSV(out []byte) (rps float64, p50, p99 time.Duration, err error) {
	rows, err := csv.NewReader(bytes.NewReader(out)).ReadAll()
	if err != nil {
		return 0, 0, 0, err
	}
	if len(rows) != 2 {
		return 0, 0, 0, fmt.Errorf("want a header and one row, got %d rows", len(rows))
	}
	col := map[string]string{}
	for i, h := range rows[0] {
		if i < len(rows[1]) {
			col[h] = rows[1][i]
		}
	}
	num := func(name string) (float64, error) {
		v, ok := col[name]
		if !ok {
			return 0, fmt.Errorf("no column %q", name)
		}
		return strconv.ParseFloat(v, 64)
	}
	if rps, err = num("rps"); err != nil {
		return 0, 0, 0, err
	}
	if rps <= 0 {
		return 0, 0, 0, fmt.Errorf("rps %v", rps)
	}
	ms50, err := num("p50_latency_ms")
	if err != nil {
		return 0, 0, 0, err
	}
	ms99, err := num("p99_latency_ms")
	if err != nil {
		return 0, 0, 0, err
	}
	return rps, time.Duration(ms50 * float64(time.Millisecond)), time.Duration(ms99 * float64(time.Millisecond)), nil
}
