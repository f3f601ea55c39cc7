package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	commonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/sluice-gw/sluice/bench/internal/benchproc"
	"github.com/sluice-gw/sluice/internal/redistest"
)

// request returns a ShouldRateLimit request of one descriptor with one
// entry, key=value, under dom.
func request(dom, key, value string) *rlsv3.RateLimitRequest {
	return &rlsv3.RateLimitRequest{Domain: dom, Descriptors: []*commonv3.RateLimitDescriptor{{
		Entries: []*commonv3.RateLimitDescriptor_Entry{{Key: key, Value: value}},
	}}}
}

// checkResult is the outcome of the correctness check on one server.
type checkResult struct {
	server                  string
	limit, calls            int
	admitted, denied, errs  int
	firstDenied             int // 1-based call number of the first OVER_LIMIT, 0 if none
	waitedForWindowBoundary time.Duration
}

// ok reports whether the server admitted exactly the first limit calls.
func (c checkResult) ok() bool {
	return c.errs == 0 && c.admitted == c.limit && c.denied == c.calls-c.limit && c.firstDenied == c.limit+1
}

// windowMargin is how close to the end of a minute the check does not
// start: the limit is a fixed window of one minute, aligned to the minute
// by both servers, and calls that straddle two windows would be admitted
// by both.
const windowMargin = 5 * time.Second

// check sends limit+over sequential calls on a fresh value of the check
// key and counts the answers. It first waits out the end of the current
// minute if fewer than windowMargin is left of it.
func check(ctx context.Context, t *target, limit, over int) checkResult {
	r := checkResult{server: t.name, limit: limit, calls: limit + over}
	now := time.Now()
	if left := now.Truncate(time.Minute).Add(time.Minute).Sub(now); left < windowMargin {
		r.waitedForWindowBoundary = left + 100*time.Millisecond
		select {
		case <-ctx.Done():
		case <-time.After(r.waitedForWindowBoundary):
		}
	}
	value := "check-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	req := request(domain, checkKey, value)
	for i := 1; i <= r.calls; i++ {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		resp, err := t.client.ShouldRateLimit(cctx, req)
		cancel()
		switch {
		case err != nil:
			r.errs++
		case resp.GetOverallCode() == rlsv3.RateLimitResponse_OK:
			r.admitted++
		case resp.GetOverallCode() == rlsv3.RateLimitResponse_OVER_LIMIT:
			r.denied++
			if r.firstDenied == 0 {
				r.firstDenied = i
			}
		default:
			r.errs++
		}
	}
	return r
}

// cellResult is one measured run of one server at one concurrency.
type cellResult struct {
	server      string
	conc, round int
	decisions   int64
	elapsed     time.Duration
	errs, over  int64
	p50, p99    time.Duration
	serverCPU   time.Duration // of the server process during the measured time
	redisCPU    time.Duration
	harnessCPU  time.Duration // of this process: the clients
	cpuKnown    bool
	trouble     float64 // sluice's store errors and fallbacks during the cell
	firstErr    string
	redisCalls  map[string]int64 // Redis commands run in the measured time, by name
	redisUsec   map[string]int64 // microseconds Redis spent inside them, by name
	redisErr    string
}

// rate returns decisions per second.
func (c cellResult) rate() float64 {
	if c.elapsed <= 0 {
		return 0
	}
	return float64(c.decisions) / c.elapsed.Seconds()
}

// perDecision returns d divided by the decisions.
func (c cellResult) perDecision(d time.Duration) time.Duration {
	if c.decisions == 0 {
		return 0
	}
	return d / time.Duration(c.decisions)
}

// requests are the load's requests, one per user value, built once and
// only read by the workers.
func requests(keys int) []*rlsv3.RateLimitRequest {
	reqs := make([]*rlsv3.RateLimitRequest, keys)
	for i := range reqs {
		reqs[i] = request(domain, userKey, "u"+strconv.Itoa(i))
	}
	return reqs
}

