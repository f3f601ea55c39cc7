package faultload

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluice-gw/sluice/internal/redistest"
)

// This file holds the rows (docs/reliability.md) A6, C4 and C5.

// activeMetric is the gauge that is 1 while decisions are made without
// Redis: the breaker is open or half-open, or a request was decided without
// Redis within the last 10 s (the hold; docs/operations.md, "When the
// fallback counts as active"). Its rises are not breaker openings: an
// opening within 10 s of the last local decision raises nothing, and a
// local denial of a key owing fallback debt raises it with the breaker
// closed. Breaker openings are counted from the gateway's log (openings).
const activeMetric = "sluice_fallback_active"

// openedLog is the message the gateway logs, once, each time its breaker
// opens (closed → open; a failed half-open probe logs nothing).
const openedLog = `msg="redis store unavailable`

// openings returns how many times the breaker opened between the offsets
// from (exclusive) and to (inclusive) of a run that started at start: the
// gateway's openedLog lines whose time falls in that window (the log
// holds the gateway's last MiB; the runs' gateways log no access lines).
// The store reports every change of its breaker's state at least once, but
// two changes in quick succession may be reported as the last one only; an
// opening lasts at least the 500 ms open interval, which leaves the time to
// report it.
func openings(logs string, start time.Time, from, to time.Duration) int {
	n := 0
	for line := range strings.SplitSeq(logs, "\n") {
		if !strings.Contains(line, openedLog) {
			continue
		}
		m := logTime.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, m[1])
		if err != nil {
			continue
		}
		if at := t.Sub(start); at > from && at <= to {
			n++
		}
	}
	return n
}

// logTime reads the time of a line of the gateway's text log.
var logTime = regexp.MustCompile(`^time=(\S+)`)

// spurious is A6: Redis healthy, load at R0 for the whole fault phase
// (Steps × Options.Fault: 18 s short, 60 s long); every decision made
// without Redis and every breaker opening is spurious, from the machine's
// own scheduling delays.
func spurious(_ context.Context, e *Env) error {
	if _, err := standalone(e); err != nil {
		return err
	}
	e.Inject(e.Before, "measure (Redis healthy)", noop)
	e.Recover(e.Before+e.Fault, "measure ends", noop)
	e.Check(func(r *Report) { checkSpurious(r, e.gw.Logs()) })
	return nil
}

// checkSpurious examines A6's run: the gateway's log says when its breaker
// opened.
func checkSpurious(r *Report, logs string) {
	from, to := r.FaultStart, r.FaultEnd
	window := to - from
	opens := openings(logs, r.res.start, from, to)
	fb, share := r.bgShareBetween(from, to)
	all := r.delta("sluice_fallback_decisions_total", from, to)
	limited := r.delta("sluice_requests_total", from, to, `route="acct"`) + r.delta("sluice_requests_total", from, to, bgRoute)
	perMin := float64(opens) / window.Minutes()
	r.Note("A6 over %.0fs at %d req/s with Redis healthy: %.0f of %.0f background decisions without Redis (%.3f%%, want < 0.1%%); all limited routes %.0f of %.0f (%.3f%%; the accounting key stays local-first after an opening); breaker openings %d (%.1f per minute, want ≤ 1); store errors in the window: %.0f timeouts, %.0f connection, %.0f other",
		window.Seconds(), r.Rate, fb, r.delta("sluice_requests_total", from, to, bgRoute), 100*share,
		all, limited, 100*all/max(1, limited), opens, perMin,
		r.errorsBetween("timeout", from, to), r.errorsBetween("connection", from, to), r.errorsBetween("other", from, to))
	if r.Rate > 500 {
		r.Note("A6 above R0 = 500 req/s: figures reported, not asserted (docs/reliability.md, A6)")
		return
	}
	// The plan: at most one opening per minute of the window (at least
	// one allowed), and < 0.1% local decisions. Both are figures CPU
	// contention alone moves (misses). A relaxed run also fails on a
	// gross bound that still shows a breaker stuck open or every call
	// timing out: ≤ 5% and ≤ 2 openings.
	allowed, maxShare := max(1, int(math.Round(window.Minutes()))), 0.001
	if opens > allowed {
		r.Miss("breaker opened %d times in %.0fs with Redis healthy, want ≤ %d (one per minute)", opens, window.Seconds(), allowed)
	}
	if share >= maxShare {
		r.Miss("%.3f%% of background decisions made locally with Redis healthy, want < %g%%", 100*share, 100*maxShare)
	}
	if r.Relaxed {
		const grossOpens, grossShare = 2, 0.05
		r.Note("A6 relaxed (CI on a shared box): ≤ %d openings and < %g%% fail; the full bounds are reported as misses", grossOpens, 100*grossShare)
		if opens > grossOpens {
			r.Fail("breaker opened %d times in %.0fs with Redis healthy, want ≤ %d (relaxed gross bound)", opens, window.Seconds(), grossOpens)
		}
		if share >= grossShare {
			r.Fail("%.3f%% of background decisions made locally with Redis healthy, want < %g%% (relaxed gross bound)", 100*share, 100*grossShare)
		}
	}
}

