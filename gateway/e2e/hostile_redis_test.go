package e2e

import (
	"fmt"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-gw/sluice/internal/redistest"
)

// Hostile input against the Redis store: rows E3, F3 and D6 of the fault
// scenarios (docs/reliability.md).

// keyStats runs on one Redis node and returns, for the keys matching
// ARGV[1], how many there are, how many have no TTL, and up to 20 of them.
const keyStatsScript = `
local keys = redis.call('KEYS', ARGV[1])
local noTTL, sample = 0, {}
for i, k in ipairs(keys) do
  if redis.call('PTTL', k) == -1 then noTTL = noTTL + 1 end
  if i <= 20 then sample[#sample + 1] = k end
end
return {#keys, noTTL, sample}`

// redisKeyStats returns the number of keys under prefix on srv, how many
// of them have no TTL, and a sample of their names.
func redisKeyStats(t *testing.T, srv *redistest.Server, prefix string) (n, noTTL int64, sample []string) {
	t.Helper()
	v, err := srv.Do("EVAL", keyStatsScript, 0, prefix+":*")
	if err != nil {
		t.Fatalf("counting keys on %s: %v", srv.Addr(), err)
	}
	a := v.([]any)
	for _, k := range a[2].([]any) {
		sample = append(sample, k.(string))
	}
	return a[0].(int64), a[1].(int64), sample
}

// hammer sends n GET requests to url(i) with header(i), 16 at a time, and
// returns how many got each status.
func hammer(t *testing.T, n int, url func(i int) string, header func(i int) []string) map[int]int {
	t.Helper()
	var next atomic.Int64
	var mu sync.Mutex
	codes := map[int]int{}
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			local := map[int]int{}
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				local[get(t, url(i), header(i)...).code]++
			}
			mu.Lock()
			for c, k := range local {
				codes[c] += k
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	return codes
}

// The tests below count the Redis keys the gateway wrote, so every decision
// must reach Redis: their store timeout (5 s) is far above any call's time
// on a loaded machine, where a short one would send some decisions to the
// local fallback, which writes no key.

// TestHostileRedisKeysExpire is row E3, scaled to run in seconds: many
// distinct keys through the gateway on every algorithm, with limits whose
// state lasts at most 2 s. Every key the gateway wrote has a TTL, and all of
// them are gone within the longest TTL plus a few seconds once the load
// stops. (10^6 keys and used_memory are measured by the Redis store's own
// tests and bench; the TTL property does not depend on the count.)
func TestHostileRedisKeysExpire(t *testing.T) {
	t.Parallel()
	redistest.Check(t, standaloneErr)
	const perRoute = 400
	up := newHostileUpstream(t)
	pfx := prefix(t) + "-e3"
	p := start(t, fmt.Sprintf("store: {type: redis, prefix: %s, timeout: 5s, redis: {addrs: [%q]}}\n", pfx, standalone.Addr())+header+`
policies:
  token_bucket:   {algorithm: token_bucket,   capacity: 2, rate: 1}
  leaky_bucket:   {algorithm: leaky_bucket,   capacity: 2, rate: 1}
  fixed_window:   {algorithm: fixed_window,   limit: 2, window: 2s}
  sliding_log:    {algorithm: sliding_log,    limit: 2, window: 2s}
  sliding_window: {algorithm: sliding_window, limit: 2, window: 1s}
  gcra:           {algorithm: gcra,           rate: 1, burst: 2}
routes:
`+routesFor(up.URL, algorithms...))
	began := time.Now()
	codes := hammer(t, perRoute*len(algorithms),
		func(i int) string { return p.base + "/" + algorithms[i%len(algorithms)] + "/x" },
		func(i int) []string { return []string{"X-User-Id", fmt.Sprintf("churn-%d", i/len(algorithms))} })
	load := time.Since(began)
	if codes[200] != perRoute*len(algorithms) {
		t.Fatalf("statuses %v, want %d × 200 (each key asked once)", codes, perRoute*len(algorithms))
	}
	n, noTTL, sample := redisKeyStats(t, standalone, pfx)
	t.Logf("E3: %d requests in %v; right after: %d keys under %s:*, %d without TTL; e.g. %q", perRoute*len(algorithms), load, n, pfx, noTTL, sample[:min(3, len(sample))])
	if n == 0 || noTTL != 0 {
		t.Errorf("after the load: %d keys, %d of them without a TTL; want some keys, every one with a TTL", n, noTTL)
	}
	tag := regexp.MustCompile(`^` + regexp.QuoteMeta(pfx) + `:\{[A-Za-z0-9_-]{22}\}:(tb|lb|fw|sl|sl:n|sw|gc)$`)
	for _, k := range sample {
		if !tag.MatchString(k) {
			t.Errorf("Redis key %q is not <prefix>:{<22-char tag>}:<alg>", k)
		}
	}
	// The longest state here lives 2 s (a 1 s sliding window keeps the
	// previous window); allow 10 s beyond that, as the row does.
	stopped := time.Now()
	for {
		n, _, _ := redisKeyStats(t, standalone, pfx)
		if n == 0 {
			break
		}
		if time.Since(stopped) > 12*time.Second {
			t.Fatalf("%d keys still in Redis %v after the load stopped, want 0 within 2 s + 10 s", n, time.Since(stopped))
		}
		time.Sleep(50 * time.Millisecond) // polling Redis, bounded above
	}
	t.Logf("E3: all keys gone %v after the load stopped (longest TTL 2 s)", time.Since(stopped).Round(10*time.Millisecond))
}

