package redis

import (
	"testing"
	"time"

	"github.com/sluice-gw/sluice/internal/redistest"
	"github.com/sluice-gw/sluice/internal/testdiff"
	"github.com/sluice-gw/sluice/ratelimit"
	"github.com/sluice-gw/sluice/ratelimit/kit"
)

// scriptCalls returns the number of script runs (EVALSHA and EVAL) the
// servers have executed, from INFO commandstats.
func scriptCalls(t *testing.T, srvs ...*redistest.Server) int {
	t.Helper()
	n := 0
	for _, srv := range srvs {
		n += cmdCalls(t, srv, "evalsha") + cmdCalls(t, srv, "eval")
	}
	return n
}

// threeLimits returns a token bucket, a sliding log and a gcra limit, on
// the keys key+"-tb", key+"-sl", key+"-gc" (or all on key when sameKey,
// so that they share a Cluster hash slot).
func threeLimits(key string, sameKey bool) []ratelimit.Request {
	ps := []*ratelimit.Policy{
		ratelimit.MustPolicy(ratelimit.PolicyConfig{Name: "tb", Algorithm: ratelimit.TokenBucket, Capacity: 10, Rate: 1}),
		ratelimit.MustPolicy(ratelimit.PolicyConfig{Name: "sl", Algorithm: ratelimit.SlidingLog, Limit: 4, Window: time.Minute}),
		ratelimit.MustPolicy(ratelimit.PolicyConfig{Name: "gc", Algorithm: ratelimit.GCRA, Burst: 6, Rate: 1}),
	}
	reqs := make([]ratelimit.Request, len(ps))
	for i, p := range ps {
		reqs[i] = ratelimit.Request{Key: key, Policy: p, Cost: 2}
		if !sameKey {
			reqs[i].Key = key + "-" + p.Name()
		}
	}
	return reqs
}

// TestOneScriptCall: on standalone and Sentinel (and on Cluster when every
// limit hashes to one slot), Evaluate decides a request's three limits of
// different algorithms in exactly one script run, whether it admits or
// denies, and the run decided every limit (Peek shows each one consumed,
// or none): one script call evaluates every limit of a request atomically
// in one round trip. Relies on no other test running at the
// same time on the shared cluster (no top-level test is parallel).
func TestOneScriptCall(t *testing.T) {
	type setup struct {
		store    *Store
		masters  []*redistest.Server // where the scripts run
		replicas []*redistest.Server
	}
	cases := []struct {
		name    string
		sameKey bool
		setup   func(t *testing.T, clock ratelimit.Clock) setup
	}{
		{"standalone", false, func(t *testing.T, clock ratelimit.Clock) setup {
			srv := redistest.NewServer(t, redistest.ServerOptions{})
			return setup{mustNew(t, Options{Addrs: []string{srv.Addr()}, Clock: clock}), []*redistest.Server{srv}, nil}
		}},
		{"sentinel", false, func(t *testing.T, clock ratelimit.Clock) setup {
			sn := redistest.NewSentinel(t, redistest.SentinelOptions{})
			s := mustNew(t, Options{Mode: Sentinel, Addrs: sn.SentinelAddrs(), MasterName: sn.MasterName(), Clock: clock})
			return setup{s, []*redistest.Server{sn.Master}, []*redistest.Server{sn.Replica}}
		}},
		{"cluster, one slot", true, func(t *testing.T, clock ratelimit.Clock) setup {
			return setup{newTestStore(t, clusterRedis(t), clock), cluster.Masters, cluster.Replicas}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clock := kit.NewManualClock(time.Unix(1_764_000_000, 0))
			st := tc.setup(t, clock)
			s := st.store
			// Load the script first: the first call is EVALSHA (NOSCRIPT),
			// then EVAL.
			evaluate(t, s, ratelimit.Request{Key: "warm-up", Policy: tbPolicy})

			reqs := threeLimits("k", tc.sameKey)
			full := peek(t, s, reqs...)
			before := scriptCalls(t, st.masters...)
			ok, out := evaluate(t, s, reqs...)
			if n := scriptCalls(t, st.masters...) - before; n != 1 {
				t.Errorf("admitted Evaluate of 3 limits: %d script calls, want 1", n)
			}
			if !ok {
				t.Fatalf("Evaluate = denied, %+v", out)
			}
			after := peek(t, s, reqs...)
			for i, r := range reqs {
				if want := full[i].Remaining - 2; out[i].Remaining != want || after[i].Remaining != want {
					t.Errorf("%s: remaining %d, then Peek %d; want %d", r.Policy.Name(), out[i].Remaining, after[i].Remaining, want)
				}
			}

			// Two more admit the sliding log (limit 4) once, then it denies.
			evaluate(t, s, reqs...)
			before = scriptCalls(t, st.masters...)
			ok, out = evaluate(t, s, reqs...)
			if n := scriptCalls(t, st.masters...) - before; n != 1 {
				t.Errorf("denied Evaluate of 3 limits: %d script calls, want 1", n)
			}
			if ok || !out[0].Allowed || out[1].Allowed || !out[2].Allowed {
				t.Fatalf("third Evaluate = %v %+v, want denied by the sliding log only", ok, out)
			}
			// Replicas execute no scripts: Redis 7 replicates a script's effects.
			if n := scriptCalls(t, st.replicas...); n != 0 {
				t.Errorf("the replicas ran %d scripts, want 0", n)
			}
		})
	}
}

