package redis

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sluice-gw/sluice/internal/redistest"
	"github.com/sluice-gw/sluice/ratelimit"
)

// windowPolicy has exact remaining counts for the length of a test.
var windowPolicy = ratelimit.MustPolicy(ratelimit.PolicyConfig{Name: "fw", Algorithm: ratelimit.FixedWindow, Limit: 1000, Window: time.Hour})

// flushCalls runs one request per key concurrently (all released at once)
// and returns each call's error and decision.
func flushCalls(s *Store, keys []string) ([]error, []ratelimit.Decision) {
	errs := make([]error, len(keys))
	outs := make([]ratelimit.Decision, len(keys))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, k := range keys {
		wg.Go(func() {
			<-start
			out := outs[i : i+1]
			_, errs[i] = s.Evaluate(context.Background(), []ratelimit.Request{{Key: k, Policy: windowPolicy}}, out)
		})
	}
	close(start)
	wg.Wait()
	return errs, outs
}

// scriptStats sums calls of SCRIPT LOAD, EVAL and EVALSHA over srvs.
func scriptStats(t *testing.T, srvs ...*redistest.Server) (loads, evals, evalshas int) {
	t.Helper()
	for _, srv := range srvs {
		loads += cmdCalls(t, srv, "script|load")
		evals += cmdCalls(t, srv, "eval")
		evalshas += cmdCalls(t, srv, "evalsha")
	}
	return loads, evals, evalshas
}

// TestScriptFlushConcurrent is B8 without load: after SCRIPT FLUSH, N
// concurrent callers all get NOSCRIPT, and the script is loaded once for
// all of them (no EVAL with the whole script per caller), no caller sees an
// error, and each script ran exactly once (the counts are exact).
func TestScriptFlushConcurrent(t *testing.T) {
	srv := redistest.NewServer(t, redistest.ServerOptions{})
	s := mustNew(t, Options{Addrs: []string{srv.Addr()}})
	const n = 64
	keys := make([]string, n)
	for i := range keys {
		keys[i] = "k" + string(rune('A'+i%26)) + string(rune('a'+i/26))
	}
	// Warm up: the script is loaded and every key used once.
	if errs, _ := flushCalls(s, keys); errs[0] != nil {
		t.Fatal(errs[0])
	}
	for round := 1; round <= 3; round++ {
		if _, err := srv.Do("SCRIPT", "FLUSH"); err != nil {
			t.Fatal(err)
		}
		l0, e0, s0 := scriptStats(t, srv)
		errs, outs := flushCalls(s, keys)
		l1, e1, s1 := scriptStats(t, srv)
		for i, err := range errs {
			if err != nil {
				t.Fatalf("round %d, key %d: %v (NOSCRIPT must not reach the caller)", round, i, err)
			}
			if want := int64(1000 - 1 - round); !outs[i].Allowed || outs[i].Remaining != want {
				t.Errorf("round %d, key %d: allowed %v, remaining %d, want admitted with %d (the script ran once per call)",
					round, i, outs[i].Allowed, outs[i].Remaining, want)
			}
		}
		t.Logf("round %d: %d callers: SCRIPT LOAD %d, EVAL %d, EVALSHA %d", round, n, l1-l0, e1-e0, s1-s0)
		if l1-l0 != 1 {
			t.Errorf("round %d: %d SCRIPT LOAD for %d concurrent callers after a flush, want 1", round, l1-l0, n)
		}
		if e1-e0 != 0 {
			t.Errorf("round %d: %d EVAL, want 0", round, e1-e0)
		}
		// Concurrent calls may share a script run (batch.go): at least one
		// EVALSHA got NOSCRIPT and was sent again.
		if s1-s0 < 2 {
			t.Errorf("round %d: %d EVALSHA, want at least 2", round, s1-s0)
		}
	}
}

