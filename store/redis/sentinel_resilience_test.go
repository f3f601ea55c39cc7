package redis

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/sluice-gw/sluice/internal/redistest"
	"github.com/sluice-gw/sluice/ratelimit"
)

// sentinelStore starts a master, a replica and one sentinel, and a Store
// in Sentinel mode on them whose client does not re-ask the sentinels
// periodically (so only the store's own checks can move it).
func sentinelStore(t *testing.T) (*redistest.Sentinel, *Store) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a sentinel setup")
	}
	sn := redistest.NewSentinel(t, redistest.SentinelOptions{})
	old := sentinelRefresh
	sentinelRefresh = 0
	t.Cleanup(func() { sentinelRefresh = old })
	s := mustNew(t, Options{Mode: Sentinel, Addrs: sn.SentinelAddrs(), MasterName: sn.MasterName(), Timeout: 2 * time.Second})
	return sn, s
}

// repoint promotes the replica by hand and makes the sentinel monitor it
// instead of the master, without any failover (so no +switch-master event
// reaches the client).
func repoint(t *testing.T, sn *redistest.Sentinel) {
	t.Helper()
	if _, err := sn.Replica.Do("REPLICAOF", "NO", "ONE"); err != nil {
		t.Fatal(err)
	}
	for _, sen := range sn.Sentinels {
		if _, err := sen.Do("SENTINEL", "REMOVE", sn.MasterName()); err != nil {
			t.Fatal(err)
		}
		if _, err := sen.Do("SENTINEL", "MONITOR", sn.MasterName(), "127.0.0.1", strconv.Itoa(sn.Replica.Port()), "1"); err != nil {
			t.Fatal(err)
		}
	}
	addr, err := sn.MasterAddr(context.Background())
	if err != nil || addr != sn.Replica.Addr() {
		t.Fatalf("sentinel names %q (%v), want the promoted replica %s", addr, err, sn.Replica.Addr())
	}
}

// untilDecided evaluates req until it succeeds or within passes, and
// returns how long it took and the errors by kind.
func untilDecided(t *testing.T, s *Store, req ratelimit.Request, within time.Duration) (time.Duration, map[string]int) {
	t.Helper()
	start := time.Now()
	kinds := map[string]int{}
	out := make([]ratelimit.Decision, 1)
	for {
		_, err := s.Evaluate(context.Background(), []ratelimit.Request{req}, out)
		if err == nil {
			return time.Since(start), kinds
		}
		kinds[ErrorKind(err)]++
		if time.Since(start) > within {
			t.Fatalf("no decision %v after the change (errors %v), last: %v", within, kinds, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func exists(t *testing.T, srv *redistest.Server, key string) bool {
	t.Helper()
	v, err := srv.Do("EXISTS", key)
	if err != nil {
		t.Fatal(err)
	}
	return v == int64(1)
}

func role(t *testing.T, srv *redistest.Server) string {
	t.Helper()
	v, err := srv.Do("ROLE")
	if err != nil {
		t.Fatal(err)
	}
	arr, _ := v.([]any)
	if len(arr) == 0 {
		t.Fatalf("ROLE: %v", v)
	}
	r, _ := arr[0].(string)
	return r
}

// TestSentinelStaleMasterRefused is C3 with a missed switch: the sentinels
// name another master, the old one still says role:master, and the store's
// connection to it breaks. rueidis would redial the same address (it checks
// ROLE only when it switches, and the old master passes ROLE anyway); the
// store's dial check asks the sentinels, refuses it, and re-resolves: no
// write lands on the stale master.
func TestSentinelStaleMasterRefused(t *testing.T) {
	sn, s := sentinelStore(t)
	p := ratelimit.MustPolicy(ratelimit.PolicyConfig{Algorithm: ratelimit.FixedWindow, Limit: 100, Window: time.Hour})
	evaluate(t, s, ratelimit.Request{Key: "before", Policy: p})
	repoint(t, sn)
	if r := role(t, sn.Master); r != "master" {
		t.Fatalf("old master has role %q, want master (stale)", r)
	}
	// Break the store's connection to the old master.
	if _, err := sn.Master.Do("CLIENT", "KILL", "TYPE", "normal"); err != nil {
		t.Fatal(err)
	}
	req := ratelimit.Request{Key: "after", Policy: p}
	took, kinds := untilDecided(t, s, req, 5*time.Second)
	key := appendKeys(nil, s.prefix, tag(req.Key), specOf(p))[0]
	t.Logf("decided on Redis %v after the connection kill (errors meanwhile %v); re-resolutions %d",
		took.Round(time.Millisecond), kinds, s.resolves.Load())
	if exists(t, sn.Master, key) {
		t.Errorf("key %s written to the stale master (role %s)", key, role(t, sn.Master))
	}
	if !exists(t, sn.Replica, key) {
		t.Errorf("key %s not on the master the sentinels name", key)
	}
	if s.resolves.Load() == 0 {
		t.Error("the store never re-resolved the master")
	}
	for i := range 20 {
		evaluate(t, s, ratelimit.Request{Key: fmt.Sprint("more-", i), Policy: p})
	}
	if n, err := sn.Master.Do("DBSIZE"); err != nil || n != int64(1) {
		t.Errorf("stale master DBSIZE %v (%v), want 1 (only the key written before)", n, err)
	}
}

// TestSentinelReadOnlyReresolves is C2 with a missed switch: the master is
// demoted to a replica (REPLICAOF) while the sentinels name the promoted
// one. Every write then gets READONLY; the store re-resolves the master on
// the first READONLY instead of waiting for an event that will not come.
func TestSentinelReadOnlyReresolves(t *testing.T) {
	sn, s := sentinelStore(t)
	p := ratelimit.MustPolicy(ratelimit.PolicyConfig{Algorithm: ratelimit.FixedWindow, Limit: 100, Window: time.Hour})
	evaluate(t, s, ratelimit.Request{Key: "before", Policy: p})
	repoint(t, sn)
	if _, err := sn.Master.Do("REPLICAOF", "127.0.0.1", strconv.Itoa(sn.Replica.Port())); err != nil {
		t.Fatal(err)
	}
	req := ratelimit.Request{Key: "after", Policy: p}
	took, kinds := untilDecided(t, s, req, 5*time.Second)
	t.Logf("decided on Redis %v after the demotion (errors meanwhile %v); re-resolutions %d",
		took.Round(time.Millisecond), kinds, s.resolves.Load())
	if s.resolves.Load() == 0 {
		t.Error("the store never re-resolved the master")
	}
	key := appendKeys(nil, s.prefix, tag(req.Key), specOf(p))[0]
	if !exists(t, sn.Replica, key) {
		t.Errorf("key %s not on the promoted master", key)
	}
	// With one re-resolution per second at most, READONLY stops within
	// about a second (plus a loaded machine's slack).
	if took > 3*time.Second {
		t.Errorf("READONLY for %v, want the master re-resolved within ~1 s", took)
	}
}