// side is a second gateway started during a run, with a light load of its
// own: C4's "restart the gateway with the sentinels down". Times are from
// the start of the event that started it.
type side struct {
	gw       *Gateway
	listen   time.Duration // until the listening line
	firstOK  time.Duration // until the first 200 on a limited route; -1 none
	startErr error
	closeErr error

	mu    sync.Mutex
	recs  []record
	snaps []snapshot
	stop  chan struct{}
	wg    sync.WaitGroup
}

// sideRate is the side gateway's load, on its background route.
const sideRate = 50

// startSide starts a gateway with config in a directory of its own under
// dir and offers it sideRate requests per second until stopSide.
func startSide(binary, dir, config string) *side {
	sd := &side{firstOK: -1, stop: make(chan struct{})}
	t0 := time.Now()
	sub := filepath.Join(dir, "second")
	if err := os.MkdirAll(sub, 0o700); err != nil {
		sd.startErr = err
		return sd
	}
	gw, err := StartGateway(binary, sub, config)
	if err != nil {
		sd.startErr = err
		return sd
	}
	sd.gw, sd.listen = gw, time.Since(t0)
	c := newClient()
	ctx, cancel := context.WithCancel(context.Background())
	sd.wg.Go(func() {
		defer c.CloseIdleConnections()
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			if m, err := gw.Scrape(ctx, c); err == nil {
				sd.mu.Lock()
				sd.snaps = append(sd.snaps, snapshot{time.Since(t0), m})
				sd.mu.Unlock()
			}
			select {
			case <-tick.C:
			case <-sd.stop:
				if m, err := gw.Scrape(context.Background(), c); err == nil {
					sd.mu.Lock()
					sd.snaps = append(sd.snaps, snapshot{time.Since(t0), m})
					sd.mu.Unlock()
				}
				return
			}
		}
	})
	sd.wg.Go(func() {
		defer cancel()
		var reqs sync.WaitGroup
		defer reqs.Wait()
		for i := 0; ; i++ {
			select {
			case <-sd.stop:
				return
			case <-time.After(time.Until(t0.Add(sd.listen + time.Duration(i)*time.Second/sideRate))):
			}
			reqs.Go(func() {
				at := time.Since(t0)
				code, _, err := send(ctx, c, gw.Base+"/bg", fmt.Sprintf("side-%d", i%200))
				if err != nil {
					code = 0
				}
				done := time.Since(t0)
				sd.mu.Lock()
				sd.recs = append(sd.recs, record{at: at, lat: done - at, code: code, route: routeBg})
				if code == 200 && (sd.firstOK < 0 || done < sd.firstOK) {
					sd.firstOK = done
				}
				sd.mu.Unlock()
			})
		}
	})
	return sd
}

// stopSide ends the side load and stops the gateway (SIGTERM).
func (sd *side) stopSide() {
	if sd.gw == nil {
		return
	}
	select {
	case <-sd.stop:
		return
	default:
	}
	close(sd.stop)
	sd.wg.Wait()
	sd.closeErr = sd.gw.Close()
}

// fallbackLog matches a log line that says the gateway decides without
// Redis: what an operator greps for.
var fallbackLog = regexp.MustCompile(`(?i)(fallback|unavailable|sentinel)`)

