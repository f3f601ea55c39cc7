package redis

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-gw/sluice/internal/redistest"
	"github.com/sluice-gw/sluice/ratelimit"
)

var memReport = flag.String("redis.memreport", "", "write the MEMORY USAGE table of TestMemoryUsage to this file")

// TestMemoryUsage measures MEMORY USAGE of each algorithm's keys after one
// admitted request (Redis TIME, default prefix length) and checks the goal
// of at most 100 bytes per token_bucket and gcra key while
// the state is integer-encoded (a token bucket below 920 tokens), and where
// that encoding ends. With -redis.memreport=FILE it writes the table there.
func TestMemoryUsage(t *testing.T) {
	c := standaloneRedis(t)
	s, err := NewFromClient(c, Options{Timeout: 5 * time.Second}) // prefix "sluice", as in production
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	rows := []struct {
		cfg  ratelimit.PolicyConfig
		goal int64  // 0: no goal
		enc  string // OBJECT ENCODING of every key; "": not checked
	}{
		{ratelimit.PolicyConfig{Algorithm: ratelimit.TokenBucket, Capacity: 10, Rate: 1}, 100, "int"},
		{ratelimit.PolicyConfig{Algorithm: ratelimit.TokenBucket, Capacity: 100, Rate: 10}, 100, "int"},
		// 919 tokens left: the largest count kept as an integer.
		{ratelimit.PolicyConfig{Algorithm: ratelimit.TokenBucket, Capacity: 920, Rate: 10}, 100, "int"},
		// 920 tokens left and more: the "count:time" string (doc.go).
		{ratelimit.PolicyConfig{Algorithm: ratelimit.TokenBucket, Capacity: 921, Rate: 10}, 0, "embstr"},
		{ratelimit.PolicyConfig{Algorithm: ratelimit.TokenBucket, Capacity: 10000, Rate: 100}, 0, "embstr"},
		{ratelimit.PolicyConfig{Algorithm: ratelimit.GCRA, Burst: 20, Rate: 10}, 100, "int"},
		{ratelimit.PolicyConfig{Algorithm: ratelimit.GCRA, Burst: 10000, Rate: 100}, 100, "int"},
		{ratelimit.PolicyConfig{Algorithm: ratelimit.LeakyBucket, Capacity: 10, Rate: 5}, 0, "int"},
		{ratelimit.PolicyConfig{Algorithm: ratelimit.FixedWindow, Limit: 100, Window: time.Hour}, 0, "int"},
		{ratelimit.PolicyConfig{Algorithm: ratelimit.SlidingWindow, Limit: 100, Window: time.Minute}, 0, ""},
		{ratelimit.PolicyConfig{Algorithm: ratelimit.SlidingLog, Limit: 10, Window: time.Minute}, 0, ""},
		{ratelimit.PolicyConfig{Name: "10 entries", Algorithm: ratelimit.SlidingLog, Limit: 10, Window: time.Minute}, 0, ""},
	}
	var table strings.Builder
	table.WriteString("| policy | key | MEMORY USAGE (bytes) | encoding |\n|---|---|---|---|\n")
	for i, row := range rows {
		p := ratelimit.MustPolicy(row.cfg)
		req := ratelimit.Request{Key: fmt.Sprintf("memory-%d-%d", time.Now().UnixNano(), i), Policy: p}
		evaluate(t, s, req)
		if p.Name() == "10 entries" {
			for range 9 {
				evaluate(t, s, req)
			}
		}
		keys := appendKeys(nil, s.prefix, tag(req.Key), specOf(p))
		t.Cleanup(func() { c.Do(ctx, c.B().Del().Key(keys...).Build()) })
		for _, k := range keys {
			n, err := c.Do(ctx, c.B().MemoryUsage().Key(k).Samples(0).Build()).AsInt64()
			if err != nil {
				t.Fatal(err)
			}
			enc, err := c.Do(ctx, c.B().ObjectEncoding().Key(k).Build()).ToString()
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&table, "| %v %s | `%s` | %d | %s |\n", p, p.Name(), k, n, enc)
			if row.goal > 0 && n > row.goal {
				t.Errorf("%v: MEMORY USAGE %s = %d bytes, goal ≤ %d", p, k, n, row.goal)
			}
			if row.enc != "" && enc != row.enc {
				t.Errorf("%v: OBJECT ENCODING %s = %s, want %s", p, k, enc, row.enc)
			}
		}
	}
	t.Log("\n" + table.String())
	if *memReport == "" {
		return
	}
	info, err := standalone.Info("")
	if err != nil {
		t.Fatal(err)
	}
	perKey := usedMemoryPerKey(t, ratelimit.MustPolicy(ratelimit.PolicyConfig{Algorithm: ratelimit.TokenBucket, Capacity: 10, Rate: 0.01}), 100_000)
	report := fmt.Sprintf(`# Redis memory per key (store/redis)

Measured %s with redis-server %s (%s), after one admitted request per key
(Redis TIME, default prefix "sluice", 22-character hash tag), by:

    go test ./store/redis -run TestMemoryUsage -v -redis.memreport=FILE

Goal: ≤ 100 bytes per token_bucket and gcra key.

%s
INFO used_memory grows by %.0f bytes per key when 10^5 token_bucket(capacity=10, rate=0.01/s)
keys are written to an empty server (key, value, both dictionaries, allocator
rounding): about %.0f MB for 10^6 keys.

Token bucket, leaky bucket and fixed window states are stored as one integer
(count+1 followed by the 16-digit µs time) while the count is below 920, so
Redis keeps them in its integer encoding; a larger count falls back to the
string "count:time" (the capacity 10000 row), about 30 bytes more. gcra keeps
its TAT as a plain integer. The sliding log needs a sorted set (one entry per
admitted request) plus a small counter key. MEMORY USAGE counts the key, its
value and its main-dictionary entry, not the expires-dictionary entry every key
with a TTL also has (INFO used_memory per key is somewhat higher).
`, time.Now().UTC().Format("2006-01-02 15:04 MST"), info["redis_version"], info["mem_allocator"], table.String(), perKey, perKey) // bytes per key = MB per 10^6 keys
	if err := os.WriteFile(*memReport, []byte(report), 0o644); err != nil {
		t.Fatal(err)
	}
}

// usedMemoryPerKey writes n keys of p on a fresh server and returns the
// growth of INFO used_memory per key.
func usedMemoryPerKey(t *testing.T, p *ratelimit.Policy, n int) float64 {
	t.Helper()
	srv := redistest.NewServer(t, redistest.ServerOptions{})
	s := mustNew(t, Options{Addrs: []string{srv.Addr()}})
	used := func() float64 {
		info, err := srv.Info("memory")
		if err != nil {
			t.Fatal(err)
		}
		v, err := strconv.ParseFloat(info["used_memory"], 64)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	vals := make([]string, n)
	for i := range vals {
		vals[i] = "user-" + strconv.Itoa(i)
	}
	if err := s.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
	before := used()
	if got := evaluateAll(t, s, p, vals); got != n {
		t.Fatalf("%d of %d admitted", got, n)
	}
	return (used() - before) / float64(n)
}
