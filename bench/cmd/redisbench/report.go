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

// Targets from the issue: sluice against redis_rate at concurrency ≥ 64 and
// against the redis-benchmark ceiling.
const (
	targetConc        = 64
	targetOverRate    = 2.5
	targetOfCeiling   = 0.8
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
		var above []string
		for _, cell := range r.cells {
			if cell.keys == n && cell.perSecond() > ceil.rps {
				above = append(above, fmt.Sprintf("%s at %d", cell.impl, cell.conc))
			}
		}
		if len(above) > 0 {
			fmt.Fprintf(b, "\n**Warning:** the ceiling is below what %s reached, so on this run it was starved "+
				"(redis-benchmark shares the cores too) and the ratios to it mean little.\n", strings.Join(above, ", "))
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

// targets writes whether sluice met the targets at each concurrency
// of at least targetConc.
func (r *report) targets(b *strings.Builder, n int, ceil ceilingResult, haveCeil bool) {
	var overRate, ofCeil []string
	metRate, metCeil, any := true, true, false
	for _, conc := range r.cfg.conc {
		if conc < targetConc {
			continue
		}
		s, ok := r.cell(sluiceName, n, conc)
		if !ok {
			continue
		}
		if rr, ok := r.cell(redisRateName, n, conc); ok && rr.perSecond() > 0 {
			any = true
			x := s.perSecond() / rr.perSecond()
			metRate = metRate && x >= targetOverRate
			overRate = append(overRate, fmt.Sprintf("%.2f× at %d", x, conc))
		}
		if haveCeil {
			x := s.perSecond() / ceil.rps
			metCeil = metCeil && x >= targetOfCeiling
			ofCeil = append(ofCeil, fmt.Sprintf("%.0f%% at %d", 100*x, conc))
		}
	}
	if !any && len(ofCeil) == 0 {
		return
	}
	b.WriteString("\nTargets at concurrency ≥ 64: ")
	if any {
		fmt.Fprintf(b, "sluice ≥ %.1f× redis_rate: **%s** (%s). ", targetOverRate, verdict(metRate), strings.Join(overRate, ", "))
	}
	if len(ofCeil) > 0 {
		fmt.Fprintf(b, "sluice ≥ %.0f%% of the ceiling: **%s** (%s).", 100*targetOfCeiling, verdict(metCeil), strings.Join(ofCeil, ", "))
	}
	b.WriteString("\n")
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