// TestSentinelDeniedWritesNothing: on Sentinel, as on standalone
// (TestDeniedWritesNothing), a request that one limit denies leaves every
// key of every limit byte for byte as it was (DUMP on the master), TTLs
// not extended, and every limit's Peek unchanged: all or nothing across
// three limits of different algorithms, for each algorithm as the denying
// limit.
func TestSentinelDeniedWritesNothing(t *testing.T) {
	sn := redistest.NewSentinel(t, redistest.SentinelOptions{})
	clock := kit.NewManualClock(time.Unix(1_764_000_000, 0))
	s := mustNew(t, Options{Mode: Sentinel, Addrs: sn.SentinelAddrs(), MasterName: sn.MasterName(), Clock: clock})
	raw, err := newClient([]string{sn.Master.Addr()}, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(raw.Close)
	tb := ratelimit.MustPolicy(ratelimit.PolicyConfig{Name: "other-tb", Algorithm: ratelimit.TokenBucket, Capacity: 10, Rate: 1})
	sw := ratelimit.MustPolicy(ratelimit.PolicyConfig{Name: "other-sw", Algorithm: ratelimit.SlidingWindow, Limit: 10, Window: time.Minute})
	for _, p := range policies(t) {
		t.Run(p.Name(), func(t *testing.T) {
			reqs := []ratelimit.Request{
				{Key: "a-" + p.Name(), Policy: tb},
				{Key: "b-" + p.Name(), Policy: sw, Cost: 3},
				{Key: "deny-" + p.Name(), Policy: p, Cost: p.Max()},
			}
			if ok, out := evaluate(t, s, reqs...); !ok {
				t.Fatalf("setup: first request denied: %+v", out)
			}
			clock.Advance(20 * time.Millisecond)
			dumps := make([][]string, len(reqs))
			ttls := make([][]int64, len(reqs))
			for i, r := range reqs {
				dumps[i], ttls[i] = rawState(t, raw, s, r)
			}
			before := peek(t, s, reqs...)
			calls := scriptCalls(t, sn.Master)
			ok, out := evaluate(t, s, reqs...)
			if n := scriptCalls(t, sn.Master) - calls; n != 1 {
				t.Errorf("Evaluate: %d script calls on the master, want 1", n)
			}
			if ok || !out[0].Allowed || !out[1].Allowed || out[2].Allowed {
				t.Fatalf("Evaluate = %v %+v, want denied by the last limit only", ok, out)
			}
			for i, r := range reqs {
				sameState(t, raw, s, r, dumps[i], ttls[i])
			}
			if d := testdiff.Diff(before, peek(t, s, reqs...)); d != "" {
				t.Errorf("Peek changed by a denied request (-before +after):\n%s", d)
			}
		})
	}
}
