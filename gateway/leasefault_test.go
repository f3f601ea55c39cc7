package gateway

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-gw/sluice/gateway/config"
	"github.com/sluice-gw/sluice/internal/faultload"
	"github.com/sluice-gw/sluice/internal/redistest"
)

// Leases through Redis faults. Each test fills a
// concurrency limit with requests the upstream holds, keeps probers asking
// for more while a fault runs, and reads the upstream's own count of the
// most requests it held at once: the limit is what must hold there.

// leaseFault is one run: the limit, the lease TTL, the gateway instances
// (the first holds the requests that fill the limit; every instance probes)
// and the fault, which starts after the limit is full and returns once it
// has ended.
type leaseFault struct {
	limit     int64
	ttl       time.Duration
	instances int
	onError   config.OnError
	// shed puts the limit on the shedding budget (max_in_flight, the
	// route critical) instead of a concurrency limit of the route.
	shed bool
	// fault runs the fault; probing goes on meanwhile and for after past
	// its end.
	fault func(t *testing.T, srv *redistest.Server, px *faultload.Proxy)
	after time.Duration
}

// leaseFaultRun runs f and returns the upstream, its gate still closed,
// with the probers stopped, and the instance holding the leases.
func leaseFaultRun(t *testing.T, f leaseFault) (*slowUpstream, *Gateway) {
	t.Helper()
	srv := redistest.NewServer(t, redistest.ServerOptions{})
	px, err := faultload.NewProxy(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { px.Close() })
	up := newSlowUpstream(t)
	cfg := leaseConfig(up.URL, f.limit, f.ttl)
	cfg.Routes[0].Timeout = 2 * time.Minute
	cfg.Store.Type = config.StoreRedis
	cfg.Store.Redis = config.Redis{Mode: config.RedisStandalone, Addrs: []string{px.Addr()}}
	// Generous for a loaded machine (a request the store times out on is
	// decided by on_error), below the lease TTL.
	cfg.Store.Timeout = 500 * time.Millisecond
	if f.onError != "" {
		cfg.Store.OnError = f.onError
	}
	if f.shed {
		cfg.Routes[0].Limits, cfg.Routes[0].Priority = nil, config.PriorityCritical
		cfg.Shedding = &config.Shedding{MaxInFlight: f.limit, LeaseTTL: f.ttl, Share: config.DefaultShedShares}
	}
	var fronts []string
	var holder *Gateway
	for range f.instances {
		g := newTestGateway(t, cfg)
		if holder == nil {
			holder = g
		}
		front := httptest.NewServer(g)
		t.Cleanup(front.Close)
		fronts = append(fronts, front.URL)
	}
	t.Cleanup(up.open) // before the fronts close: the held requests end first

	// Fill the limit through the first instance, a hundred at a time; a
	// request refused (a store timeout on a loaded machine) tries again.
	for n := int64(0); n < f.limit; {
		batch := min(100, f.limit-n)
		for range batch {
			go func() {
				for t.Context().Err() == nil {
					if status, _, _, _ := getAs(t.Context(), fronts[0], "/held", "alice"); status == http.StatusOK {
						return
					}
					time.Sleep(20 * time.Millisecond)
				}
			}()
		}
		n += batch
		waitFor(t, 30*time.Second, "the requests filling the limit did not all reach the upstream", func() bool {
			return up.inflight.Load() >= n
		})
	}

	ctx, stop := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	for i := range 4 * f.instances {
		wg.Go(func() {
			for ctx.Err() == nil {
				status, _, _, _ := getAs(ctx, fronts[i%len(fronts)], "/probe", "alice")
				if status != http.StatusOK {
					time.Sleep(5 * time.Millisecond)
				}
			}
		})
	}
	f.fault(t, srv, px)
	time.Sleep(f.after) // probing: the time is the test's subject
	stop()
	wg.Wait()
	return up, holder
}

// leaseMetric returns the value of the unlabelled counter name on g.
func leaseMetric(t *testing.T, g *Gateway, name string) float64 {
	t.Helper()
	for line := range strings.Lines(scrapeMetrics(t, g)) {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
	}
	t.Fatalf("metrics lack %s", name)
	return 0
}

// TestLeasesSlowRedis: with Redis 4ms slower per reply
// and 1,000 leases held on one instance (lease_ttl 3s), the leases are
// renewed in time, so neither that instance nor another sharing the store
// admits a request over the limit. With on_error deny neither instance
// admits without Redis, whatever the machine's load: the test is about
// the leases Redis holds.
func TestLeasesSlowRedis(t *testing.T) {
	const limit = 1000
	up, _ := leaseFaultRun(t, leaseFault{limit: limit, ttl: 3 * time.Second, instances: 2, onError: config.OnErrorDeny,
		fault: func(t *testing.T, _ *redistest.Server, px *faultload.Proxy) {
			px.SetReplyDelay(4 * time.Millisecond)
		},
		after: 10 * time.Second})
	if got := up.most.Load(); got > limit {
		t.Errorf("the upstream held %d requests at once, limit %d: leases expired while renewals were slow", got, limit)
	}
}