// sentinelsDown is C4: with 3 sentinels watching a healthy master, kill
// them all. The running gateway must keep deciding on Redis through the
// connections it has: no connection error (a failure), and ≥ 99% of the
// background decisions on Redis (a miss: spurious timeouts of a loaded box
// alone cost more than 1%; a relaxed run fails below 50%, Redis taken
// away). A second gateway
// started meanwhile (the row's fresh start with the sentinels still down;
// a separate process, so that the first one's figures run on) must start,
// serve without a 5xx on the fallback and say so: a log line,
// sluice_fallback_active 1 and store errors of kind connection. The
// sentinels are restarted at the fault's end, and the second gateway must
// then find the master: back on Redis ≤ 2 s after the sentinels answer.
func sentinelsDown(_ context.Context, e *Env) error {
	sn, err := redistest.StartSentinel(redistest.SentinelOptions{Sentinels: 3, Timeout: 30 * time.Second})
	if err != nil {
		return err
	}
	e.Cleanup(func() { sn.Close() })
	e.Redis(fmt.Sprintf("{mode: sentinel, master_name: %s, addrs: [%s]}", sn.MasterName(), quoted(sn.SentinelAddrs())))
	var sd *side
	e.Cleanup(func() {
		if sd != nil {
			sd.stopSide()
		}
	})
	down := e.Inject(e.Before, "kill -9 all 3 sentinels", func(context.Context) error {
		for _, s := range sn.Sentinels {
			if err := s.Kill(); err != nil {
				return err
			}
		}
		return nil
	})
	second := e.Event(e.Before+e.Fault/3, "start a second gateway", func(context.Context) error {
		sd = startSide(e.Binary, e.Dir(), e.config)
		if sd.startErr != nil {
			return fmt.Errorf("second gateway with the sentinels down: %w", sd.startErr)
		}
		return nil
	})
	up := e.Recover(e.Before+e.Fault, "restart the sentinels", func(ctx context.Context) error {
		for _, s := range sn.Sentinels {
			if err := s.Restart(); err != nil {
				return err
			}
		}
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		for ctx.Err() == nil {
			if addr, err := sn.MasterAddr(ctx); err == nil && addr == sn.Master.Addr() {
				return nil
			}
			time.Sleep(50 * time.Millisecond) // polling the sentinels, bounded
		}
		return errors.New("the restarted sentinels did not name the master within 10s")
	})
	e.Event(e.Before+e.Fault+e.After-500*time.Millisecond, "stop the second gateway", func(context.Context) error {
		if sd != nil {
			sd.stopSide()
		}
		return nil
	})
	e.Check(func(r *Report) {
		fb, share := r.bgShareBetween(down.End, up.Start)
		conn, other := r.errorsBetween("connection", down.End, up.Start), r.errorsBetween("other", down.End, up.Start)
		r.Note("running gateway, sentinels down %.2fs..%.2fs: %.0f background decisions without Redis (%.2f%%, want ≤ 1%%), store errors meanwhile: %.0f connection, %.0f timeouts, %.0f other",
			down.End.Seconds(), up.Start.Seconds(), fb, 100*share, conn, r.errorsBetween("timeout", down.End, up.Start), other)
		// Losing the master would show as connection (or other) errors;
		// timeouts are the machine's (A6).
		if conn+other > 0 {
			r.Fail("running gateway: %.0f connection/other store errors while only the sentinels were down, want 0 (it keeps its connection to the master)", conn+other)
		}
		// The target of ≥ 99% on Redis, a figure spurious timeouts alone move
		// (a miss); a relaxed run still fails when Redis was taken away:
		// more than half of the decisions off Redis.
		if share > 0.01 {
			r.Miss("running gateway: %.2f%% of background decisions without Redis while only the sentinels were down, want ≤ 1%%", 100*share)
		}
		if r.Relaxed && share > 0.5 {
			r.Fail("running gateway: %.2f%% of background decisions without Redis while only the sentinels were down, want ≤ 50%% (relaxed gross bound)", 100*share)
		}
		if sd == nil || sd.gw == nil {
			return // the event failed, and the report says so
		}
		checkSide(r, sd, second.Start, up)
	})
	return nil
}

