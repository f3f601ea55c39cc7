package faultload

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluice-gw/sluice/internal/redistest"
)

// This file holds the rows (docs/reliability.md) B4, B5, B6, B10, C2, D4 and D5.

// proxied starts a redis-server and a fault proxy in front of it, and points
// the gateway at the proxy.
func proxied(e *Env) (*redistest.Server, *Proxy, error) {
	s, err := redistest.StartServer(redistest.ServerOptions{})
	if err != nil {
		return nil, nil, err
	}
	e.Cleanup(func() { s.Close() })
	p, err := NewProxy(s.Addr())
	if err != nil {
		return nil, nil, err
	}
	e.Cleanup(func() { p.Close() })
	e.Redis(fmt.Sprintf("{addrs: [%q]}", p.Addr()))
	return s, p, nil
}

// latency is B4: the proxy adds latency to every reply in three steps of
// one Options.Fault each: T/4, 3T/4, then 3T/2 ± T/2 for a store.timeout T.
// At faultbench's T = 20 ms that is its +5 ms, +15 ms, then +30 ms ± 10 ms;
// the short CI version (T = 50 ms) keeps the proportions (+12.5 ms,
// +37.5 ms, +75 ms ± 25 ms), which a loaded CI box can tell apart from its
// own scheduling delays. The first two steps stay below the timeout, the
// last is above it.
func latency(_ context.Context, e *Env) error {
	_, p, err := proxied(e)
	if err != nil {
		return err
	}
	step := e.Fault / 3
	t := e.Timeout
	delay := func(d, j time.Duration) func(context.Context) error {
		return func(context.Context) error {
			p.SetReplyDelay(d)
			p.SetReplyJitter(j)
			return nil
		}
	}
	ms := func(d time.Duration) string { return strconv.FormatFloat(float64(d)/1e6, 'f', -1, 64) + "ms" }
	ev5 := e.Inject(e.Before, "+"+ms(t/4), delay(t/4, 0))
	ev15 := e.Event(e.Before+step, "+"+ms(3*t/4), delay(3*t/4, 0))
	ev30 := e.Event(e.Before+2*step, "+"+ms(3*t/2)+" ±"+ms(t/2), delay(3*t/2, t/2))
	end := e.Recover(e.Before+e.Fault, "no delay", delay(0, 0))
	e.Check(func(r *Report) {
		fb5, s5 := r.bgShareBetween(ev5.End, ev15.Start)
		fb15, s15 := r.bgShareBetween(ev15.End, ev30.Start)
		fb30, s30 := r.bgShareBetween(ev30.End, end.Start)
		engaged := "never"
		for _, s := range r.res.snaps {
			if s.at > ev30.End && r.delta("sluice_fallback_decisions_total", ev30.End, s.at, bgRoute) > 0 {
				engaged = fmt.Sprintf("%.2fs", (s.at - ev30.End).Seconds())
				break
			}
		}
		r.Note("background decisions without Redis: %s %.0f (%.2f%%, want ≤ 1%%; plan ≤ 0.1%%), %s %.0f (%.2f%%, plan ≤ 1%%, reported), %s %.0f (%.1f%%), fallback engaged %s into the last step (plan ≤ 1s)",
			ev5.Name, fb5, 100*s5, ev15.Name, fb15, 100*s15, ev30.Name, fb30, 100*s30, engaged)
		if s5 > 0.01 {
			r.Miss("%s: %.2f%% of background decisions without Redis, want ≤ 1%%", ev5.Name, 100*s5)
		}
		if fb30 == 0 {
			r.Fail("%s (above the %v timeout): the fallback never engaged", ev30.Name, r.Timeout)
		}
	})
	return nil
}