// TestScriptFlushCluster: on Cluster the SCRIPT LOAD reaches the node that
// answered NOSCRIPT (routed by the call's slot, not to a random node), once
// per slot for concurrent callers; no EVAL, no error, exact counts.
func TestScriptFlushCluster(t *testing.T) {
	clusterRedis(t)
	s := mustNew(t, Options{Mode: Cluster, Addrs: cluster.Addrs()})
	flushAll := func() {
		t.Helper()
		for _, m := range cluster.Masters {
			if _, err := m.Do("SCRIPT", "FLUSH"); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Leave the shared cluster's script caches loaded for the next tests.
	t.Cleanup(func() {
		for _, m := range cluster.Masters {
			m.Do("SCRIPT", "LOAD", evalSource)
			m.Do("SCRIPT", "LOAD", refundSource)
		}
	})
	t.Run("one slot", func(t *testing.T) {
		const n = 32
		keys := make([]string, n)
		for i := range keys {
			keys[i] = "same"
		}
		if errs, _ := flushCalls(s, keys[:1]); errs[0] != nil {
			t.Fatal(errs[0])
		}
		flushAll()
		l0, e0, _ := scriptStats(t, cluster.Masters...)
		errs, outs := flushCalls(s, keys)
		l1, e1, _ := scriptStats(t, cluster.Masters...)
		least := int64(1000)
		for i, err := range errs {
			if err != nil {
				t.Fatalf("call %d: %v", i, err)
			}
			least = min(least, outs[i].Remaining)
		}
		// The first call took one, the n concurrent calls n more.
		if want := int64(1000 - 1 - n); least != want {
			t.Errorf("least remaining %d after %d calls, want %d (each script ran once)", least, n+1, want)
		}
		t.Logf("%d callers on one slot: SCRIPT LOAD %d, EVAL %d", n, l1-l0, e1-e0)
		if l1-l0 != 1 || e1-e0 != 0 {
			t.Errorf("SCRIPT LOAD %d, EVAL %d, want 1 and 0", l1-l0, e1-e0)
		}
	})
	t.Run("many slots", func(t *testing.T) {
		const n = 24
		keys := make([]string, n)
		slots := make(map[uint16]bool)
		for i := range keys {
			keys[i] = "m" + string(rune('a'+i))
			slots[slot(tag(keys[i]))] = true
		}
		if errs, _ := flushCalls(s, keys); errs[0] != nil {
			t.Fatal(errs[0])
		}
		flushAll()
		l0, e0, _ := scriptStats(t, cluster.Masters...)
		errs, outs := flushCalls(s, keys)
		l1, e1, _ := scriptStats(t, cluster.Masters...)
		for i, err := range errs {
			if err != nil {
				t.Fatalf("call %d: %v", i, err)
			}
			if !outs[i].Allowed || outs[i].Remaining != 1000-2 {
				t.Errorf("key %d: allowed %v, remaining %d, want admitted with 998", i, outs[i].Allowed, outs[i].Remaining)
			}
		}
		t.Logf("%d callers on %d slots: SCRIPT LOAD %d, EVAL %d", n, len(slots), l1-l0, e1-e0)
		if l1-l0 < 1 || l1-l0 > len(slots) || e1-e0 != 0 {
			t.Errorf("SCRIPT LOAD %d (want 1 to %d, one per slot at most), EVAL %d (want 0)", l1-l0, len(slots), e1-e0)
		}
	})
}

// TestScriptExecNoScript drives the script type directly (no batching):
// after SCRIPT FLUSH, n concurrent Execs each get NOSCRIPT once, share one
// SCRIPT LOAD and run the script exactly once each; none sends EVAL.
func TestScriptExecNoScript(t *testing.T) {
	srv := redistest.NewServer(t, redistest.ServerOptions{})
	c, err := newClient([]string{srv.Addr()}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sc := newScript("return redis.call('INCR', KEYS[1])")
	const n = 50
	prefix := testPrefix()
	run := func() []int64 {
		got := make([]int64, n)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				<-start
				v, err := sc.Exec(context.Background(), c, []string{fmt.Sprintf("%s:%d", prefix, i)}, nil).AsInt64()
				if err != nil {
					t.Errorf("Exec %d: %v", i, err)
				}
				got[i] = v
			})
		}
		close(start)
		wg.Wait()
		return got
	}
	run()
	for round := 2; round <= 4; round++ {
		if _, err := srv.Do("SCRIPT", "FLUSH"); err != nil {
			t.Fatal(err)
		}
		l0, e0, s0 := scriptStats(t, srv)
		got := run()
		l1, e1, s1 := scriptStats(t, srv)
		for i, v := range got {
			if v != int64(round) {
				t.Errorf("round %d: key %d counted %d, want %d (each Exec runs the script once)", round, i, v, round)
			}
		}
		t.Logf("round %d: %d Execs: SCRIPT LOAD %d, EVAL %d, EVALSHA %d", round, n, l1-l0, e1-e0, s1-s0)
		if l1-l0 != 1 || e1-e0 != 0 {
			t.Errorf("round %d: SCRIPT LOAD %d, EVAL %d, want 1 and 0", round, l1-l0, e1-e0)
		}
		// n runs, plus one re-send per NOSCRIPT (at least the first).
		if s1-s0 < n+1 || s1-s0 > 2*n {
			t.Errorf("round %d: %d EVALSHA for %d Execs, want %d to %d", round, s1-s0, n, n+1, 2*n)
		}
	}
}
