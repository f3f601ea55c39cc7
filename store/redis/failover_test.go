package redis

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sluice-gw/sluice/internal/redistest"
	"github.com/sluice-gw/sluice/ratelimit"
)

// TestClusterFailover: when a master is killed, its replica takes over and
// the store finds it without a restart: rueidis refreshes its slot map when
// a connection breaks (and on MOVED), so decisions on the failed shard's
// keys come back within seconds, while other shards keep working.
// docs/reliability.md row D2 (go-redis #3979 keeps a stale map for 60 s).
func TestClusterFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 6-node cluster and waits for a failover")
	}
	// Without full coverage the healthy shards keep serving while one is
	// down (with it, every node answers CLUSTERDOWN until the failover).
	cl := redistest.NewCluster(t, redistest.ClusterOptions{Masters: 3, ReplicasPerMaster: 1, Timeout: time.Minute,
		Args: []string{"--cluster-require-full-coverage", "no"}})
	s := mustNew(t, Options{Mode: Cluster, Addrs: cl.Addrs(), Timeout: 200 * time.Millisecond})
	p := ratelimit.MustPolicy(ratelimit.PolicyConfig{Algorithm: ratelimit.FixedWindow, Limit: 1000, Window: ratelimit.MaxWindow})
	// failed hashes to the first master's slots (0..5460), healthy to the last's.
	var failed, healthy ratelimit.Request
	for i := 0; failed.Policy == nil || healthy.Policy == nil; i++ {
		k := fmt.Sprintf("failover-%d", i)
		switch sl := slot(tag(k)); {
		case sl < 5461 && failed.Policy == nil:
			failed = ratelimit.Request{Key: k, Policy: p}
		case sl >= 2*16384/3+1 && healthy.Policy == nil:
			healthy = ratelimit.Request{Key: k, Policy: p}
		}
	}
	evaluate(t, s, failed)
	evaluate(t, s, healthy)
	if err := cl.Masters[0].Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	out := make([]ratelimit.Decision, 1)
	var healthyErrs, healthyCalls int
	kinds := map[string]int{}
	for {
		healthyCalls++
		if _, err := s.Evaluate(context.Background(), []ratelimit.Request{healthy}, out); err != nil {
			healthyErrs++
		}
		_, err := s.Evaluate(context.Background(), []ratelimit.Request{failed}, out)
		if err == nil {
			break
		}
		kinds[ErrorKind(err)]++
		if time.Since(killed) > 20*time.Second {
			t.Fatalf("keys of the killed master still fail 20s later: %v", err)
		}
	}
	t.Logf("decisions on the failed shard back %v after the kill (cluster-node-timeout 1s; errors meanwhile by kind: %v)",
		time.Since(killed).Round(time.Millisecond), kinds)
	// A healthy shard keeps serving (a rare timeout on a loaded machine aside).
	if healthyErrs > healthyCalls/100 {
		t.Errorf("%d of %d calls on a healthy shard failed during the failover, want (nearly) none", healthyErrs, healthyCalls)
	}
}