// stopRedisFor is a fault that stops Redis (SIGSTOP) for d, then resumes it.
func stopRedisFor(d time.Duration) func(*testing.T, *redistest.Server, *faultload.Proxy) {
	return func(t *testing.T, srv *redistest.Server, _ *faultload.Proxy) {
		if err := srv.Stop(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(d)
		if err := srv.Cont(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestLeasesRedisStopped: Redis stopped (SIGSTOP) for
// longer than lease_ttl, so that every held lease has expired by Redis'
// clock when it resumes: the instance still never admits over the limit,
// during the stop or after it.
func TestLeasesRedisStopped(t *testing.T) {
	const limit = 50
	up, g := leaseFaultRun(t, leaseFault{limit: limit, ttl: time.Second, instances: 1,
		fault: stopRedisFor(2500 * time.Millisecond),
		after: 4 * time.Second})
	if got := up.most.Load(); got > limit {
		t.Errorf("the upstream held %d requests at once, limit %d", got, limit)
	}
	if got := leaseMetric(t, g, "sluice_lease_renew_failures_total"); got < 1 {
		t.Errorf("sluice_lease_renew_failures_total = %v after renewals failed for 2.5s, want at least 1", got)
	}
}

// TestSheddingBudgetRedisStopped: the shedding budget
// holds its requests in flight on leases too; Redis stopped for longer
// than its lease_ttl does not let the instance over max_in_flight.
func TestSheddingBudgetRedisStopped(t *testing.T) {
	const limit = 50
	up, g := leaseFaultRun(t, leaseFault{limit: limit, ttl: time.Second, instances: 1, shed: true,
		fault: stopRedisFor(2500 * time.Millisecond),
		after: 4 * time.Second})
	if got := up.most.Load(); got > limit {
		t.Errorf("the upstream held %d requests at once, max_in_flight %d", got, limit)
	}
	if got := leaseMetric(t, g, "sluice_lease_renew_failures_total"); got < 1 {
		t.Errorf("sluice_lease_renew_failures_total = %v after renewals failed for 2.5s, want at least 1", got)
	}
}

// TestLeasesRedisPartitioned: a partition that
// blackholes every byte to and from Redis for longer than lease_ttl. Redis'
// clock runs on, so the held leases expire there; the instance, deciding
// with its local store meanwhile (on_error local) and taking each lease
// locally first once Redis answers again, never admits over the limit (the
// bound of docs/operations.md for a fleet is the limit plus the leases held
// when the partition began, until those requests end).
func TestLeasesRedisPartitioned(t *testing.T) {
	const limit = 50
	up, g := leaseFaultRun(t, leaseFault{limit: limit, ttl: time.Second, instances: 1,
		fault: func(t *testing.T, _ *redistest.Server, px *faultload.Proxy) {
			px.SetBlackhole(true)
			time.Sleep(2500 * time.Millisecond)
			px.SetBlackhole(false)
		},
		after: 4 * time.Second})
	if got := up.most.Load(); got > limit {
		t.Errorf("the upstream held %d requests at once, limit %d", got, limit)
	}
	if got := leaseMetric(t, g, "sluice_lease_renew_failures_total"); got < 1 {
		t.Errorf("sluice_lease_renew_failures_total = %v after renewals failed for 2.5s, want at least 1", got)
	}
}

// TestLeasesRedisRestartedEmpty: Redis down for longer
// than lease_ttl, then back without its data. The instance never admits
// over the limit, and the renewals add the held leases back to Redis.
func TestLeasesRedisRestartedEmpty(t *testing.T) {
	const limit = 50
	up, g := leaseFaultRun(t, leaseFault{limit: limit, ttl: time.Second, instances: 1,
		fault: func(t *testing.T, srv *redistest.Server, _ *faultload.Proxy) {
			if err := srv.Kill(); err != nil {
				t.Fatal(err)
			}
			time.Sleep(2500 * time.Millisecond)
			if err := srv.Restart(); err != nil {
				t.Fatal(err)
			}
			waitFor(t, 10*time.Second, "the held leases were not added back to Redis", func() bool {
				return heldInRedis(srv) >= limit
			})
		},
		after: 4 * time.Second})
	if got := up.most.Load(); got > limit {
		t.Errorf("the upstream held %d requests at once, limit %d", got, limit)
	}
	if got := leaseMetric(t, g, "sluice_lease_readds_total"); got < limit {
		t.Errorf("sluice_lease_readds_total = %v after Redis restarted empty under %d held leases, want at least %d", got, limit, limit)
	}
}

// heldInRedis returns the number of leases the concurrency key of srv
// holds (0 if there is none, or on an error).
func heldInRedis(srv *redistest.Server) int64 {
	keys, err := srv.Do("KEYS", "*:cc")
	if ks, ok := keys.([]any); err != nil || !ok || len(ks) != 1 {
		return 0
	} else if n, err := srv.Do("ZCARD", ks[0]); err == nil {
		c, _ := n.(int64)
		return c
	}
	return 0
}
