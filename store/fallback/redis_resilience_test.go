package fallback

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-gw/sluice/ratelimit"
)

// paced sends requests at about rate per second from workers goroutines
// (each one on its own ticker) until stop is closed, and counts them.
func paced(s *Store, rate, workers int, stop chan struct{}, calls, bad *atomic.Int64) *sync.WaitGroup {
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			tick := time.NewTicker(time.Duration(workers) * time.Second / time.Duration(rate))
			defer tick.Stop()
			var out [1]ratelimit.Decision
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				case <-tick.C:
				}
				req := []ratelimit.Request{{Key: fmt.Sprintf("w%d-%d", w, i%50), Policy: roomy}}
				if ok, err := s.Evaluate(context.Background(), req, out[:]); err != nil || !ok {
					bad.Add(1)
				}
				calls.Add(1)
			}
		})
	}
	return &wg
}

// TestRedisClientKill is B9 without the gateway: CLIENT KILL TYPE normal
// while a bounded load (500 req/s from 4 goroutines) decides. A kill breaks
// the store's connection, so the calls in flight on it fail (they may have
// run: never re-sent); the breaker must not open for it, and the calls that
// fall back per kill stay about the calls in flight.
func TestRedisClientKill(t *testing.T) {
	if testing.Short() {
		t.Skip("kills connections for a few seconds")
	}
	for _, c := range []struct {
		timeout       time.Duration
		rate, workers int
	}{{redisTimeout, 500, 4}, {redisTimeout, 2000, 64}} {
		t.Run(fmt.Sprintf("%v-%d-%d", c.timeout, c.rate, c.workers), func(t *testing.T) { clientKill(t, c.timeout, c.rate, c.workers) })
	}
}

func clientKill(t *testing.T, timeout time.Duration, rate, workers int) {
	t.Helper()
	e := newRedisEnv(t, timeout)
	var calls, bad atomic.Int64
	stop := make(chan struct{})
	wg := paced(e.s, rate, workers, stop, &calls, &bad)
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		wg.Wait()
	}()
	time.Sleep(300 * time.Millisecond)
	const kills = 8
	errs0, falls0, states0 := e.hooks.snapshot()
	c0 := calls.Load()
	perKill := make([]int, kills)
	for k := range kills {
		_, f0, _ := e.hooks.snapshot()
		if _, err := e.srv.Do("CLIENT", "KILL", "TYPE", "normal"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(400 * time.Millisecond)
		_, f1, _ := e.hooks.snapshot()
		perKill[k] = f1[Local] - f0[Local]
	}
	close(stop)
	wg.Wait()
	errs1, falls1, states1 := e.hooks.snapshot()
	n := calls.Load() - c0
	errKinds := map[string]int{}
	for k, v := range errs1 {
		errKinds[k] = v - errs0[k]
	}
	falls := falls1[Local] - falls0[Local]
	openings := 0
	for _, a := range states1[len(states0):] {
		if a {
			openings++
		}
	}
	t.Logf("%d kills, %d calls: %d fallback decisions (%.1f per kill, %.2f%%), per kill %v; store errors %v; breaker openings %d",
		kills, n, falls, float64(falls)/kills, 100*float64(falls)/float64(n), perKill, errKinds, openings)
	if bad.Load() > 0 {
		t.Errorf("%d requests not admitted or failed, want none", bad.Load())
	}
	switch {
	case openings > 0 && errKinds["timeout"] > 0:
		// Timeouts count one by one: on a loaded machine they may open
		// the breaker whatever the kills do.
		t.Logf("breaker openings not checked: %d timeouts (a loaded machine)", errKinds["timeout"])
	case openings > 0:
		t.Errorf("the breaker opened %d times for %d connection kills, want 0 (a kill is not an outage)", openings, kills)
	}
}
