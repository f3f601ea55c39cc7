package main

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// report is everything one invocation measured.
type report struct {
	cfg                      *config
	cells                    []cell // the cells run, in report order
	started                  time.Time
	goVersion                string
	cpus                     int
	loadBefore, loadAfter    string
	nginxVersion, wrkVersion string
	h2loadVersion            string
	runs                     [][]cellRun // per cell, per round
}

// bad reports whether a run cannot be trusted: no requests, errors or
// non-2xx answers (the limits admit everything), store trouble, or CPU
// times that could not be read.
func (r cellRun) bad() bool {
	return r.load.requests == 0 || r.load.errors > 0 || r.storeTrouble > 0 || !r.cpuKnown
}

// failedRuns counts the runs that cannot be trusted.
func (r *report) failedRuns() int {
	n := 0
	for _, runs := range r.runs {
		for _, cr := range runs {
			if cr.bad() {
				n++
			}
		}
	}
	return n
}

// perRequest is d per request of the run, in µs.
func perRequest(r cellRun, d time.Duration) float64 {
	if r.load.requests == 0 {
		return 0
	}
	return float64(d.Nanoseconds()) / 1e3 / float64(r.load.requests)
}

// The per-run figures the report summarises.
func rps(r cellRun) float64        { return r.load.rps() }
func cpuTotal(r cellRun) float64   { return perRequest(r, r.proxyCPU+r.upstreamCPU) }
func cpuProxy(r cellRun) float64   { return perRequest(r, r.proxyCPU) }
func cpuRedis(r cellRun) float64   { return perRequest(r, r.redisCPU) }
func errorCount(r cellRun) float64 { return float64(r.load.errors) + r.storeTrouble }

// stats returns the median, minimum and maximum of f over runs (the median
// of an even count is the mean of the middle two).
func stats(runs []cellRun, f func(cellRun) float64) (med, lo, hi float64) {
	if len(runs) == 0 {
		return 0, 0, 0
	}
	v := make([]float64, len(runs))
	for i, r := range runs {
		v[i] = f(r)
	}
	slices.Sort(v)
	n := len(v)
	med = v[n/2]
	if n%2 == 0 {
		med = (v[n/2-1] + v[n/2]) / 2
	}
	return med, v[0], v[n-1]
}

// ratio formats a/b, or "n/a" when b is not known.
func ratio(a, b float64) string {
	if b <= 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2f×", a/b)
}

// markdown renders the report: conditions, the table of the cleartext
// cells and that of the TLS cells (each when one of its cells ran), what
// each cell is, and the TLS runs with failures or non-2xx answers.
func (r *report) markdown() string {
	var b strings.Builder
	c := r.cfg
	fmt.Fprintf(&b, "# peerbench, %s\n\n", r.started.Format("2006-01-02 15:04 UTC"))
	fmt.Fprintf(&b, "`%s`\n\n", c.cmdline)
	clear, tls := r.hasCells(false), r.hasCells(true)
	if clear {
		fmt.Fprintf(&b, "%d CPUs, %s, %s, %s (%d workers); load average %s before, %s after. "+
			"wrk -t%d -c%d -d%v (warm-up %v), a random X-User-Id over %d users per request; rounds: %d, the cell order rotated each round. "+
			"req/s and CPU are medians over the rounds, with their ranges; CPU is utime+stime of the proxy's and the upstream's process trees per request.\n\n",
			r.cpus, r.goVersion, r.wrkVersion, orNA(r.nginxVersion), c.nginxWorkers, r.loadBefore, r.loadAfter,
			c.threads, c.connections, c.duration, c.warmup, c.users, c.rounds)
	} else {
		fmt.Fprintf(&b, "%d CPUs, %s, %s (%d workers); load average %s before, %s after; rounds: %d, the cell order rotated each round. "+
			"req/s and CPU are medians over the rounds, with their ranges; CPU is utime+stime of the proxy's and the upstream's process trees per request.\n\n",
			r.cpus, r.goVersion, orNA(r.nginxVersion), c.nginxWorkers, r.loadBefore, r.loadAfter, c.rounds)
	}
	if tls {
		fmt.Fprintf(&b, "TLS cells: %s -t%d, HTTP/2 -c%d -m%d, HTTPS/1.1 --h1 -c%d -m1; -D %v after a warm-up of %v on the same connections, "+
			"CPU read over the measured %v only; TLS 1.3 only (every measured connection negotiated it; each run also checks that its server refuses a TLS 1.2 client), "+
			"one ECDSA P-256 certificate for the run; "+
			"every connection walks the same shuffled list of %d URIs, one per user in the query parameter %s, on which the limits are keyed.\n\n",
			r.h2loadVersion, c.threads, c.h2Conns, c.h2Streams, c.https1Conns, c.duration, c.warmup, c.duration, c.users, userQuery)
	}
	if clear {
		r.clearTable(&b)
	}
	if tls {
		if clear {
			b.WriteString("\n")
		}
		r.tlsTable(&b)
	}
	r.targets(&b)
	b.WriteString("\nCells:\n\n")
	for _, ce := range r.cells {
		about := ce.about
		if ce.kind == kindNginx {
			about = fmt.Sprintf(about, r.cfg.nginxWorkers)
		}
		fmt.Fprintf(&b, "- `%s`: %s\n", ce.name, about)
	}
	b.WriteString("\nerrors counts socket errors, non-2xx answers and (sluice) store errors and fallback decisions over all rounds; a run with any is not to be trusted.\n")
	r.troubles(&b)
	return b.String()
}