// checkSide examines the second gateway of C4: sentinels down from its
// start (at offset start of the run) until the recover event up.
func checkSide(r *Report, sd *side, start time.Duration, up *Event) {
	sd.mu.Lock()
	defer sd.mu.Unlock()
	upStart, upEnd := up.Start-start, up.End-start // in the side's time
	codes := map[int]int{}
	bad, downN := 0, 0
	for _, rec := range sd.recs {
		codes[rec.code]++
		if rec.code >= 500 || rec.code == 0 {
			bad++
		}
		if rec.at < upStart {
			downN++
		}
	}
	var fbDown, connDown, active float64
	if len(sd.snaps) > 0 {
		first := sd.snaps[0].m
		var last Metrics
		for _, s := range sd.snaps {
			if s.at <= upStart {
				last = s.m
				active = max(active, s.m.Sum(activeMetric))
			}
		}
		if last != nil {
			fbDown = last.Sum("sluice_fallback_decisions_total", bgRoute) - first.Sum("sluice_fallback_decisions_total", bgRoute)
			connDown = last.Sum("sluice_store_errors_total", `kind="connection"`)
		}
	}
	logs := sd.gw.Logs()
	var lines []string
	for l := range strings.SplitSeq(logs, "\n") {
		if fallbackLog.MatchString(l) {
			lines = append(lines, l)
		}
	}
	back := backOnRedis(sd.snaps, upEnd)
	backS := "never"
	if back >= 0 {
		backS = fmt.Sprintf("%.2fs", back.Seconds())
	}
	firstOK := "never"
	if sd.firstOK >= 0 {
		firstOK = fmt.Sprintf("%.2fs", sd.firstOK.Seconds())
	}
	r.Note("second gateway started %.2fs into the outage: listening after %.2fs, first 200 after %s; %d requests while the sentinels were down, codes %v overall; fallback decisions %.0f, %s %.0f, store errors of kind connection %.0f; back on Redis %s after the sentinels answered again; exit: %v",
		(start - r.FaultStart).Seconds(), sd.listen.Seconds(), firstOK, downN, codes, fbDown, activeMetric, active, connDown, backS, sd.closeErr)
	if len(lines) > 0 {
		r.Note("second gateway's log lines about the outage (%d), first: %.400s", len(lines), lines[0])
	} else {
		r.Note("second gateway's log (last 600 bytes): %s", tail(logs, 600))
	}
	if bad > 0 {
		r.Fail("second gateway: %d 5xx or transport errors (codes %v)", bad, codes)
	}
	if sd.firstOK < 0 {
		r.Fail("second gateway: fallback not reported: no request answered 200")
	}
	if fbDown == 0 || active != 1 || connDown == 0 {
		r.Fail("second gateway: fallback not reported: fallback decisions %.0f, %s %.0f, connection errors %.0f while the sentinels were down; want all > 0",
			fbDown, activeMetric, active, connDown)
	}
	if len(lines) == 0 {
		r.Fail("second gateway: fallback not reported: no log line matching %s", fallbackLog)
	}
	if sd.closeErr != nil {
		r.Fail("second gateway: crash or unclean exit: %v", sd.closeErr)
	}
	switch {
	case back < 0:
		r.Fail("second gateway never back on Redis after the sentinels returned")
	case back > 2*time.Second:
		r.Miss("second gateway back on Redis %.2fs after the sentinels returned, want ≤ 2s", back.Seconds())
	}
}

// tail returns the last n bytes of s.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

// errorStat returns the count of error replies with code from INFO
// errorstats ("errorstat_NOREPLICAS:count=3").
func errorStat(s *redistest.Server, code string) (int64, error) {
	info, err := s.Info("errorstats")
	if err != nil {
		return 0, err
	}
	v, _ := strings.CutPrefix(info["errorstat_"+code], "count=")
	n, _ := strconv.ParseInt(v, 10, 64)
	return n, nil
}

// replicaLag is C5's min-replicas-max-lag.
const replicaLag = 1

