package main

import (
	"fmt"
	"strings"
	"time"
)

// report is everything one run measured.
type report struct {
	cfg            *config
	started        time.Time
	redisVersion   string
	goVersion      string
	cpus, procs    int
	call           *scriptCall
	cells          []cellResult
	ceilings       []ceilingResult
	ceilingSkipped string // why there is no ceiling, if there is none
	// loadBefore and loadAfter are the load averages (1, 5, 15 min) at the
	// start and end of the run, "" where unknown.
	loadBefore, loadAfter string
}

// Targets: sluice against redis_rate at concurrency ≥ 64 and at 1, and its
// best figure against the redis-benchmark ceiling when the ceiling is Redis'
// own limit (not starved: redis-server busy at least ceilingBusy of a core).
const (
	targetConc        = 64
	targetOverRate    = 2.5
	targetLoneRate    = 1.0
	targetOverCeiling = 1.5
	ceilingBusy       = 0.9
	sluiceName        = "sluice"
	redisRateName     = "redis_rate"
	goredisScriptName = "goredis-script"
	rueidisScriptName = "rueidis-script"
)

// failedCells counts cells with an error or no decision at all.
func (r *report) failedCells() int {
	n := 0
	for _, c := range r.cells {
		if c.errors > 0 || c.decisions == 0 {
			n++
		}
	}
	return n
}

// cell returns the result for (impl, keys, conc).
func (r *report) cell(impl string, keys, conc int) (cellResult, bool) {
	for _, c := range r.cells {
		if c.impl == impl && c.keys == keys && c.conc == conc {
			return c, true
		}
	}
	return cellResult{}, false
}

// ceiling returns the ceiling measured for keys.
func (r *report) ceiling(keys int) (ceilingResult, bool) {
	for _, c := range r.ceilings {
		if c.keys == keys {
			return c, true
		}
	}
	return ceilingResult{}, false
}