// TestHostileRedisKeyValues is row F3 on Redis (standalone): odd key
// values are isolated and deterministic, every Redis key written has the
// fixed <prefix>:{<hash>}:<alg> shape whatever the value held, and no store
// error is counted.
func TestHostileRedisKeyValues(t *testing.T) {
	t.Parallel()
	redistest.Check(t, standaloneErr)
	up := newHostileUpstream(t)
	pfx := prefix(t) + "-f3"
	p := start(t, fmt.Sprintf("store: {type: redis, prefix: %s, timeout: 5s, redis: {addrs: [%q]}}\n", pfx, standalone.Addr())+header+`
policies:
  two: {algorithm: sliding_log, limit: 2, window: 1h}
routes:
  - id: api
    match: {path: /api/**}
    upstream: `+up.URL+`
    limits: [{policy: two, key: header:X-User-Id}]
`)
	checkHostileKeyValues(t, p)
	v, err := standalone.Do("KEYS", pfx+":*")
	if err != nil {
		t.Fatal(err)
	}
	shape := regexp.MustCompile(`^` + regexp.QuoteMeta(pfx) + `:\{[A-Za-z0-9_-]{22}\}:sl(:n)?$`)
	keys := v.([]any)
	for _, k := range keys {
		if !shape.MatchString(k.(string)) {
			t.Errorf("Redis key %q: a key value leaked into the key's shape", k)
		}
	}
	// Two keys (log and sequence) per distinct value, the 8 KiB ones included.
	if len(keys) != 2*len(hostileValues) {
		t.Errorf("%d Redis keys for %d distinct values, want %d", len(keys), len(hostileValues), 2*len(hostileValues))
	}
}

// TestHostileBracesDoNotSteerSlots is row D6 end to end: 10^4 distinct key
// values full of '{', '}' and ':' sent through the gateway to a 3-master
// cluster. The values never decide the hash slot, so each master holds 25-42%
// of the keys, and no request fails (no CROSSSLOT). With -short it sends 2,000
// values instead.
func TestHostileBracesDoNotSteerSlots(t *testing.T) {
	t.Parallel()
	redistest.Check(t, clusterErr)
	n := 10_000
	if testing.Short() {
		n = 2_000
	}
	up := newHostileUpstream(t)
	pfx := prefix(t) + "-d6"
	p := start(t, fmt.Sprintf("store: {type: redis, prefix: %s, timeout: 5s, redis: {mode: cluster, addrs: [%s]}}\n",
		pfx, `"`+strings.Join(cluster.Addrs(), `", "`)+`"`)+header+`
policies:
  day: {algorithm: fixed_window, limit: 5, window: 24h}
routes:
  - id: api
    match: {path: /api/**}
    upstream: `+up.URL+`
    limits: [{policy: day, key: [header:X-A, header:X-B]}]
`)
	// All values would share the slot of "x" if braces were honoured.
	forms := []string{"{x}%d", "{x}:%d", "%d{x}", "}{x}%d{", "{}{x}%d", "{x}}%d{{", "a:{x}:%d:}"}
	began := time.Now()
	codes := hammer(t, n,
		func(int) string { return p.base + "/api/x" },
		func(i int) []string {
			return []string{"X-A", fmt.Sprintf(forms[i%len(forms)], i), "X-B", "{x}"}
		})
	took := time.Since(began)
	if codes[200] != n {
		t.Fatalf("statuses %v, want %d × 200", codes, n)
	}
	var counts []int64
	var total int64
	for _, m := range cluster.Masters {
		c, noTTL, _ := redisKeyStats(t, m, pfx)
		if noTTL != 0 {
			t.Errorf("master %s: %d keys without a TTL", m.Addr(), noTTL)
		}
		counts = append(counts, c)
		total += c
	}
	var shares []string
	for _, c := range counts {
		shares = append(shares, fmt.Sprintf("%.1f%%", 100*float64(c)/float64(total)))
	}
	t.Logf("D6: %d hostile values in %v; keys per master %v (%s)", n, took.Round(time.Millisecond), counts, strings.Join(shares, ", "))
	if total != int64(n) {
		t.Errorf("%d keys in the cluster, want %d (one per distinct value)", total, n)
	}
	for i, c := range counts {
		if f := float64(c) / float64(total); f < 0.25 || f > 0.42 {
			t.Errorf("master %d holds %.1f%% of the keys, want 25-42%%: client braces steered the slot", i, 100*f)
		}
	}
	if got := p.metric(`sluice_store_errors_total{kind="other"}`); got != "" {
		t.Errorf("store errors (CROSSSLOT?): %s", got)
	}
}