// resets is B5: the proxy resets every connection every second for one
// Options.Fault, then blackholes all traffic for another. The gateway's
// descriptors are counted at the fault's start and at the run's end.
func resets(_ context.Context, e *Env) error {
	_, p, err := proxied(e)
	if err != nil {
		return err
	}
	port := p.ln.Addr().(*net.TCPAddr).Port
	step := e.Fault / 2
	// HTTP connections, the clients' to the gateway and the gateway's to the
	// upstream, come and go with the load's concurrency (the harness and the
	// gateway's pool keep them alive; a stall during the fault raises it):
	// the leak check counts the descriptors other than those.
	var fd0, fdMax, fd1, redis0, redisMax, redis1, http0, http1 int
	var fdErr error
	count := func(total, redis, http *int) {
		t, n, h, err := fdCount(e.GatewayPID(), port, append(e.gw.Ports(), e.upstreamPort)...)
		if err != nil {
			fdErr = err
		}
		*total, *redis, *http = t-h, n, h
		fdMax, redisMax = max(fdMax, t-h), max(redisMax, n)
	}
	n := 0 // resets done
	e.Inject(e.Before, "reset_peer every 1s", func(ctx context.Context) error {
		count(&fd0, &redis0, &http0)
		return every(step, time.Second, func() error {
			n++
			p.ResetAll()
			return nil
		})(ctx)
	})
	e.Event(e.Before+step, "blackhole", func(context.Context) error {
		p.SetBlackhole(true)
		return nil
	})
	e.Event(e.Before+step+step/2, "count fds", func(context.Context) error {
		var t, n, h int
		count(&t, &n, &h)
		return nil
	})
	e.Recover(e.Before+e.Fault, "traffic flows", func(context.Context) error {
		p.SetBlackhole(false)
		return nil
	})
	e.Event(e.Before+e.Fault+e.After-300*time.Millisecond, "count fds again", func(context.Context) error {
		count(&fd1, &redis1, &http1)
		return nil
	})
	e.Check(func(r *Report) {
		rf, rs := r.bgShareBetween(r.FaultStart, r.FaultStart+step)
		r.Note("%d resets: background decisions without Redis %.0f (%.1f%%, %.0f per reset); blackhole timeouts %.0f",
			n, rf, 100*rs, rf/float64(max(1, n)), r.errorsBetween("timeout", r.FaultStart+step, r.FaultEnd))
		r.Note("gateway fds besides HTTP connections: %d at the fault's start, max %d, %d at the end (sockets to Redis: %d, max %d, %d; HTTP connections %d, then %d)",
			fd0, fdMax, fd1, redis0, redisMax, redis1, http0, http1)
		if fdErr != nil {
			r.Fail("counting the gateway's fds: %v", fdErr)
			return
		}
		if fd1 > fd0+10 {
			r.Fail("gateway fds %d at the end, want ≤ %d + 10 (leak)", fd1, fd0)
		}
		if perReset, limit := rf/float64(max(1, n)), float64(r.Rate)/2; perReset > limit {
			r.Miss("%.0f fallback decisions per reset, want ≤ %.0f (one breaker opening)", perReset, limit)
		}
	})
	return nil
}

// busy is B6: busy-reply-threshold 200 ms; a side client runs a script that
// spins (without writing) past the fault's end, and SCRIPT KILL ends it.
func busy(_ context.Context, e *Env) error {
	s, err := standalone(e, "--busy-reply-threshold", "200")
	if err != nil {
		return err
	}
	spin := e.Fault + 2*time.Second
	script := fmt.Sprintf("local t=redis.call('TIME') while true do local n=redis.call('TIME') if (n[1]-t[1])*1e6+(n[2]-t[2]) > %d then break end end return 1", spin.Microseconds())
	var wg sync.WaitGroup
	var spinErr error
	e.Cleanup(wg.Wait)
	e.Inject(e.Before, fmt.Sprintf("side client: %v spin script", spin), func(ctx context.Context) error {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(ctx, spin+10*time.Second)
			defer cancel()
			_, spinErr = s.DoContext(ctx, "EVAL", script, 0)
		})
		return nil
	})
	e.Recover(e.Before+e.Fault, "SCRIPT KILL", func(context.Context) error {
		_, err := s.Do("SCRIPT", "KILL")
		wg.Wait()
		return err
	})
	e.Check(func(r *Report) {
		wg.Wait()
		other := r.errorsBetween("other", r.FaultStart, r.FaultEnd)
		fb, share := r.bgShareBetween(r.FaultStart, r.FaultEnd)
		r.Note("during the script: %.0f errors of kind other (BUSY), %.0f timeouts; background decisions without Redis %.0f (%.1f%%); the script ended with %v",
			other, r.errorsBetween("timeout", r.FaultStart, r.FaultEnd), fb, 100*share, spinErr)
		if other == 0 {
			r.Fail("no BUSY (kind other) store error during the busy script")
		}
		if fb == 0 {
			r.Fail("no fallback decision during the busy script")
		}
		var re *redistest.ReplyError
		if !errors.As(spinErr, &re) || !strings.Contains(re.Msg, "killed") {
			r.Fail("the spin script ended with %v, want killed by SCRIPT KILL", spinErr)
		}
	})
	return nil
}

