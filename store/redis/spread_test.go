package redis

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/redis/rueidis"

	"github.com/sluice-gw/sluice/ratelimit"
)

// hostileValues returns n distinct key values made of the characters Redis
// and naive key schemes treat specially: braces, colons, NUL, and pieces of
// other keys.
func hostileValues(n int) []string {
	pieces := []string{"{", "}", ":", "{}", "}{", "{user}", "a", "b", "1", "\x00", "sluice", ":{", "}:"}
	vals := []string{"", "{", "}", "{}", "}{", ":", "::", "{a}", "{a}b", "a{b}", "{}{a}", "a:b", "a:{b}:c"}
	seen := make(map[string]bool, n)
	for _, v := range vals {
		seen[v] = true
	}
	rng := rand.New(rand.NewPCG(3, 3))
	for len(vals) < n {
		var b strings.Builder
		for range 1 + rng.IntN(10) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		if v := b.String(); !seen[v] {
			seen[v] = true
			vals = append(vals, v)
		}
	}
	return vals
}

// TestClusterSpread: 10^4 user keys and 10^4 hostile values land on every
// master of the 3-master cluster, each master holding 25–42% of them, and no
// two values share state: with a limit of 1 each admits exactly once.
// docs/reliability.md row D6; docs/semantics.md §4.3 for the state keys.
func TestClusterSpread(t *testing.T) {
	c := clusterRedis(t)
	users := make([]string, 10_000)
	for i := range users {
		users[i] = "user-" + strconv.Itoa(i)
	}
	p := ratelimit.MustPolicy(ratelimit.PolicyConfig{Name: "once", Algorithm: ratelimit.FixedWindow, Limit: 1, Window: ratelimit.MaxWindow})
	for _, tc := range []struct {
		name string
		vals []string
	}{{"users", users}, {"hostile", hostileValues(10_000)}} {
		t.Run(tc.name, func(t *testing.T) {
			s := newTestStore(t, c, nil)
			// Every value admits once (no shared state), then never again.
			for round, want := range []int{len(tc.vals), 0} {
				if got := evaluateAll(t, s, p, tc.vals); got != want {
					t.Fatalf("round %d: %d of %d values admitted with limit 1, want %d", round, got, len(tc.vals), want)
				}
			}
			// Count the keys each master really holds.
			counts := map[string]int{}
			total := 0
			for addr, node := range c.Nodes() {
				n := scanCount(t, node, s.prefix+":*")
				counts[addr] = n
				total += n
			}
			if total != len(tc.vals) {
				t.Fatalf("masters hold %d keys, want %d", total, len(tc.vals))
			}
			if len(counts) != 3 {
				t.Fatalf("keys on %d nodes, want 3 masters", len(counts))
			}
			for addr, n := range counts {
				share := float64(n) / float64(total)
				t.Logf("%s holds %d keys (%.1f%%)", addr, n, 100*share)
				if share < 0.25 || share > 0.42 {
					t.Errorf("%s holds %.1f%% of the keys, want 25–42%%", addr, 100*share)
				}
			}
		})
	}
}

// evaluateAll evaluates one request per value concurrently and returns how
// many were admitted.
func evaluateAll(t *testing.T, s *Store, p *ratelimit.Policy, vals []string) int {
	t.Helper()
	var admitted atomic.Int64
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for range 32 {
		wg.Go(func() {
			out := make([]ratelimit.Decision, 1)
			for {
				i := next.Add(1) - 1
				if i >= int64(len(vals)) {
					return
				}
				ok, err := s.Evaluate(context.Background(), []ratelimit.Request{{Key: vals[i], Policy: p}}, out)
				if err != nil {
					errs <- fmt.Errorf("value %q: %w", vals[i], err)
					return
				}
				if ok {
					admitted.Add(1)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return int(admitted.Load())
}

// scanCount counts the keys matching pattern on one node.
func scanCount(t *testing.T, node rueidis.Client, pattern string) int {
	t.Helper()
	n := 0
	var cursor uint64
	for {
		e, err := node.Do(context.Background(), node.B().Scan().Cursor(cursor).Match(pattern).Count(1000).Build()).AsScanEntry()
		if err != nil {
			t.Fatal(err)
		}
		n += len(e.Elements)
		if cursor = e.Cursor; cursor == 0 {
			return n
		}
	}
}