// hasCells reports whether a TLS cell (tls) or a cleartext one (!tls) ran.
func (r *report) hasCells(tls bool) bool {
	return slices.ContainsFunc(r.cells, func(ce cell) bool { return (ce.proto != protoNone) == tls })
}

// clearTable writes the table of the cleartext cells, with ratios to the
// nginx cell's medians.
func (r *report) clearTable(b *strings.Builder) {
	nginxRPS, _ := r.median("nginx", rps)
	nginxCPU, _ := r.median("nginx", cpuTotal)
	b.WriteString("| cell | req/s | req/s range | req/s ÷ nginx | CPU µs/req | CPU range | CPU ÷ nginx | proxy µs/req | Redis µs/req | errors |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for i, ce := range r.cells {
		if ce.proto != protoNone {
			continue
		}
		runs := r.runs[i]
		q, qlo, qhi := stats(runs, rps)
		u, ulo, uhi := stats(runs, cpuTotal)
		p, _, _ := stats(runs, cpuProxy)
		redis := "–"
		if ce.redis {
			v, _, _ := stats(runs, cpuRedis)
			redis = fmt.Sprintf("%.1f", v)
		}
		proxy := fmt.Sprintf("%.1f", p)
		if ce.kind == kindUpstream {
			proxy = "–"
		}
		fmt.Fprintf(b, "| %s | %.0f | %.0f–%.0f | %s | %.1f | %.1f–%.1f | %s | %s | %s | %.0f |\n",
			ce.name, q, qlo, qhi, ratio(q, nginxRPS), u, ulo, uhi, ratio(u, nginxCPU), proxy, redis, totalErrors(runs))
	}
}

// tlsPeer returns the name of the cell of kind over proto's protocol that
// the TLS cells are compared with: "nginx-h2", "go-https1".
func tlsPeer(kind cellKind, proto tlsProto) string {
	prefix := "go"
	if kind == kindNginx {
		prefix = "nginx"
	}
	if proto == protoH2 {
		return prefix + "-h2"
	}
	return prefix + "-https1"
}

// tlsTable writes the table of the TLS cells, with ratios to the medians
// of nginx and of the Go floor over the same protocol.
func (r *report) tlsTable(b *strings.Builder) {
	b.WriteString("| cell | protocol | req/s | req/s range | req/s ÷ nginx | req/s ÷ Go | CPU µs/req | CPU range | CPU ÷ nginx | CPU ÷ Go | proxy µs/req | errors |\n")
	b.WriteString("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for i, ce := range r.cells {
		if ce.proto == protoNone {
			continue
		}
		nginxRPS, _ := r.median(tlsPeer(kindNginx, ce.proto), rps)
		nginxCPU, _ := r.median(tlsPeer(kindNginx, ce.proto), cpuTotal)
		goRPS, _ := r.median(tlsPeer(kindGoProxy, ce.proto), rps)
		goCPU, _ := r.median(tlsPeer(kindGoProxy, ce.proto), cpuTotal)
		runs := r.runs[i]
		q, qlo, qhi := stats(runs, rps)
		u, ulo, uhi := stats(runs, cpuTotal)
		p, _, _ := stats(runs, cpuProxy)
		fmt.Fprintf(b, "| %s | %s | %.0f | %.0f–%.0f | %s | %s | %.1f | %.1f–%.1f | %s | %s | %.1f | %.0f |\n",
			ce.name, ce.proto, q, qlo, qhi, ratio(q, nginxRPS), ratio(q, goRPS),
			u, ulo, uhi, ratio(u, nginxCPU), ratio(u, goCPU), p, totalErrors(runs))
	}
}