// maxClients is B10: the harness fills maxclients 4 with connections of its
// own, then kills the gateway's; every reconnect is over the cap.
func maxClients(_ context.Context, e *Env) error {
	s, err := standalone(e)
	if err != nil {
		return err
	}
	var held []*redistest.Conn
	closeHeld := func() {
		for _, c := range held {
			c.Close()
		}
		held = nil
	}
	e.Cleanup(closeHeld)
	killed := 0
	e.Inject(e.Before, "maxclients 4, kill the gateway's connections", func(context.Context) error {
		for range 4 {
			c, err := s.Dial()
			if err != nil {
				return err
			}
			held = append(held, c)
		}
		ctl := held[0]
		if _, err := ctl.Do("CONFIG", "SET", "maxclients", "4"); err != nil {
			return err
		}
		v, err := ctl.Do("CLIENT", "LIST", "TYPE", "normal")
		if err != nil {
			return err
		}
		list, _ := v.(string)
		for line := range strings.SplitSeq(list, "\n") {
			f := map[string]string{}
			for kv := range strings.FieldsSeq(line) {
				k, v, _ := strings.Cut(kv, "=")
				f[k] = v
			}
			if f["name"] != "sluice" {
				continue
			}
			if _, err := ctl.Do("CLIENT", "KILL", "ID", f["id"]); err != nil {
				return err
			}
			killed++
		}
		if killed == 0 {
			return errors.New("no connection named sluice in CLIENT LIST")
		}
		return nil
	})
	var rejected string
	e.Event(e.Before+e.Fault/2, "check the cap", func(context.Context) error {
		c, err := s.Dial()
		if err != nil {
			rejected = err.Error()
		} else {
			c.Close()
		}
		return nil
	})
	e.Recover(e.Before+e.Fault, "maxclients 10000", func(context.Context) error {
		_, err := held[0].Do("CONFIG", "SET", "maxclients", "10000")
		closeHeld()
		return err
	})
	e.Check(func(r *Report) {
		// The counters are read from scrapes, which a loaded box may take
		// late: the window for the fault's errors runs to the end of the
		// load (nothing else fails after the cap is lifted).
		end := r.FaultEnd + r.After
		fb, share := r.bgShareBetween(r.FaultStart, r.FaultEnd)
		errs := r.errorsBetween("connection", r.FaultStart, end) + r.errorsBetween("other", r.FaultStart, end)
		over := r.count(r.res, r.FaultStart, r.FaultEnd, -1, func(rec record) bool { return rec.lat > r.Timeout })
		r.Note("killed %d gateway connections; a new connection during the cap got %q; %.0f connection/other store errors, background decisions without Redis %.0f (%.1f%%); %d requests during the cap took longer than the %v timeout (max %.1fms; reported)",
			killed, rejected, errs, fb, 100*share, over, r.Timeout, float64(r.Phases[1].Max)/1e6)
		if !strings.Contains(rejected, "max") {
			r.Fail("a connection during the cap was not refused (got %q)", rejected)
		}
		// The refusal shows as a connection or other error when the gateway
		// reads it within store.timeout; on a loaded box the dial can take
		// longer, and the same refusal is counted as a timeout. Either way
		// the gateway must have noticed and fallen back.
		timeouts := r.errorsBetween("timeout", r.FaultStart, end)
		if errs+timeouts == 0 || fb == 0 {
			r.Fail("over-cap: %.0f store errors (%.0f connection/other, %.0f timeouts), %.0f fallback decisions; want both > 0", errs+timeouts, errs, timeouts, fb)
		} else if errs == 0 {
			r.Miss("over-cap: the refusal was counted only as %.0f timeouts, want connection/other errors too", timeouts)
		}
	})
	return nil
}

