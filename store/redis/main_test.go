package redis

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluice-gw/sluice/internal/redistest"
	"github.com/sluice-gw/sluice/ratelimit"
)

// The package's shared servers: one standalone server and one 3-master
// cluster, started once in TestMain. Tests that kill, pause or reconfigure a
// server start their own.
var (
	standalone    *redistest.Server
	standaloneErr error
	cluster       *redistest.Cluster
	clusterErr    error

	// Shared clients, built like New builds them (retries off).
	standaloneClient rueidis.Client
	clusterClient    rueidis.Client
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	var wg sync.WaitGroup
	wg.Go(func() { standalone, standaloneErr = redistest.StartServer(redistest.ServerOptions{}) })
	wg.Go(func() {
		cluster, clusterErr = redistest.StartCluster(redistest.ClusterOptions{Masters: 3, Timeout: time.Minute})
	})
	wg.Wait()
	if standaloneErr == nil {
		defer standalone.Close()
		standaloneClient, standaloneErr = newClient([]string{standalone.Addr()}, true)
		if standaloneErr == nil {
			defer standaloneClient.Close()
		}
	}
	if clusterErr == nil {
		defer cluster.Close()
		clusterClient, clusterErr = newClient(cluster.Addrs(), false)
		if clusterErr == nil {
			defer clusterClient.Close()
		}
	}
	return m.Run()
}

// newClient builds a rueidis client the way New does.
func newClient(addrs []string, single bool) (rueidis.Client, error) {
	return rueidis.NewClient(rueidis.ClientOption{
		InitAddress:       addrs,
		ForceSingleClient: single,
		DisableRetry:      true,
		DisableCache:      true,
		ConnWriteTimeout:  5 * time.Second,
	})
}

// deployment is a Redis to run a test against.
type deployment struct {
	name   string
	client func(t testing.TB) rueidis.Client
	addrs  func(t *testing.T) []string
	mode   Mode
}

var deployments = []deployment{
	{"standalone", standaloneRedis, func(t *testing.T) []string { standaloneRedis(t); return []string{standalone.Addr()} }, Standalone},
	{"cluster", clusterRedis, func(t *testing.T) []string { clusterRedis(t); return cluster.Addrs() }, Cluster},
}

func standaloneRedis(t testing.TB) rueidis.Client {
	t.Helper()
	redistest.Check(t, standaloneErr)
	return standaloneClient
}

func clusterRedis(t testing.TB) rueidis.Client {
	t.Helper()
	redistest.Check(t, clusterErr)
	return clusterClient
}

var prefixSeq atomic.Int64

// testPrefix returns a key prefix no other test uses.
func testPrefix() string {
	return fmt.Sprintf("st%d-%d", time.Now().UnixNano()%1e6, prefixSeq.Add(1))
}

// newTestStore returns a Store on c with its own prefix and the given clock
// (nil: Redis TIME), and a generous timeout for -race runs.
func newTestStore(t *testing.T, c rueidis.Client, clock ratelimit.Clock) *Store {
	t.Helper()
	s, err := NewFromClient(c, Options{Prefix: testPrefix(), Clock: clock, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// policies returns one policy per algorithm (and leaky bucket mode).
func policies(t testing.TB) []*ratelimit.Policy {
	t.Helper()
	cfgs := []ratelimit.PolicyConfig{
		{Name: "tb", Algorithm: ratelimit.TokenBucket, Capacity: 5, Rate: 2},
		{Name: "lb", Algorithm: ratelimit.LeakyBucket, Capacity: 5, Rate: 2},
		{Name: "lbs", Algorithm: ratelimit.LeakyBucket, Capacity: 5, Rate: 2, Mode: ratelimit.Shape, MaxDelay: 1500 * time.Millisecond},
		{Name: "fw", Algorithm: ratelimit.FixedWindow, Limit: 5, Window: 3 * time.Second},
		{Name: "sl", Algorithm: ratelimit.SlidingLog, Limit: 5, Window: 3 * time.Second},
		{Name: "sw", Algorithm: ratelimit.SlidingWindow, Limit: 5, Window: 3 * time.Second},
		{Name: "gc", Algorithm: ratelimit.GCRA, Burst: 5, Rate: 2},
	}
	ps := make([]*ratelimit.Policy, len(cfgs))
	for i, c := range cfgs {
		ps[i] = ratelimit.MustPolicy(c)
	}
	return ps
}

func evaluate(t *testing.T, s ratelimit.Store, reqs ...ratelimit.Request) (bool, []ratelimit.Decision) {
	t.Helper()
	out := make([]ratelimit.Decision, len(reqs))
	ok, err := s.Evaluate(context.Background(), reqs, out)
	if err != nil {
		t.Fatalf("Evaluate: %v", err)
	}
	return ok, out
}

func peek(t *testing.T, s ratelimit.Store, reqs ...ratelimit.Request) []ratelimit.Decision {
	t.Helper()
	out := make([]ratelimit.Decision, len(reqs))
	if err := s.Peek(context.Background(), reqs, out); err != nil {
		t.Fatalf("Peek: %v", err)
	}
	return out
}