// cell runs conc workers that call ShouldRateLimit back to back with
// uniformly random user values for warmup, then measures for duration:
// calls started in the measured time are counted, and the CPU time of the
// server, of Redis (redisPID) and of this process is read at its start and
// end, and Redis's command statistics are reset at its start and read at
// its end.
func cell(ctx context.Context, t *target, rs *redistest.Server, reqs []*rlsv3.RateLimitRequest, conc int, warmup, duration time.Duration) cellResult {
	res := cellResult{server: t.name, conc: conc}
	var measuring, stop atomic.Bool
	var firstErr sync.Once
	type workerStats struct {
		lat        []time.Duration
		errs, over int64
	}
	stats := make([]workerStats, conc)
	var wg sync.WaitGroup
	for w := range conc {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), uint64(conc)))
			st := &stats[w]
			for !stop.Load() && ctx.Err() == nil {
				req := reqs[rng.IntN(len(reqs))]
				counted := measuring.Load()
				cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				start := time.Now()
				resp, err := t.client.ShouldRateLimit(cctx, req)
				lat := time.Since(start)
				cancel()
				if !counted {
					continue
				}
				switch {
				case err != nil:
					st.errs++
					firstErr.Do(func() { res.firstErr = err.Error() })
				case resp.GetOverallCode() != rlsv3.RateLimitResponse_OK:
					st.over++
					st.lat = append(st.lat, lat)
				default:
					st.lat = append(st.lat, lat)
				}
			}
		})
	}
	sleep(ctx, warmup)
	trouble0, _ := t.storeTrouble()
	s0, ok1 := benchproc.ProcessCPU(t.pid())
	if _, err := rs.DoContext(ctx, "CONFIG", "RESETSTAT"); err != nil {
		res.redisErr = err.Error()
	}
	r0, ok2 := benchproc.ProcessCPU(rs.PID())
	h0, ok3 := benchproc.ProcessCPU(os.Getpid())
	start := time.Now()
	measuring.Store(true)
	sleep(ctx, duration)
	measuring.Store(false)
	res.elapsed = time.Since(start)
	s1, ok4 := benchproc.ProcessCPU(t.pid())
	r1, ok5 := benchproc.ProcessCPU(rs.PID())
	h1, ok6 := benchproc.ProcessCPU(os.Getpid())
	if info, err := rs.Info("commandstats"); err != nil {
		res.redisErr = err.Error()
	} else {
		res.redisCalls, res.redisUsec = commandStats(info)
	}
	stop.Store(true)
	wg.Wait()
	trouble1, err := t.storeTrouble()
	if err != nil {
		res.trouble = -1
	} else {
		res.trouble = trouble1 - trouble0
	}
	res.cpuKnown = ok1 && ok2 && ok3 && ok4 && ok5 && ok6
	res.serverCPU, res.redisCPU, res.harnessCPU = s1-s0, r1-r0, h1-h0
	var lat []time.Duration
	for _, st := range stats {
		lat = append(lat, st.lat...)
		res.errs += st.errs
		res.over += st.over
	}
	res.decisions = int64(len(lat))
	slices.Sort(lat)
	res.p50, res.p99 = quantile(lat, 0.50), quantile(lat, 0.99)
	return res
}

// commandStats reads INFO commandstats (cmdstat_NAME:calls=N,usec=U,...)
// into calls and microseconds by command, leaving out the harness's own
// INFO and CONFIG.
func commandStats(info map[string]string) (calls, usec map[string]int64) {
	calls, usec = map[string]int64{}, map[string]int64{}
	for k, v := range info {
		name, ok := strings.CutPrefix(k, "cmdstat_")
		if !ok || name == "info" || name == "config" {
			continue
		}
		for f := range strings.SplitSeq(v, ",") {
			key, val, _ := strings.Cut(f, "=")
			n, err := strconv.ParseInt(val, 10, 64)
			if err != nil {
				continue
			}
			switch key {
			case "calls":
				calls[name] += n
			case "usec":
				usec[name] += n
			}
		}
	}
	return calls, usec
}

// quantile returns the q-quantile (nearest rank) of sorted, or 0 when it is
// empty.
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// sleep waits for d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// String describes the cell for the progress log.
func (c cellResult) String() string {
	return fmt.Sprintf("round %d %s conc %d: %.0f decisions/s, p50 %v, p99 %v, server %v, redis %v CPU/decision, %d errors, %d over limit",
		c.round, c.server, c.conc, c.rate(), c.p50, c.p99, c.perDecision(c.serverCPU), c.perDecision(c.redisCPU), c.errs, c.over)
}
