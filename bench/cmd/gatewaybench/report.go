package main

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"
)

// report is everything one invocation measured.
type report struct {
	cfg                   *config
	started               time.Time
	goVersion             string
	cpus                  int
	loadBefore, loadAfter string
	runs                  [][]cellRun // per cell (cfg.cells order), per round
}

// failedRuns counts cell runs that cannot be trusted: transport errors or
// unexpected statuses, no 200 at all, store errors or fallback decisions,
// or 429s in a cell whose limits should admit everything.
func (r *report) failedRuns() int {
	n := 0
	for i, runs := range r.runs {
		for _, cr := range runs {
			bad := cr.storeTrouble > 0
			for _, p := range []phase{cr.max, cr.fixed} {
				bad = bad || p.errors > 0 || p.ok == 0 ||
					(r.cfg.cells[i].limits != limitsDeny50 && p.denied > 0)
			}
			if bad {
				n++
			}
		}
	}
	return n
}

// median returns the median of f over runs (the mean of the middle two for
// an even count).
func median(runs []cellRun, f func(cellRun) float64) float64 {
	v := make([]float64, len(runs))
	for i, r := range runs {
		v[i] = f(r)
	}
	return median1(v)
}

func maxRPS(r cellRun) float64 { return r.max.rps() }

// cpuPerRequest is the gateway CPU time per request during the max attack, in µs.
func cpuPerRequest(r cellRun) float64 {
	if r.gatewayCPU <= 0 || r.max.requests == 0 {
		return 0
	}
	return float64(r.gatewayCPU.Microseconds()) / float64(r.max.requests)
}

// cpuPerRequestFixed is the gateway CPU time per request during the
// fixed-rate attack, in µs: every cell sees the same arrival rate there, so
// this compares the work per request without the max attack's feedback
// (a slower cell batches less per wake-up and so spends more per request).
func cpuPerRequestFixed(r cellRun) float64 {
	if r.gatewayCPUFixed <= 0 || r.fixed.requests == 0 {
		return 0
	}
	return float64(r.gatewayCPUFixed.Microseconds()) / float64(r.fixed.requests)
}

// cpuCol formats a CPU-per-request median, n/a when unknown.
func cpuCol(runs []cellRun, f func(cellRun) float64) string {
	if v := median(runs, f); v > 0 {
		return fmt.Sprintf("%.1f", v)
	}
	return "n/a"
}

func ms(d float64) string { return fmt.Sprintf("%.2f", d/1e6) }

func quantileNanos(p func(cellRun) phase, q float64) func(cellRun) float64 {
	return func(r cellRun) float64 { return float64(p(r).quantile(q)) }
}

func maxPhase(r cellRun) phase   { return r.max }
func fixedPhase(r cellRun) phase { return r.fixed }

// markdown renders the report.
func (r *report) markdown() string {
	c := r.cfg
	var b strings.Builder
	fmt.Fprintf(&b, "# Gateway throughput and latency (gatewaybench)\n\n")
	fmt.Fprintf(&b, "- command: `%s`\n", c.cmdline)
	fmt.Fprintf(&b, "- started %s, %s, %d CPUs; load average before %s, after %s\n",
		r.started.Format("2006-01-02 15:04 MST"), r.goVersion, r.cpus, r.loadBefore, r.loadAfter)
	gw := "this binary running gateway/command (same code as gateway/cmd/sluice)"
	if c.sluice != "" {
		gw = "`" + c.sluice + " serve`"
	}
	fmt.Fprintf(&b, "- gateway: %s, GOMAXPROCS=%d; load generator (vegeta v12 library) and upstream in one process, GOMAXPROCS=%d\n", gw, c.gatewayProcs, c.clientProcs)
	fmt.Fprintf(&b, "- max: closed loop, %d keep-alive connections, %v per run after %v warm-up; fixed: %d req/s open loop for %v; %d users; %d run(s) per cell, interleaved\n\n",
		c.workers, c.duration, c.warmup, c.rate, c.duration, c.users, c.repeat)
	fmt.Fprintf(&b, "Medians over runs, each column on its own. Latencies in ms. CPU µs/req is the gateway process's user+system CPU during that attack divided by the requests it served (10 ms resolution).\n\n")
	fmt.Fprintf(&b, "| cell | max req/s | range | p50 @max | p99 @max | CPU µs/req @max | p50 @%d/s | p99 @%d/s | achieved req/s | CPU µs/req @%d/s | 429 share | errors | store fallbacks |\n", c.rate, c.rate, c.rate)
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for i, ce := range c.cells {
		runs := r.runs[i]
		lo := slices.MinFunc(runs, func(a, b cellRun) int { return cmp.Compare(a.max.rps(), b.max.rps()) })
		hi := slices.MaxFunc(runs, func(a, b cellRun) int { return cmp.Compare(a.max.rps(), b.max.rps()) })
		var reqs, denied, errs int
		var trouble float64
		for _, cr := range runs {
			for _, p := range []phase{cr.max, cr.fixed} {
				reqs += p.requests
				denied += p.denied
				errs += p.errors
			}
			trouble += cr.storeTrouble
		}
		fmt.Fprintf(&b, "| %s | %.0f | %.0f–%.0f | %s | %s | %s | %s | %s | %.0f | %s | %.1f%% | %d | %.0f |\n",
			ce.name, median(runs, maxRPS), lo.max.rps(), hi.max.rps(),
			ms(median(runs, quantileNanos(maxPhase, 0.5))), ms(median(runs, quantileNanos(maxPhase, 0.99))), cpuCol(runs, cpuPerRequest),
			ms(median(runs, quantileNanos(fixedPhase, 0.5))), ms(median(runs, quantileNanos(fixedPhase, 0.99))),
			median(runs, func(r cellRun) float64 { return r.fixed.rps() }), cpuCol(runs, cpuPerRequestFixed),
			100*float64(denied)/float64(max(reqs, 1)), errs, trouble)
	}
	b.WriteString("\n")
	r.writeRatios(&b)
	b.WriteString("\nCells:\n\n")
	for _, ce := range c.cells {
		fmt.Fprintf(&b, "- %s: %s\n", ce.name, ce.about)
	}
	for i, ce := range c.cells {
		for _, cr := range r.runs[i] {
			if e := firstError(cr); e != "" {
				fmt.Fprintf(&b, "\nfirst error in %s: %s\n", ce.name, e)
				break
			}
		}
	}
	return b.String()
}

