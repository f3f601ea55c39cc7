package main

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/sluice-gw/sluice/bench/internal/benchproc"
)

// cellResult is what one (implementation, key count, concurrency) cell measured.
type cellResult struct {
	impl         string
	keys         int
	conc         int
	decisions    uint64 // successful decisions that started in the measured window
	allowed      uint64
	allowedKnown bool
	errors       uint64
	firstErr     error
	elapsed      time.Duration // from the window's start to the last measured completion
	p50, p99     time.Duration
	// clientCPU and serverCPU are the CPU time the harness process and
	// redis-server used from the window's start to its end; cpuOK is false
	// where they could not be read.
	clientCPU, serverCPU time.Duration
	cpuOK                bool
	// scriptTime is Redis' time inside EVAL/EVALSHA per call over the
	// whole cell (warm-up included): the script's own cost.
	scriptTime time.Duration
	// calls is every call the workers made over the whole cell (warm-up
	// included, errors too) and scriptCalls the EVAL/EVALSHA calls Redis
	// executed meanwhile: calls/scriptCalls is the decisions per script
	// call (above 1 when the store batches requests).
	calls, scriptCalls uint64
	// runs is the number of runs of the cell; minRate and maxRate are the
	// lowest and highest decisions/s among them.
	runs             int
	minRate, maxRate float64
}

// median returns the run with the median decisions/s (the lower middle one
// for an even count), with runs, minRate and maxRate set; errors add up.
func median(rs []cellResult) cellResult {
	sorted := slices.Clone(rs)
	slices.SortFunc(sorted, func(a, b cellResult) int { return cmp.Compare(a.perSecond(), b.perSecond()) })
	m := sorted[(len(sorted)-1)/2]
	m.runs, m.minRate, m.maxRate = len(rs), sorted[0].perSecond(), sorted[len(sorted)-1].perSecond()
	m.errors = 0
	for _, r := range rs {
		m.errors += r.errors
		if m.firstErr == nil {
			m.firstErr = r.firstErr
		}
	}
	return m
}

// cpuPerDecision returns client and server CPU time per call made in the
// window (decisions and errors).
func (r cellResult) cpuPerDecision() (client, server time.Duration, ok bool) {
	n := r.decisions + r.errors
	if !r.cpuOK || n == 0 {
		return 0, 0, false
	}
	return r.clientCPU / time.Duration(n), r.serverCPU / time.Duration(n), true
}

// cpuSample is the CPU time used so far by the harness and by redis-server.
type cpuSample struct {
	client, server time.Duration
	ok             bool
}

// sampleCPU reads both CPU times; pid is redis-server's.
func sampleCPU(pid int) cpuSample {
	c, ok1 := selfCPU()
	s, ok2 := benchproc.ProcessCPU(pid)
	return cpuSample{client: c, server: s, ok: ok1 && ok2}
}

// perSecond returns successful decisions per second.
func (r cellResult) perSecond() float64 {
	if r.elapsed <= 0 {
		return 0
	}
	return float64(r.decisions) / r.elapsed.Seconds()
}

// keyNames returns n distinct key names of one length.
func keyNames(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("k:%012d", i)
	}
	return keys
}

// workerStats is one worker's tally, merged after the cell.
type workerStats struct {
	hist                       histogram
	decisions, allowed, errors uint64
	calls                      uint64 // warm-up included
	firstErr                   error
	lastDone                   time.Time
}

// work decides on random keys back to back until a call would start at or
// after until, tallying the calls that start at or after from.
func (st *workerStats) work(ctx context.Context, decide decideFunc, rng *rand.Rand, nkeys int, from, until time.Time) {
	for ctx.Err() == nil {
		i := rng.IntN(nkeys)
		t0 := time.Now()
		if !t0.Before(until) {
			return
		}
		allowed, err := decide(ctx, i)
		t1 := time.Now()
		st.calls++
		if t0.Before(from) {
			continue
		}
		st.lastDone = t1
		if err != nil {
			if st.errors == 0 {
				st.firstErr = err
			}
			st.errors++
			continue
		}
		st.decisions++
		if allowed {
			st.allowed++
		}
		st.hist.record(t1.Sub(t0))
	}
}

// runCell runs conc workers against tg for warmup+measure; each worker
// decides on uniformly random keys back to back. Calls that start during the
// warm-up are neither counted nor timed.
func runCell(ctx context.Context, tg *target, nkeys int, conc int, warmup, measure time.Duration, serverPID int) cellResult {
	start := time.Now()
	from := start.Add(warmup)
	until := from.Add(measure)
	cpuFrom := make(chan cpuSample, 1)
	go func() {
		time.Sleep(time.Until(from))
		cpuFrom <- sampleCPU(serverPID)
	}()
	stats := make([]*workerStats, conc)
	var wg sync.WaitGroup
	for w := range conc {
		st := &workerStats{}
		stats[w] = st
		decide := tg.newWorker()
		rng := rand.New(rand.NewPCG(uint64(w), uint64(nkeys)))
		wg.Go(func() { st.work(ctx, decide, rng, nkeys, from, until) })
	}
	wg.Wait()
	cpuTo, cpu0 := sampleCPU(serverPID), <-cpuFrom
	var total workerStats
	for _, st := range stats {
		total.hist.merge(&st.hist)
		total.decisions += st.decisions
		total.allowed += st.allowed
		total.calls += st.calls
		if total.errors == 0 && st.errors > 0 {
			total.firstErr = st.firstErr
		}
		total.errors += st.errors
		if st.lastDone.After(total.lastDone) {
			total.lastDone = st.lastDone
		}
	}
	r := cellResult{
		keys: nkeys, conc: conc,
		decisions: total.decisions, allowed: total.allowed, allowedKnown: tg.allowedKnown,
		errors: total.errors, firstErr: total.firstErr, calls: total.calls,
		p50: total.hist.quantile(0.50), p99: total.hist.quantile(0.99),
	}
	if cpu0.ok && cpuTo.ok {
		r.clientCPU, r.serverCPU, r.cpuOK = cpuTo.client-cpu0.client, cpuTo.server-cpu0.server, true
	}
	if !total.lastDone.IsZero() {
		r.elapsed = total.lastDone.Sub(from)
	}
	return r
}