// noReplicas is C5, the opt-in durability of docs/reliability.md: the master has a
// replica and min-replicas-to-write 1, min-replicas-max-lag 1 s; the
// replica is stopped (SIGSTOP) for the fault. Once its last ack is older
// than the lag (Redis refreshes the count of good replicas once a second:
// 2-3 s after the stop), every write, and so every limiter script, fails
// with NOREPLICAS, which must count as a store error of kind other
// (store/redis ErrUnavailable) and open the breaker: decisions go to the
// fallback, no 5xx, and back on Redis ≤ 2 s after SIGCONT.
func noReplicas(_ context.Context, e *Env) error {
	m, err := standalone(e)
	if err != nil {
		return err
	}
	rep, err := redistest.StartReplica(m, redistest.ServerOptions{})
	if err != nil {
		return err
	}
	e.Cleanup(func() { rep.Close() })
	if _, err := m.Do("CONFIG", "SET", "min-replicas-max-lag", replicaLag, "min-replicas-to-write", 1); err != nil {
		return err
	}
	// The master counts its good replicas once a second: writes fail with
	// NOREPLICAS until it has.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		_, err := m.DoContext(ctx, "SET", "faultload:c5", 1)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return fmt.Errorf("writes still failing 10s after min-replicas-to-write 1: %w", err)
		}
		time.Sleep(50 * time.Millisecond) // polling the server, bounded
	}
	n0, err := errorStat(m, "NOREPLICAS")
	if err != nil {
		return err
	}
	var nFault int64
	e.Inject(e.Before, "SIGSTOP the replica", func(context.Context) error { return rep.Stop() })
	e.Recover(e.Before+e.Fault, "SIGCONT the replica", func(context.Context) error {
		if err := rep.Cont(); err != nil {
			return err
		}
		n, err := errorStat(m, "NOREPLICAS")
		nFault = n - n0
		return err
	})
	// How long after SIGCONT Redis accepts writes again: the replica's next
	// ack, then the master's once-a-second count of good replicas. (Runs
	// after the recover event, which ends the fault phase.)
	writable := time.Duration(-1)
	e.Event(e.Before+e.Fault, "poll writes on the master", func(ctx context.Context) error {
		t0 := time.Now()
		for time.Since(t0) < 5*time.Second {
			if _, err := m.DoContext(ctx, "SET", "faultload:c5", 1); err == nil {
				writable = time.Since(t0)
				return nil
			}
			time.Sleep(20 * time.Millisecond) // polling the server, bounded
		}
		return nil
	})
	e.Check(func(r *Report) {
		n1, err := errorStat(m, "NOREPLICAS")
		if err != nil {
			r.Fail("INFO errorstats: %v", err)
			return
		}
		from, to := r.FaultStart, r.FaultEnd+time.Second
		other := r.errorsBetween("other", from, to)
		script := r.errorsBetween("script", from, to)
		fb, share := r.bgShareBetween(from, r.FaultEnd)
		// Onset: the first scrape after the stop whose errors of kind
		// other grew.
		onset := time.Duration(-1)
		for _, s := range r.res.snaps {
			if s.at > from && r.delta("sluice_store_errors_total", from, s.at, `kind="other"`) > 0 {
				onset = s.at
				break
			}
		}
		opens := openings(e.gw.Logs(), r.res.start, from, to)
		var lats []time.Duration
		for _, rec := range r.res.recs {
			if onset >= 0 && rec.at >= onset && rec.at < r.FaultEnd {
				lats = append(lats, rec.lat)
			}
		}
		p := phase("NOREPLICAS", lats)
		onsetS := "never"
		if onset >= 0 {
			onsetS = fmt.Sprintf("%.2fs", (onset - from).Seconds())
		}
		r.Note("min-replicas-to-write 1, min-replicas-max-lag %ds: NOREPLICAS from %s after the stop; Redis answered NOREPLICAS %d times during the stop (%d over the run, with the harness's own polling writes after SIGCONT), the gateway counted %.0f store errors of kind other and %.0f of kind script; breaker openings %d; background decisions without Redis during the stop %.0f (%.1f%%)",
			replicaLag, onsetS, nFault, n1-n0, other, script, opens, fb, 100*share)
		r.Note("Redis accepted writes again %.2fs after SIGCONT, the gateway was back on Redis %.2fs after SIGCONT (its breaker probes every 0.5s)",
			writable.Seconds(), r.Back.Seconds())
		r.Note("p99 while writes failed (NOREPLICAS → fallback): %.1fms over %d requests (max %.1fms); before the stop, with the replica acking: %.1fms",
			float64(p.P99)/1e6, p.Requests, float64(p.Max)/1e6, float64(r.Phases[0].P99)/1e6)
		if nFault == 0 {
			r.Fail("NOREPLICAS never answered by Redis during the stop (min-replicas-to-write not in effect)")
			return
		}
		// A misclassification is a failure; what a stalled box can cause
		// (replies read only after the call timed out) is a miss.
		timeouts := r.errorsBetween("timeout", from, to)
		if script > 0 {
			r.Fail("NOREPLICAS misclassified: %.0f store errors of kind script during the stop, want kind other (unavailable)", script)
		}
		switch {
		case other == 0 && timeouts == 0:
			r.Fail("NOREPLICAS misclassified: Redis answered it %d times, the gateway counted no store error of kind other (and no timeout)", nFault)
		case other == 0:
			r.Miss("no store error of kind other during the stop, only %.0f timeouts (replies read too late on a loaded box?)", timeouts)
		}
		if fb == 0 {
			r.Fail("the fallback never engaged during the stop: 0 background fallback decisions")
		}
		if opens == 0 {
			r.Fail("the breaker never opened during the stop: no %q line in the gateway's log", openedLog)
		}
	})
	return nil
}