// writeRatios compares each limits cell with nolimits: max req/s and gateway
// CPU per request. The target is memory ÷ nolimits ≥ 0.90.
func (r *report) writeRatios(b *strings.Builder) {
	base := r.cellIndex("nolimits")
	if base < 0 {
		return
	}
	baseRPS, baseCPU := median(r.runs[base], maxRPS), median(r.runs[base], cpuPerRequest)
	baseCPUFixed := median(r.runs[base], cpuPerRequestFixed)
	for i, ce := range r.cfg.cells {
		if ce.name == "nolimits" || ce.direct {
			continue
		}
		ratio := median(r.runs[i], maxRPS) / baseRPS
		fmt.Fprintf(b, "- %s ÷ nolimits, max req/s: %.3f", ce.name, ratio)
		if len(r.runs[i]) > 1 {
			paired := pairedRatios(r.runs[i], r.runs[base])
			fmt.Fprintf(b, " (median of per-round ratios %.3f, range %.3f–%.3f)", median1(paired), slices.Min(paired), slices.Max(paired))
		}
		if ce.name == "memory" {
			verdict := "met"
			if ratio < 0.90 {
				verdict = "MISSED"
			}
			fmt.Fprintf(b, " (target ≥ 0.90: %s)", verdict)
		}
		if cpu := median(r.runs[i], cpuPerRequest); cpu > 0 && baseCPU > 0 {
			fmt.Fprintf(b, "; gateway CPU per request @max %.1f µs vs %.1f µs (%+.1f µs, nolimits÷this %.3f)", cpu, baseCPU, cpu-baseCPU, baseCPU/cpu)
		}
		if cpu := median(r.runs[i], cpuPerRequestFixed); cpu > 0 && baseCPUFixed > 0 {
			fmt.Fprintf(b, "; @%d/s %.1f µs vs %.1f µs (%+.1f µs, nolimits÷this %.3f)", r.cfg.rate, cpu, baseCPUFixed, cpu-baseCPUFixed, baseCPUFixed/cpu)
		}
		b.WriteString("\n")
	}
}

func (r *report) cellIndex(name string) int {
	return slices.IndexFunc(r.cfg.cells, func(c cell) bool { return c.name == name })
}

func firstError(cr cellRun) string {
	if cr.max.firstError != "" {
		return cr.max.firstError
	}
	return cr.fixed.firstError
}

// pairedRatios returns, round by round, a's max req/s ÷ base's: the two ran
// next to each other, so each ratio saw similar machine load.
func pairedRatios(a, base []cellRun) []float64 {
	out := make([]float64, 0, len(a))
	for i := range min(len(a), len(base)) {
		if b := base[i].max.rps(); b > 0 {
			out = append(out, a[i].max.rps()/b)
		}
	}
	return out
}

// median1 returns the median of v (0 if empty); it sorts v.
func median1(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}