// totalErrors sums errorCount over runs.
func totalErrors(runs []cellRun) float64 {
	var errs float64
	for _, cr := range runs {
		errs += errorCount(cr)
	}
	return errs
}

// troubles lists the TLS runs with failed requests or non-2xx answers, as
// h2load counted them, and the TLS cells whose server accepted a TLS 1.2
// client.
func (r *report) troubles(b *strings.Builder) {
	var lines, tls12 []string
	for i, ce := range r.cells {
		for round, cr := range r.runs[i] {
			if cr.trouble != "" {
				lines = append(lines, fmt.Sprintf("- `%s`, round %d: %s", ce.name, round+1, cr.trouble))
			}
		}
		if slices.ContainsFunc(r.runs[i], func(cr cellRun) bool { return cr.acceptsTLS12 }) {
			tls12 = append(tls12, "`"+ce.name+"`")
		}
	}
	if len(lines) > 0 {
		b.WriteString("\nTLS runs with failures or non-2xx answers (h2load's counts):\n\n" + strings.Join(lines, "\n") + "\n")
	}
	if len(tls12) > 0 {
		b.WriteString("\nConfigured for TLS 1.3 only, these servers accepted a TLS 1.2 client (their measured connections negotiated TLS 1.3): " +
			strings.Join(tls12, ", ") + ".\n")
	}
}

func orNA(s string) string {
	if s == "" {
		return "n/a"
	}
	return s
}

// The gateway targets (docs/scaling.md and BENCHMARKS.md report against
// them), judged on the cells' medians.
const (
	targetMemoryOverNginx   = 0.8 // sluice-memory req/s ÷ nginx's
	targetMemoryCPUPerNginx = 1.3 // sluice-memory CPU per request ÷ nginx's, at most
	targetLimitsKeep        = 0.9 // sluice-memory req/s ÷ sluice-nolimits' (limits cost ≤ 10%)
	targetRedisOverTraefik  = 3.0 // sluice-redis req/s ÷ traefik-redis'
	targetRedisOverMemory   = 0.6 // sluice-redis req/s ÷ sluice-memory's
)

// median returns the median of f over the runs of the cell named name, and
// whether the cell ran.
func (r *report) median(name string, f func(cellRun) float64) (float64, bool) {
	for i, ce := range r.cells {
		if ce.name == name && len(r.runs[i]) > 0 {
			m, _, _ := stats(r.runs[i], f)
			return m, m > 0
		}
	}
	return 0, false
}

// targets writes the verdict of each target whose cells ran.
func (r *report) targets(b *strings.Builder) {
	var lines []string
	check := func(what string, a, bb string, f func(cellRun) float64, target float64, atMost bool) {
		x, okA := r.median(a, f)
		y, okB := r.median(bb, f)
		if !okA || !okB {
			return
		}
		v := x / y
		met := v >= target
		cmp := "≥"
		if atMost {
			met, cmp = v <= target, "≤"
		}
		verdict := "missed"
		if met {
			verdict = "met"
		}
		lines = append(lines, fmt.Sprintf("- %s %s %.2g×: %.3f× (**%s**)", what, cmp, target, v, verdict))
	}
	check("sluice-memory ÷ nginx, req/s", "sluice-memory", "nginx", rps, targetMemoryOverNginx, false)
	check("sluice-memory ÷ nginx, CPU per request", "sluice-memory", "nginx", cpuTotal, targetMemoryCPUPerNginx, true)
	check("sluice-memory ÷ sluice-nolimits, req/s (limits cost ≤ 10%)", "sluice-memory", "sluice-nolimits", rps, targetLimitsKeep, false)
	check("sluice-redis ÷ traefik-redis, req/s", "sluice-redis", "traefik-redis", rps, targetRedisOverTraefik, false)
	check("sluice-redis ÷ sluice-memory, req/s", "sluice-redis", "sluice-memory", rps, targetRedisOverMemory, false)
	if len(lines) == 0 {
		return
	}
	b.WriteString("\nTargets, on the medians above:\n\n" + strings.Join(lines, "\n") + "\n")
}