// markdown renders the report.
func (r *report) markdown() string {
	var b strings.Builder
	c := r.cfg
	fmt.Fprintf(&b, "# Redis decision throughput\n\n")
	fmt.Fprintf(&b, "- Command: `%s`\n", c.cmdline)
	fmt.Fprintf(&b, "- Date: %s\n", r.started.Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(&b, "- Machine: %d CPUs (GOMAXPROCS %d), %s, redis-server %s on loopback TCP, persistence off. "+
		"The harness, its clients and redis-server share these cores, so every figure includes that contention.\n",
		r.cpus, r.procs, r.goVersion, r.redisVersion)
	if r.cfg.pin {
		fmt.Fprintf(&b, "- Pinned (-pin): redis-server alone on CPU %d; the harness, its clients and redis-benchmark on the others.\n", r.cpus-1)
	}
	if r.loadBefore != "n/a" {
		fmt.Fprintf(&b, "- Load average (1, 5, 15 min) before the run: %s; after: %s. Anything else running on the machine lowers every figure.\n", r.loadBefore, r.loadAfter)
	}
	fmt.Fprintf(&b, "- Each cell: %v warm-up, then %v measured; each of `conc` goroutines decides back to back on keys "+
		"drawn uniformly from the key count; the database is flushed before each cell, nothing is preloaded. "+
		"Latency is per decision, from a log-linear histogram (±1.6%%). "+
		"CPU/decision is the CPU time the harness process (client library, store code and the harness loop) "+
		"and redis-server used during the measured window, divided by the calls made; it moves less than decisions/s "+
		"with other load on the machine. Script time/call is Redis' own time inside EVALSHA per call "+
		"(INFO commandstats, warm-up included): the Lua script's cost without the socket work. "+
		"Decisions/script call is the calls the workers made (warm-up included) divided by the script calls Redis ran: "+
		"above 1 where a store evaluates several requests in one script call.\n", c.warmup, c.duration)
	if c.repeat > 1 {
		fmt.Fprintf(&b, "- Each cell ran %d times, in rounds over the implementations; the row is the run with the median decisions/s "+
			"(its latencies and CPU), the range is the lowest and highest run, errors add up over all runs.\n", c.repeat)
	}
	if c.goredisPool > 0 {
		fmt.Fprintf(&b, "- go-redis PoolSize: %d.\n", c.goredisPool)
	} else {
		fmt.Fprintf(&b, "- go-redis PoolSize: library default (10 per GOMAXPROCS = %d).\n", 10*r.procs)
	}
	if c.flushDelay > 0 {
		fmt.Fprintf(&b, "- rueidis-script's MaxFlushDelay: %v.\n", c.flushDelay)
	}
	fmt.Fprintf(&b, "\nImplementations (the limit is a token bucket of capacity %d refilled at %d/s, or its nearest equivalent):\n\n", bucketCapacity, bucketRate)
	for _, im := range c.impls {
		fmt.Fprintf(&b, "- `%s`: %s\n", im.name, im.desc)
	}
	if r.call != nil {
		fmt.Fprintf(&b, "\nsluice's script call, captured with MONITOR from one `Evaluate` (TAG is the 22-character hash of the caller's key; "+
			"the script is %d bytes): `%s`\n",
			len(r.call.source), strings.Join(quoteArgs(append([]string{"EVALSHA", r.call.sha, fmt.Sprint(len(r.call.keys))},
				append(r.call.withKey("TAG"), r.call.args...)...)), " "))
	}
	for _, n := range c.keys {
		r.keysSection(&b, n)
	}
	if r.ceilingSkipped != "" {
		fmt.Fprintf(&b, "\nNo ceiling: %s\n", r.ceilingSkipped)
	}
	b.WriteString("\n")
	return b.String()
}

func (r *report) keysSection(b *strings.Builder, n int) {
	c := r.cfg
	fmt.Fprintf(b, "\n## %d keys\n\n", n)
	rangeHead, rangeSep := "", ""
	if c.repeat > 1 {
		rangeHead, rangeSep = " range of runs |", "---:|"
	}
	fmt.Fprintf(b, "| impl | conc | decisions/s |%s p50 | p99 | allowed | errors | client CPU/decision | redis CPU/decision | script time/call | decisions/script call |\n|---|---:|---:|%s---:|---:|---:|---:|---:|---:|---:|---:|\n", rangeHead, rangeSep)
	for _, im := range c.impls {
		for _, conc := range c.conc {
			cell, ok := r.cell(im.name, n, conc)
			if !ok {
				continue
			}
			allowed := "n/a"
			if cell.allowedKnown && cell.decisions > 0 {
				allowed = fmt.Sprintf("%.1f%%", 100*float64(cell.allowed)/float64(cell.decisions))
			}
			clientCPU, serverCPU := "n/a", "n/a"
			if cc, sc, ok := cell.cpuPerDecision(); ok {
				clientCPU, serverCPU = fmtMicros(cc), fmtMicros(sc)
			}
			rng := ""
			if c.repeat > 1 {
				rng = fmt.Sprintf(" %.0f–%.0f |", cell.minRate, cell.maxRate)
			}
			script, perCall := "n/a", "n/a"
			if cell.scriptTime > 0 {
				script = fmtMicros(cell.scriptTime)
			}
			if cell.scriptCalls > 0 {
				perCall = fmt.Sprintf("%.1f", float64(cell.calls)/float64(cell.scriptCalls))
			}
			fmt.Fprintf(b, "| %s | %d | %.0f |%s %s | %s | %s | %d | %s | %s | %s | %s |\n",
				im.name, conc, cell.perSecond(), rng, fmtDur(cell.p50), fmtDur(cell.p99), allowed, cell.errors, clientCPU, serverCPU, script, perCall)
		}
	}
	ceil, haveCeil := r.ceiling(n)
	if haveCeil {
		serverCPU := "n/a"
		if ceil.serverCPUPer > 0 {
			serverCPU = fmtMicros(ceil.serverCPUPer)
		}
		rng := ""
		if ceil.runs > 1 {
			rng = fmt.Sprintf("median of %d runs, range %.0f–%.0f; ", ceil.runs, ceil.minRPS, ceil.maxRPS)
		}
		fmt.Fprintf(b, "\nCeiling: `redis-benchmark %s` → **%.0f decisions/s** (%sp50 %s, p99 %s per request as redis-benchmark counts them, %d requests; redis CPU/decision %s).\n",
			strings.Join(quoteArgs(ceil.args), " "), ceil.rps, rng, fmtDur(ceil.p50), fmtDur(ceil.p99), ceil.requests, serverCPU)
	}
	if haveCeil {
		if busy, known := ceil.busy(); !known {
			b.WriteString("\nredis-server's CPU during the ceiling is unknown, so whether the ceiling was starved is too.\n")
		} else if busy < ceilingBusy {
			fmt.Fprintf(b, "\n**Warning:** redis-server was busy %.0f%% of one core during the ceiling, so redis-benchmark, not Redis, "+
				"set it (the cores are shared; see -pin): it was starved and the ratios to it mean little.\n", 100*busy)
		} else {
			fmt.Fprintf(b, "\nredis-server was busy %.0f%% of one core during the ceiling: the ceiling is Redis' own limit for that call, not starved.\n", 100*busy)
		}
	}
	r.ratios(b, n, ceil, haveCeil)
	r.targets(b, n, ceil, haveCeil)
}

// ratios writes the table of sluice's rate against the others for n keys.
func (r *report) ratios(b *strings.Builder, n int, ceil ceilingResult, haveCeil bool) {
	fmt.Fprintf(b, "\n| conc | sluice / redis_rate | sluice / ceiling | sluice / rueidis-script | rueidis-script / goredis-script |\n|---:|---:|---:|---:|---:|\n")
	for _, conc := range r.cfg.conc {
		s, _ := r.cell(sluiceName, n, conc)
		ratio := func(other string) string {
			o, ok := r.cell(other, n, conc)
			if !ok || o.perSecond() == 0 || s.perSecond() == 0 {
				return "n/a"
			}
			return fmt.Sprintf("%.2f", s.perSecond()/o.perSecond())
		}
		ofCeil := "n/a"
		if haveCeil && s.perSecond() > 0 {
			ofCeil = fmt.Sprintf("%.0f%%", 100*s.perSecond()/ceil.rps)
		}
		rs := "n/a"
		if x, ok := r.cell(rueidisScriptName, n, conc); ok {
			if g, ok := r.cell(goredisScriptName, n, conc); ok && g.perSecond() > 0 {
				rs = fmt.Sprintf("%.2f", x.perSecond()/g.perSecond())
			}
		}
		fmt.Fprintf(b, "| %d | %s | %s | %s | %s |\n", conc, ratio(redisRateName), ofCeil, ratio(rueidisScriptName), rs)
	}
}

// targets writes whether sluice met the targets: at least targetOverRate×
// redis_rate at each concurrency of at least targetConc, targetLoneRate× at
// concurrency 1, and, when the ceiling was not starved, its best
// decisions/s at least targetOverCeiling× the ceiling.
func (r *report) targets(b *strings.Builder, n int, ceil ceilingResult, haveCeil bool) {
	var parts []string
	var overRate []string
	metRate := true
	best := 0.0
	for _, conc := range r.cfg.conc {
		s, ok := r.cell(sluiceName, n, conc)
		if !ok {
			continue
		}
		best = max(best, s.perSecond())
		rr, ok := r.cell(redisRateName, n, conc)
		if !ok || rr.perSecond() == 0 {
			continue
		}
		x := s.perSecond() / rr.perSecond()
		switch {
		case conc == 1:
			parts = append(parts, fmt.Sprintf("sluice ≥ %.1f× redis_rate at concurrency 1: **%s** (%.2f×)", targetLoneRate, verdict(x >= targetLoneRate), x))
		case conc >= targetConc:
			metRate = metRate && x >= targetOverRate
			overRate = append(overRate, fmt.Sprintf("%.2f× at %d", x, conc))
		}
	}
	if len(overRate) > 0 {
		parts = append(parts, fmt.Sprintf("sluice ≥ %.1f× redis_rate at concurrency ≥ %d: **%s** (%s)", targetOverRate, targetConc, verdict(metRate), strings.Join(overRate, ", ")))
	}
	if haveCeil && best > 0 {
		x := best / ceil.rps
		v := verdict(x >= targetOverCeiling)
		if busy, known := ceil.busy(); !known || busy < ceilingBusy {
			v = "not shown: the ceiling was starved"
		}
		parts = append(parts, fmt.Sprintf("sluice's best ≥ %.1f× the ceiling: **%s** (%.2f×)", targetOverCeiling, v, x))
	}
	if len(parts) == 0 {
		return
	}
	b.WriteString("\nTargets: " + strings.Join(parts, "; ") + ".\n")
}

func verdict(met bool) string {
	if met {
		return "met"
	}
	return "missed"
}

// fmtDur formats a latency with three significant figures or so.
func fmtDur(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return fmt.Sprintf("%.0f µs", float64(d)/float64(time.Microsecond))
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
	default:
		return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
	}
}

// fmtMicros formats a CPU time per decision in microseconds.
func fmtMicros(d time.Duration) string {
	return fmt.Sprintf("%.1f µs", float64(d)/float64(time.Microsecond))
}

// quoteArgs quotes arguments that a shell would split or expand.
func quoteArgs(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		if a == "" || strings.ContainsAny(a, " \t\n'\"$`\\*?[]{}()<>|&;#~") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		out[i] = a
	}
	return out
}
