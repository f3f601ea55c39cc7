package redis

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-gw/sluice/internal/redistest"
	"github.com/sluice-gw/sluice/ratelimit"
)

// TestRenewRuns: Renew's leases are split into renew.lua runs of at most
// renewChunk leases, and on Cluster a run never spans two hash slots.
func TestRenewRuns(t *testing.T) {
	s, err := newStore(Options{Prefix: "p"})
	if err != nil {
		t.Fatal(err)
	}
	p := ratelimit.MustPolicy(ratelimit.PolicyConfig{Name: "cc", Algorithm: ratelimit.Concurrency, Limit: 1000, LeaseTTL: time.Second})
	var reqs []ratelimit.Request
	for i := range 250 {
		reqs = append(reqs, ratelimit.Request{Key: "one", Policy: p, Lease: strconv.Itoa(i)})
	}
	for i := range 30 {
		reqs = append(reqs, ratelimit.Request{Key: fmt.Sprint("user", i), Policy: p, Lease: "x"})
	}
	for _, cluster := range []bool{false, true} {
		runs := renewRuns(s, reqs, cluster)
		leases := 0
		for i, r := range runs {
			leases += len(r.keys)
			if len(r.keys) > renewChunk || len(r.args) != 1+2*len(r.keys) {
				t.Errorf("cluster %v: run %d has %d keys and %d args, want at most %d keys and 1+2 args a key", cluster, i, len(r.keys), len(r.args), renewChunk)
			}
			for _, k := range r.keys {
				if cluster && keySlot(k) != keySlot(r.keys[0]) {
					t.Errorf("cluster: run %d spans slots %d and %d", i, keySlot(r.keys[0]), keySlot(k))
				}
			}
		}
		if leases != len(reqs) {
			t.Errorf("cluster %v: the runs carry %d leases, want %d", cluster, leases, len(reqs))
		}
		if !cluster && len(runs) != 3 {
			t.Errorf("standalone: %d runs for %d leases, want 3 (at most %d each)", len(runs), len(reqs), renewChunk)
		}
	}
}

// TestRenewChunkTime: one renew.lua run of renewChunk leases
// stays under a millisecond inside Redis (INFO commandstats), whether the
// leases share one key or each has its own, and whether they are renewed
// or added back. The best of a few runs is taken: a loaded machine may
// slow any one.
func TestRenewChunkTime(t *testing.T) {
	srv := redistest.NewServer(t, redistest.ServerOptions{})
	s, err := New(Options{Addrs: []string{srv.Addr()}, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	p := ratelimit.MustPolicy(ratelimit.PolicyConfig{Name: "cc", Algorithm: ratelimit.Concurrency, Limit: 1000, LeaseTTL: time.Second})
	ctx := context.Background()
	for _, shape := range []string{"one key", "a key each"} {
		var reqs []ratelimit.Request
		for i := range renewChunk {
			key := "k"
			if shape == "a key each" {
				key = strconv.Itoa(i)
			}
			reqs = append(reqs, ratelimit.Request{Key: key, Policy: p, Lease: strconv.Itoa(i)})
		}
		if _, err := s.Renew(ctx, reqs); err != nil { // loads the script, adds the leases back
			t.Fatal(err)
		}
		best := time.Hour
		for try := range 6 {
			if try%2 == 0 {
				if err := s.Release(ctx, reqs); err != nil { // the next run adds them back
					t.Fatal(err)
				}
			}
			before := evalshaMicros(t, srv)
			if _, err := s.Renew(ctx, reqs); err != nil {
				t.Fatal(err)
			}
			best = min(best, time.Duration(evalshaMicros(t, srv)-before)*time.Microsecond)
		}
		if best >= time.Millisecond {
			t.Errorf("%s: a renew.lua run of %d leases took at best %v inside Redis, want under 1ms", shape, renewChunk, best)
		}
		t.Logf("%s: %d leases in %v", shape, renewChunk, best)
	}
}

// evalshaMicros returns the µs Redis has spent in EVALSHA.
func evalshaMicros(t *testing.T, srv *redistest.Server) int64 {
	t.Helper()
	info, err := srv.Info("commandstats")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range strings.Split(info["cmdstat_evalsha"], ",") {
		if v, ok := strings.CutPrefix(f, "usec="); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("INFO commandstats has no EVALSHA usec: %q", info["cmdstat_evalsha"])
	return 0
}