// sentinelFailover is C2: SENTINEL FAILOVER under load; the old master stays
// up and is demoted to a replica.
func sentinelFailover(_ context.Context, e *Env) error {
	sn, err := redistest.StartSentinel(redistest.SentinelOptions{Sentinels: 3, Timeout: 30 * time.Second})
	if err != nil {
		return err
	}
	e.Cleanup(func() { sn.Close() })
	e.Redis(fmt.Sprintf("{mode: sentinel, master_name: %s, addrs: [%s]}", sn.MasterName(), quoted(sn.SentinelAddrs())))
	old := sn.Master
	var switched, demoted time.Duration
	e.Inject(e.Before, "SENTINEL FAILOVER", do(sn.Sentinels[0], "SENTINEL", "FAILOVER", sn.MasterName()))
	sw := e.Event(e.Before, "sentinels switch", func(ctx context.Context) error {
		t0 := time.Now()
		for time.Since(t0) < 20*time.Second {
			if addr, err := sn.MasterAddr(ctx); err == nil && addr != old.Addr() {
				switched = time.Since(t0)
				return nil
			}
			time.Sleep(20 * time.Millisecond) // polling the sentinels, bounded
		}
		return errors.New("no switch within 20s")
	})
	// The fault ends when the old master is a replica: the sentinels
	// reconfigure it some seconds after the switch.
	e.Recover(e.Before, "old master demoted", func(context.Context) error {
		t0 := time.Now()
		for time.Since(t0) < 20*time.Second {
			if v, err := old.Do("ROLE"); err == nil {
				if a, _ := v.([]any); len(a) > 0 && a[0] == "slave" {
					demoted = time.Since(t0)
					return nil
				}
			}
			time.Sleep(20 * time.Millisecond) // polling the server, bounded
		}
		return errors.New("old master not demoted within 20s")
	})
	e.Check(func(r *Report) {
		within := r.errorsBetween("other", r.FaultStart, sw.End+2*time.Second)
		late := r.errorsBetween("other", sw.End+2*time.Second, r.res.total)
		r.Note("switch %.2fs after SENTINEL FAILOVER, old master demoted %.2fs after the switch; errors of kind other (READONLY…) within 2s of the switch %.0f, later %.0f; connection errors %.0f, timeouts %.0f",
			switched.Seconds(), demoted.Seconds(), within, late, r.StoreErrors["connection"], r.StoreErrors["timeout"])
		if late > 0 {
			r.Fail("%.0f errors of kind other (READONLY) later than 2s after the switch, want 0", late)
		}
	})
	return nil
}

// clusterFailover is D4: CLUSTER FAILOVER on a replica under load (the
// master hands over its slots after the replica caught up).
func clusterFailover(_ context.Context, e *Env) error {
	cl, err := redistest.StartCluster(redistest.ClusterOptions{Masters: 3, ReplicasPerMaster: 1, Timeout: time.Minute})
	if err != nil {
		return err
	}
	e.Cleanup(func() { cl.Close() })
	e.Redis(fmt.Sprintf("{mode: cluster, addrs: [%s]}", quoted(cl.Addrs())))
	heir := cl.Replicas[0]
	var promoted time.Duration
	e.Inject(e.Before, "CLUSTER FAILOVER on replica 0", do(heir, "CLUSTER", "FAILOVER"))
	pr := e.Event(e.Before, "replica 0 promoted", func(context.Context) error {
		t0 := time.Now()
		for time.Since(t0) < 20*time.Second {
			if role, err := heir.Do("ROLE"); err == nil {
				if r, _ := role.([]any); len(r) > 0 && r[0] == "master" {
					promoted = time.Since(t0)
					return nil
				}
			}
			time.Sleep(20 * time.Millisecond) // polling the server, bounded
		}
		return errors.New("replica not promoted within 20s")
	})
	// The promotion takes milliseconds; the fault phase (and its latency
	// figures) covers the seconds after it, when clients follow MOVED.
	e.Recover(e.Before+e.Fault, "failover settled", noop)
	e.Check(func(r *Report) {
		fb, share := r.bgShareBetween(r.FaultStart, r.res.total)
		late := r.errorsBetween("other", pr.End+2*time.Second, r.res.total) + r.errorsBetween("script", pr.End+2*time.Second, r.res.total)
		r.Note("replica promoted %.2fs after CLUSTER FAILOVER; degraded (background keys back on Redis) %.2fs after it (plan ≤ 1s, reported); background decisions without Redis from the failover on %.0f (%.2f%%); errors of kind other/script later than 2s after the promotion %.0f",
			promoted.Seconds(), r.Back.Seconds(), fb, 100*share, late)
		if late > 0 {
			r.Fail("%.0f errors (READONLY, MOVED, CLUSTERDOWN…) later than 2s after the promotion, want 0", late)
		}
	})
	return nil
}

