package redis

import (
	"strings"
	"testing"
	"time"

	"github.com/sluice-gw/sluice/internal/redistest"
	"github.com/sluice-gw/sluice/ratelimit"
)

// TestEvictionPolicyWarning: an evicted key is a fresh budget, so a Redis
// whose maxmemory-policy may evict the store's keys gets one WARN when the
// store connects; noeviction gets none, and a user that may not run CONFIG
// gets neither a warning nor an error.
func TestEvictionPolicyWarning(t *testing.T) {
	cases := []struct {
		name  string
		args  []string
		user  string
		warns int
	}{
		{"allkeys-lru", []string{"--maxmemory-policy", "allkeys-lru"}, "", 1},
		{"volatile-ttl", []string{"--maxmemory-policy", "volatile-ttl"}, "", 1},
		{"noeviction", []string{"--maxmemory-policy", "noeviction"}, "", 0},
		// The least-privilege user docs/operations.md recommends: keys under
		// the prefix only, no @dangerous command (CONFIG among them).
		{"no CONFIG for the user", []string{"--user", "app", "on", ">apw", "~acl:*", "+@all", "-@dangerous", "--maxmemory-policy", "allkeys-lru"}, "app", 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := redistest.NewServer(t, redistest.ServerOptions{Args: tc.args})
			var logs logBuffer
			opts := Options{Addrs: []string{srv.Addr()}, Logger: logs.logger()}
			if tc.user != "" {
				opts.Username, opts.Password, opts.Prefix = tc.user, "apw", "acl"
			}
			s := mustNew(t, opts)
			p := ratelimit.MustPolicy(ratelimit.PolicyConfig{Algorithm: ratelimit.FixedWindow, Limit: 100, Window: time.Hour})
			for range 3 {
				evaluate(t, s, ratelimit.Request{Key: "k", Policy: p})
			}
			if w := logs.warnings("maxmemory-policy"); len(w) != tc.warns {
				t.Errorf("%d warnings about maxmemory-policy, want %d:\n%s", len(w), tc.warns, logs.String())
			}
			if tc.user != "" && !strings.Contains(logs.String(), "NOPERM") {
				t.Errorf("the check did not meet NOPERM:\n%s", logs.String())
			}
			if strings.Contains(logs.String(), "level=ERROR") {
				t.Errorf("errors logged:\n%s", logs.String())
			}
		})
	}
}