// oneNodeKeys is D1's number of background keys, 10^4 (docs/reliability.md,
// row D1): spread over every slot, so that the first requests meet every
// master.
const oneNodeKeys = 10_000

// oneNode is D1: a 3-master cluster of which the gateway is told one node
// only. It must learn the slot map from that node, follow MOVED to the
// other masters from the first requests on, and never send a script whose
// keys span slots. There is no fault: the "fault" phase is where the run
// is measured; errors are counted from one second into the run.
func oneNode(_ context.Context, e *Env) error {
	cl, err := redistest.StartCluster(redistest.ClusterOptions{Masters: 3, Timeout: time.Minute})
	if err != nil {
		return err
	}
	e.Cleanup(func() { cl.Close() })
	e.Redis(fmt.Sprintf("{mode: cluster, addrs: [%q]}", cl.Masters[0].Addr()))
	e.Inject(e.Before, "measure (one node given, cluster healthy)", noop)
	e.Recover(e.Before+e.Fault, "measure ends", noop)
	e.Check(func(r *Report) {
		from, to := time.Second, r.FaultEnd
		fb, share := r.bgShareBetween(from, to)
		other, conn, script := r.errorsBetween("other", from, to), r.errorsBetween("connection", from, to), r.errorsBetween("script", from, to)
		// Script calls per master (INFO commandstats): a store stuck on the
		// one node it was given would leave the other masters without any.
		// (Key counts say little here: most background keys expire within
		// milliseconds.)
		var crossslot int64
		perMaster := make([]int64, len(cl.Masters))
		for i, m := range cl.Masters {
			n, err := errorStat(m, "CROSSSLOT")
			if err != nil {
				r.Fail("INFO errorstats: %v", err)
				return
			}
			crossslot += n
			c, err := commandStats(m, "evalsha")
			if err != nil {
				r.Fail("INFO commandstats: %v", err)
				return
			}
			perMaster[i] = c[0]
		}
		r.Note("D1 given %s only, %d background keys: from t=%.1fs, %.0f background decisions without Redis (%.2f%%), store errors other %.0f, connection %.0f, script %.0f, timeouts %.0f; CROSSSLOT replies %d; script calls per master %v",
			cl.Masters[0].Addr(), oneNodeKeys, from.Seconds(), fb, 100*share, other, conn, script, r.errorsBetween("timeout", from, to), crossslot, perMaster)
		if other+conn+script > 0 {
			r.Fail("%.0f store errors (other %.0f, connection %.0f, script %.0f) after the first second with one node given, want 0", other+conn+script, other, conn, script)
		}
		if crossslot > 0 {
			r.Fail("%d CROSSSLOT replies, want 0", crossslot)
		}
		for i, n := range perMaster {
			if n == 0 {
				r.Fail("master %d ran no script: the gateway did not route beyond the node it was given", i)
			}
		}
	})
	return nil
}
