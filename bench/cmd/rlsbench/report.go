package main

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// report is everything a run measured.
type report struct {
	cfg                               *config
	started                           time.Time
	goVersion, cpuModel, redisVersion string
	sluiceVersion, peerVersion        string
	cpus                              int
	loadBefore, loadAfter             string
	checks                            []checkResult
	cells                             []cellResult
}

// failures describes what makes the run fail: a check that did not admit
// exactly K, a cell with errors, denials, store trouble or no decisions.
// It returns "" when there is none.
func (r *report) failures() string {
	var msgs []string
	for _, c := range r.checks {
		if !c.ok() {
			msgs = append(msgs, fmt.Sprintf("%s admitted %d of %d calls limited to %d (first denied: call %d, %d errors)", c.server, c.admitted, c.calls, c.limit, c.firstDenied, c.errs))
		}
	}
	for _, c := range r.cells {
		if c.errs > 0 || c.over > 0 || c.decisions == 0 || c.trouble != 0 || c.redisErr != "" {
			msgs = append(msgs, fmt.Sprintf("round %d %s conc %d: %d decisions, %d errors (%s), %d over limit, store trouble %v, redis stats error %q", c.round, c.server, c.conc, c.decisions, c.errs, c.firstErr, c.over, c.trouble, c.redisErr))
		}
	}
	return strings.Join(msgs, "; ")
}

// servers returns the measured servers' names in the order they started.
func (r *report) servers() []string {
	var names []string
	for _, c := range r.checks {
		names = append(names, c.server)
	}
	return names
}

// summary is the median and range of one measure over the rounds.
type summary struct{ med, lo, hi float64 }

// summarize returns the median (the mean of the middle two for an even
// count) and range of vs, which must not be empty.
func summarize(vs []float64) summary {
	s := slices.Clone(vs)
	slices.Sort(s)
	n := len(s)
	med := s[n/2]
	if n%2 == 0 {
		med = (s[n/2-1] + s[n/2]) / 2
	}
	return summary{med, s[0], s[n-1]}
}

// measure extracts one figure of a cell.
type measure func(cellResult) float64

var (
	rate       measure = cellResult.rate
	p50        measure = func(c cellResult) float64 { return micros(c.p50) }
	p99        measure = func(c cellResult) float64 { return micros(c.p99) }
	serverCPU  measure = func(c cellResult) float64 { return micros(c.perDecision(c.serverCPU)) }
	redisCPU   measure = func(c cellResult) float64 { return micros(c.perDecision(c.redisCPU)) }
	harnessCPU measure = func(c cellResult) float64 { return micros(c.perDecision(c.harnessCPU)) }
)

func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// stat summarizes m over the rounds of server at conc; ok is false when
// there is no such cell.
func (r *report) stat(server string, conc int, m measure) (summary, bool) {
	var vs []float64
	for _, c := range r.cells {
		if c.server == server && c.conc == conc {
			vs = append(vs, m(c))
		}
	}
	if len(vs) == 0 {
		return summary{}, false
	}
	return summarize(vs), true
}

// fmtSummary formats s as "median (lo–hi)" with prec decimals, or the
// median alone after a single round.
func fmtSummary(s summary, prec int) string {
	if s.lo == s.hi {
		return fmt.Sprintf("%.*f", prec, s.med)
	}
	return fmt.Sprintf("%.*f (%.*f–%.*f)", prec, s.med, prec, s.lo, prec, s.hi)
}