// shardLost is D5: a 3-master cluster without replicas and with
// cluster-require-full-coverage no loses the master of a shard that does
// not hold the accounting key; it is restarted (empty) at the fault's end.
func shardLost(ctx context.Context, e *Env) error { return lostShard(ctx, e, false) }

// shardLostFullCoverage is D5 with cluster-require-full-coverage yes (Redis'
// default): once the cluster marks the dead master failed, every node
// answers CLUSTERDOWN, so every key falls back, not only the dead shard's.
func shardLostFullCoverage(ctx context.Context, e *Env) error { return lostShard(ctx, e, true) }

func lostShard(_ context.Context, e *Env, fullCoverage bool) error {
	coverage := "no"
	if fullCoverage {
		coverage = "yes"
	}
	// The live masters mark the dead one failed after cluster-node-timeout:
	// 1 s, so that the outage takes its shape within the fault's 3 s.
	cl, err := redistest.StartCluster(redistest.ClusterOptions{Masters: 3, Timeout: time.Minute,
		Args: []string{"--cluster-require-full-coverage", coverage, "--cluster-node-timeout", "1000"}})
	if err != nil {
		return err
	}
	e.Cleanup(func() { cl.Close() })
	e.Redis(fmt.Sprintf("{mode: cluster, addrs: [%s]}", quoted(cl.Addrs())))
	var victim *redistest.Server
	victimIdx := -1
	e.Inject(e.Before, "kill -9 a master without the accounting key", func(context.Context) error {
		slot, err := accountingSlot(cl)
		if err != nil {
			return err
		}
		m := len(cl.Masters)
		victimIdx = (int(slot)*m/16384 + 1) % m
		victim = cl.Masters[victimIdx]
		return victim.Kill()
	})
	e.Recover(e.Before+e.Fault, "restart it (empty)", func(context.Context) error {
		if victim == nil {
			return errors.New("no master was killed: the kill step failed")
		}
		return victim.Restart()
	})
	// Back on Redis is measured from the restart: the node's rejoin (it
	// answers CLUSTERDOWN until it has heard from the others) is part of
	// the recovery.
	ok := e.Event(e.Before+e.Fault, "cluster_state ok", func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		return cl.Wait(ctx)
	})
	e.Check(func(r *Report) {
		fb, share := r.bgShareBetween(r.FaultStart, r.FaultEnd)
		r.Note("cluster-require-full-coverage %s; killed master %d; during the outage %.0f background decisions without Redis, %.1f%% of the background keys' requests; accounting key (on a live shard) fallback %.0f; cluster_state ok %.2fs after the restart, errors of kind other (CLUSTERDOWN) meanwhile %.0f",
			coverage, victimIdx, fb, 100*share, r.AcctFallback, (ok.End - r.FaultEnd).Seconds(), r.errorsBetween("other", r.FaultEnd, ok.End+200*time.Millisecond))
		if fb == 0 {
			r.Fail("no background decision without Redis while a shard was down")
		}
		if !fullCoverage {
			// One shard of three: about a third of the keys, plus what
			// spurious timeouts of a loaded box add (a miss). Three
			// quarters or more is the cluster down as a whole (a failure).
			if share >= 0.75 {
				r.Fail("%.1f%% of background decisions without Redis while one shard of three was down: the cluster went down as a whole", 100*share)
			} else if share > 0.40 {
				r.Miss("%.1f%% of background decisions without Redis while one shard of three was down, want ≤ 40%%", 100*share)
			}
			return
		}
		// Every key: the live shards answer CLUSTERDOWN once the dead master
		// is marked failed (cluster-node-timeout after the kill), so the
		// accounting key, on a live shard, falls back too, and so do far
		// more background keys than one shard holds.
		if r.AcctFallback == 0 {
			r.Fail("the accounting key (on a live shard) never fell back: the cluster did not go down as a whole")
		}
		if share <= 0.40 {
			r.Fail("%.1f%% of background decisions without Redis, want more than one shard's third (every key falls back once the cluster is down)", 100*share)
		}
	})
	return nil
}