// markdown renders the report.
func (r *report) markdown() string {
	var b strings.Builder
	c := r.cfg
	fmt.Fprintf(&b, "# Envoy rate limit service: sluice vs envoyproxy/ratelimit\n\n")
	fmt.Fprintf(&b, "- Command: `%s`\n", c.cmdline)
	fmt.Fprintf(&b, "- Date: %s; machine: %d cores (%s), load average before %s, after %s\n", r.started.Format(time.RFC3339), r.cpus, r.cpuModel, r.loadBefore, r.loadAfter)
	fmt.Fprintf(&b, "- sluice: commit %s, %s; Redis %s (one redis-server on 127.0.0.1 for both)\n", r.sluiceVersion, r.goVersion, r.redisVersion)
	if r.peerVersion != "" {
		fmt.Fprintf(&b, "- envoyproxy/ratelimit: %s\n", r.peerVersion)
	}
	fmt.Fprintf(&b, "- Load: %d rounds, servers in alternating order; per cell %v warm-up then %v measured; each call one descriptor `%s=uN` over %d values (limit %d/minute each, so every call is admitted); one gRPC connection per server shared by the client goroutines, which run in the harness on the same cores\n\n",
		c.repeat, c.warmup, c.duration, userKey, c.keys, userLimit)

	b.WriteString("## Correctness: a limit of K per minute on one key, K+M sequential calls\n\n")
	b.WriteString("| server | K | calls | admitted | denied | first denied call | errors | verdict |\n|---|---:|---:|---:|---:|---:|---:|---|\n")
	for _, ch := range r.checks {
		verdict := "exact"
		if !ch.ok() {
			verdict = "**wrong**"
		}
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %d | %d | %d | %s |\n", ch.server, ch.limit, ch.calls, ch.admitted, ch.denied, ch.firstDenied, ch.errs, verdict)
	}

	b.WriteString("\n## Throughput, latency and CPU per decision (median (min–max) over rounds)\n\n")
	b.WriteString("| server | conc | decisions/s | p50 µs | p99 µs | server CPU µs/decision | Redis CPU µs/decision | client CPU µs/decision | errors | over limit |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, conc := range c.conc {
		for _, s := range r.servers() {
			var errs, over int64
			for _, cl := range r.cells {
				if cl.server == s && cl.conc == conc {
					errs += cl.errs
					over += cl.over
				}
			}
			cols := []string{s, fmt.Sprint(conc)}
			for _, m := range []struct {
				f    measure
				prec int
			}{{rate, 0}, {p50, 0}, {p99, 0}, {serverCPU, 1}, {redisCPU, 1}, {harnessCPU, 1}} {
				st, ok := r.stat(s, conc, m.f)
				if !ok {
					cols = append(cols, "–")
					continue
				}
				cols = append(cols, fmtSummary(st, m.prec))
			}
			cols = append(cols, fmt.Sprint(errs), fmt.Sprint(over))
			fmt.Fprintf(&b, "| %s |\n", strings.Join(cols, " | "))
		}
	}

	b.WriteString("\n## Redis commands per decision, and µs inside each call (all rounds)\n\n| server | conc | commands |\n|---|---:|---|\n")
	for _, conc := range c.conc {
		for _, s := range r.servers() {
			fmt.Fprintf(&b, "| %s | %d | %s |\n", s, conc, r.commandsPerDecision(s, conc))
		}
	}

	if servers := r.servers(); len(servers) == 2 {
		fmt.Fprintf(&b, "\n## Ratios %s / %s (of the medians)\n\n", servers[0], servers[1])
		b.WriteString("| conc | decisions/s | p50 | p99 | server CPU/decision | Redis CPU/decision |\n|---:|---:|---:|---:|---:|---:|\n")
		for _, conc := range c.conc {
			cols := []string{fmt.Sprint(conc)}
			for _, m := range []measure{rate, p50, p99, serverCPU, redisCPU} {
				a, ok1 := r.stat(servers[0], conc, m)
				p, ok2 := r.stat(servers[1], conc, m)
				if !ok1 || !ok2 || p.med == 0 {
					cols = append(cols, "–")
					continue
				}
				cols = append(cols, fmt.Sprintf("%.2f", a.med/p.med))
			}
			fmt.Fprintf(&b, "| %s |\n", strings.Join(cols, " | "))
		}
	}
	b.WriteString("\nCPU is user+system time from /proc/PID/stat (10 ms ticks) over the measured time, divided by the decisions; the client goroutines share the cores with the servers and Redis. Redis's command counts and times come from INFO commandstats, reset at the start of each measured time: commands a script runs are counted too, and a script's time includes theirs; no time includes reading and writing the sockets.\n")
	return b.String()
}

// commandsPerDecision lists the Redis commands server ran per decision at
// conc, over all rounds, most frequent first, each with its mean time inside
// Redis per call, such as "EVALSHA 1.00 (12.3 µs)".
func (r *report) commandsPerDecision(server string, conc int) string {
	calls, usec := map[string]int64{}, map[string]int64{}
	var decisions int64
	for _, c := range r.cells {
		if c.server != server || c.conc != conc {
			continue
		}
		decisions += c.decisions
		for name, n := range c.redisCalls {
			calls[name] += n
			usec[name] += c.redisUsec[name]
		}
	}
	if decisions == 0 {
		return "–"
	}
	names := slices.Collect(maps.Keys(calls))
	slices.SortFunc(names, func(a, b string) int { return cmp.Or(cmp.Compare(calls[b], calls[a]), cmp.Compare(a, b)) })
	var parts []string
	for _, n := range names {
		if per := float64(calls[n]) / float64(decisions); per >= 0.005 {
			parts = append(parts, fmt.Sprintf("%s %.2f (%.1f µs)", strings.ToUpper(n), per, float64(usec[n])/float64(calls[n])))
		}
	}
	return strings.Join(parts, ", ")
}
