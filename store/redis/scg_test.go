package redis

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluice-gw/sluice/ratelimit"
	"github.com/sluice-gw/sluice/ratelimit/kit"
)

// scgClient is a second client of the same Redis that decides the way
// Spring Cloud Gateway's RedisRateLimiter does, as its reference
// documentation and docs/migrating-from-scg.md describe it, independently of
// the store: for key resolver value id it keeps the tokens left in
// request_rate_limiter.{id}.tokens and the whole second of its last call in
// request_rate_limiter.{id}.timestamp (SCG up to 4.1.x), or, with a
// routeID, in request_rate_limiter.{routeID.id}.tokens and .timestamp (SCG
// 4.2.0 and later, which name the route in the key); the time is the seconds of Redis
// TIME; a missing tokens key is a full bucket and a missing timestamp is 0;
// the bucket gains rate tokens per elapsed second up to burst; a request
// of `requested` tokens is allowed when that many are there, and only then
// takes them; every call (allowed or not) writes both keys back with a TTL
// of floor(2·burst/rate) seconds. The read-modify-write is one optimistic
// transaction (WATCH, MULTI, EXEC), retried when another client wrote the
// keys meanwhile.
type scgClient struct {
	c                      rueidis.Client
	rate, burst, requested int64
	// routeID is the SCG route's id; empty for SCG up to 4.1.x, whose keys
	// do not name it.
	routeID string
}

// keys returns SCG's two keys for key resolver value id.
func (s scgClient) keys(id string) (tokens, stamp string) {
	if s.routeID != "" {
		id = s.routeID + "." + id
	}
	return "request_rate_limiter.{" + id + "}.tokens", "request_rate_limiter.{" + id + "}.timestamp"
}

// isAllowed runs one SCG decision for id; it returns whether it was
// allowed, the tokens left, and the second it was decided at.
func (s scgClient) isAllowed(ctx context.Context, id string) (allowed bool, left, sec int64, err error) {
	tokensKey, stampKey := s.keys(id)
	ttl := 2 * s.burst / s.rate
	for {
		committed := false
		err = s.c.Dedicated(func(dc rueidis.DedicatedClient) error {
			if err := dc.Do(ctx, dc.B().Watch().Key(tokensKey, stampKey).Build()).Error(); err != nil {
				return err
			}
			tm, err := dc.Do(ctx, dc.B().Time().Build()).AsStrSlice()
			if err != nil {
				return err
			}
			if sec, err = strconv.ParseInt(tm[0], 10, 64); err != nil {
				return err
			}
			vals, err := dc.Do(ctx, dc.B().Mget().Key(tokensKey, stampKey).Build()).ToArray()
			if err != nil {
				return err
			}
			tokens, stamp := s.burst, int64(0)
			if v, err := vals[0].AsInt64(); err == nil {
				tokens = v
			}
			if v, err := vals[1].AsInt64(); err == nil {
				stamp = v
			}
			filled := min(s.burst, tokens+max(0, sec-stamp)*s.rate)
			allowed, left = filled >= s.requested, filled
			if allowed {
				left = filled - s.requested
			}
			res := dc.DoMulti(ctx,
				dc.B().Multi().Build(),
				dc.B().Setex().Key(tokensKey).Seconds(ttl).Value(strconv.FormatInt(left, 10)).Build(),
				dc.B().Setex().Key(stampKey).Seconds(ttl).Value(strconv.FormatInt(sec, 10)).Build(),
				dc.B().Exec().Build())
			exec := res[len(res)-1]
			if rueidis.IsRedisNil(exec.Error()) {
				return nil // aborted: a key changed after WATCH
			}
			if err := exec.Error(); err != nil {
				return err
			}
			committed = true
			return nil
		})
		if err != nil || committed {
			return allowed, left, sec, err
		}
	}
}

// scgPolicy returns a compat scg-4.1 policy, whose Request.Key is
// ratelimit.SCGKey (the arithmetic and the store's keys do not depend on
// the layout: Request.Key names them).
func scgPolicy(t testing.TB, burst int64, rate float64) *ratelimit.Policy {
	t.Helper()
	p, err := ratelimit.NewPolicy(ratelimit.PolicyConfig{Name: "scg", Algorithm: ratelimit.TokenBucket, Capacity: burst, Rate: rate, Compat: ratelimit.CompatSCG41})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// redisTime returns Redis TIME's seconds.
func redisTime(t *testing.T, c rueidis.Client) int64 {
	t.Helper()
	tm, err := c.Do(context.Background(), c.B().Time().Build()).AsStrSlice()
	if err != nil {
		t.Fatal(err)
	}
	sec, err := strconv.ParseInt(tm[0], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return sec
}

func getInt(t *testing.T, c rueidis.Client, key string) int64 {
	t.Helper()
	v, err := c.Do(context.Background(), c.B().Get().Key(key).Build()).AsInt64()
	if err != nil {
		t.Fatalf("GET %s: %v", key, err)
	}
	return v
}

// TestSCGCompatArithmetic checks the store's compat scg step at chosen
// times against state written the way SCG writes it: the refill by whole
// seconds, the keys, their values and TTLs, and the decision's fields.
func TestSCGCompatArithmetic(t *testing.T) {
	c := standaloneRedis(t)
	ctx := context.Background()
	base := time.Unix(1_800_000_000, 0)
	clock := kit.NewManualClock(base.Add(300 * time.Millisecond))
	s := newTestStore(t, c, clock)
	p := scgPolicy(t, 10, 2) // TTL floor(2·10/2) = 10 s
	id := "arith-" + testPrefix()
	key := ratelimit.SCGKey(id)
	tokensKey, stampKey := "request_rate_limiter.{"+id+"}.tokens", "request_rate_limiter.{"+id+"}.timestamp"
	if key+".tokens" != tokensKey {
		t.Fatalf("SCGKey(%q) = %q", id, key)
	}
	// SCG left 2 tokens three whole seconds ago.
	for k, v := range map[string]int64{tokensKey: 2, stampKey: base.Unix() - 3} {
		if err := c.Do(ctx, c.B().Setex().Key(k).Seconds(10).Value(strconv.FormatInt(v, 10)).Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
	req := ratelimit.Request{Key: key, Policy: p, Cost: 3}
	ok, out := evaluate(t, s, req)
	// filled = min(10, 2 + 3·2) = 8; 8 ≥ 3: allowed, 5 left.
	if !ok || !out[0].Allowed || out[0].Remaining != 5 {
		t.Fatalf("first: ok=%v %+v, want allowed with 5 left", ok, out[0])
	}
	// Full again at the whole second base+3 (5 + 3·2 ≥ 10): 2.7 s from now.
	if want := 2700 * time.Millisecond; out[0].Reset != want {
		t.Errorf("reset %v, want %v", out[0].Reset, want)
	}
	if got := getInt(t, c, tokensKey); got != 5 {
		t.Errorf("tokens key %d, want 5", got)
	}
	if got := getInt(t, c, stampKey); got != base.Unix() {
		t.Errorf("timestamp key %d, want %d", got, base.Unix())
	}
	for _, k := range []string{tokensKey, stampKey} {
		ttl, err := c.Do(ctx, c.B().Ttl().Key(k).Build()).AsInt64()
		if err != nil || ttl != 10 {
			t.Errorf("TTL %s = %d (%v), want 10", k, ttl, err)
		}
	}
	// Same second: 5 left, cost 3 twice: the second is denied and writes nothing.
	clock.Set(base.Add(900 * time.Millisecond))
	if ok, out = evaluate(t, s, req); !ok || out[0].Remaining != 2 {
		t.Fatalf("second: ok=%v %+v, want allowed with 2 left", ok, out[0])
	}
	if ok, out = evaluate(t, s, req); ok || out[0].Allowed || out[0].Remaining != 2 {
		t.Fatalf("third: ok=%v %+v, want denied with 2 left", ok, out[0])
	}
	// 3 tokens at the next whole second: 0.1 s from now.
	if want := 100 * time.Millisecond; out[0].RetryAfter != want {
		t.Errorf("retry after %v, want %v", out[0].RetryAfter, want)
	}
	if got := getInt(t, c, tokensKey); got != 2 {
		t.Errorf("tokens key %d after a denial, want 2", got)
	}
	// The next second refills 2: 4 ≥ 3.
	clock.Set(base.Add(time.Second))
	if ok, out = evaluate(t, s, req); !ok || out[0].Remaining != 1 {
		t.Fatalf("fourth: ok=%v %+v, want allowed with 1 left", ok, out[0])
	}
	// Peek and Reset work on the same keys.
	pk := peek(t, s, ratelimit.Request{Key: key, Policy: p, Cost: 1})
	if !pk[0].Allowed || pk[0].Remaining != 1 {
		t.Errorf("peek %+v, want allowed with 1 left", pk[0])
	}
	if err := s.Reset(ctx, []ratelimit.Request{{Key: key, Policy: p}}); err != nil {
		t.Fatal(err)
	}
	if n, err := c.Do(ctx, c.B().Exists().Key(tokensKey, stampKey).Build()).AsInt64(); err != nil || n != 0 {
		t.Errorf("after Reset %d keys exist (%v), want 0", n, err)
	}
}

// scgLayout is one of SCG's key layouts: the compat value that selects it
// and the route id SCG's keys carry (empty up to SCG 4.1.x).
type scgLayout struct {
	compat  ratelimit.Compat
	routeID string
}

// scgLayouts are SCG's key layouts before and since 4.2.0.
var scgLayouts = []scgLayout{{ratelimit.CompatSCG41, ""}, {ratelimit.CompatSCG, "orders"}}

// key returns the store's Request.Key of key resolver value id.
func (l scgLayout) key(id string) string {
	if l.compat == ratelimit.CompatSCG {
		return ratelimit.SCGRouteKey(l.routeID, id)
	}
	return ratelimit.SCGKey(id)
}

func (l scgLayout) policy(t testing.TB, burst int64, rate float64) *ratelimit.Policy {
	t.Helper()
	p, err := ratelimit.NewPolicy(ratelimit.PolicyConfig{Name: "scg", Algorithm: ratelimit.TokenBucket, Capacity: burst, Rate: rate, Compat: l.compat})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestSCGCompatSharedBudget runs SCG's algorithm (scgClient) and the store
// on one key of a real Redis, in each of SCG's key layouts: each side sees
// what the other consumed, and together, interleaved or concurrent, they
// never admit more than burst + rate × elapsed whole seconds.
func TestSCGCompatSharedBudget(t *testing.T) {
	for _, lay := range scgLayouts {
		t.Run(string(lay.compat), func(t *testing.T) { testSCGSharedBudget(t, lay) })
	}
}

func testSCGSharedBudget(t *testing.T, lay scgLayout) {
	c := standaloneRedis(t)
	ctx := context.Background()
	s := newTestStore(t, c, nil) // Redis TIME, as SCG
	evalOne := func(id string, p *ratelimit.Policy, cost int64) (bool, ratelimit.Decision) {
		out := make([]ratelimit.Decision, 1)
		ok, err := s.Evaluate(ctx, []ratelimit.Request{{Key: lay.key(id), Policy: p, Cost: cost}}, out)
		if err != nil {
			t.Fatal(err)
		}
		return ok, out[0]
	}

	t.Run("sees", func(t *testing.T) {
		// rate 1 per second: a few seconds of a slow machine refill a few tokens at most.
		p := lay.policy(t, 50, 1)
		id := "sees-" + testPrefix()
		scg := scgClient{c: c, routeID: lay.routeID, rate: 1, burst: 50, requested: 50}
		if ok, left, _, err := scg.isAllowed(ctx, id); err != nil || !ok || left != 0 {
			t.Fatalf("SCG takes the whole bucket: ok=%v left=%d err=%v", ok, left, err)
		}
		if ok, d := evalOne(id, p, 10); ok || d.Remaining >= 10 {
			t.Fatalf("sluice after SCG emptied the bucket: ok=%v %+v, want denied", ok, d)
		}
		id2 := "sees2-" + testPrefix()
		if ok, d := evalOne(id2, p, 50); !ok || d.Remaining != 0 {
			t.Fatalf("sluice takes the whole bucket: ok=%v %+v", ok, d)
		}
		scg.requested = 10
		if ok, left, _, err := scg.isAllowed(ctx, id2); err != nil || ok || left >= 10 {
			t.Fatalf("SCG after sluice emptied the bucket: ok=%v left=%d err=%v, want denied", ok, left, err)
		}
		// Partial use: SCG takes 7 of a fresh bucket, sluice then has 43
		// (plus a token per second that went by) and takes 1.
		id3 := "sees3-" + testPrefix()
		scg.requested = 7
		_, _, sec0, err := scg.isAllowed(ctx, id3)
		if err != nil {
			t.Fatal(err)
		}
		_, d := evalOne(id3, p, 1)
		elapsed := redisTime(t, c) - sec0
		if d.Remaining < 42 || d.Remaining > 42+elapsed {
			t.Fatalf("sluice after SCG took 7 of 50: remaining %d, want 42..%d", d.Remaining, 42+elapsed)
		}
		scg.requested = 1
		_, left, _, err := scg.isAllowed(ctx, id3)
		elapsed = redisTime(t, c) - sec0
		if err != nil || left < 41 || left > 41+elapsed {
			t.Fatalf("SCG after both: left %d (%v), want 41..%d", left, err, 41+elapsed)
		}
	})

	const burst, rate = 4, 3
	p := lay.policy(t, burst, rate)

	t.Run("interleaved", func(t *testing.T) {
		id := "inter-" + testPrefix()
		scg := scgClient{c: c, routeID: lay.routeID, rate: rate, burst: burst, requested: 1}
		start := redisTime(t, c)
		var bySCG, bySluice int
		// rounds counts the rounds (an SCG call, then a sluice call) by
		// the Redis second of their SCG call.
		rounds := map[int64]int{}
		first, last := int64(-1), int64(-1)
		deadline := time.Now().Add(3 * time.Second)
		for time.Now().Before(deadline) {
			ok, _, sec, err := scg.isAllowed(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if first < 0 {
				first = sec
			}
			last = sec
			rounds[sec]++
			if ok {
				bySCG++
			}
			if ok, _ := evalOne(id, p, 1); ok {
				bySluice++
			}
			time.Sleep(20 * time.Millisecond) // pacing only: a few dozen calls a second
		}
		end := redisTime(t, c)
		total := bySCG + bySluice
		if bound := burst + rate*int(end-start); total > bound {
			t.Fatalf("admitted %d (SCG %d, sluice %d) in seconds %d..%d, above burst + rate×elapsed = %d", total, bySCG, bySluice, start, end, bound)
		}
		// What the two sides must have admitted between them: the burst
		// and each second's refill that found the bucket empty and was
		// taken within its second. Three rounds (five calls at least, the
		// last one's sluice call may fall in the next second) take all a
		// second holds, at most burst tokens; a second the machine stalled
		// in can leave tokens over, and the refill after it is capped at
		// the burst, so its refill is not counted.
		low := 0
		if rounds[first] >= 3 {
			low = burst
		}
		for k := first + 1; k < last; k++ {
			if rounds[k-1] >= 3 && rounds[k] >= 3 {
				low += rate
			}
		}
		if total < low {
			t.Errorf("admitted %d (SCG %d, sluice %d) in seconds %d..%d (rounds per second %v), below %d: a side denied what the bucket held",
				total, bySCG, bySluice, first, last, rounds, low)
		}
		if bySCG == 0 || bySluice == 0 {
			t.Errorf("SCG admitted %d and sluice %d: alternating calls should share the refills", bySCG, bySluice)
		}
	})

	t.Run("concurrent", func(t *testing.T) {
		id := "conc-" + testPrefix()
		start := redisTime(t, c)
		deadline := time.Now().Add(2500 * time.Millisecond)
		counts := make(chan int, 4)
		for w := range 4 {
			go func() {
				n := 0
				scg := scgClient{c: c, routeID: lay.routeID, rate: rate, burst: burst, requested: 1}
				for time.Now().Before(deadline) {
					var ok bool
					if w%2 == 0 {
						var err error
						if ok, _, _, err = scg.isAllowed(ctx, id); err != nil {
							t.Error(err)
							break
						}
					} else {
						out := make([]ratelimit.Decision, 1)
						var err error
						if ok, err = s.Evaluate(ctx, []ratelimit.Request{{Key: lay.key(id), Policy: p, Cost: 1}}, out); err != nil {
							t.Error(err)
							break
						}
					}
					if ok {
						n++
					}
				}
				counts <- n
			}()
		}
		total := 0
		for range 4 {
			total += <-counts
		}
		end := redisTime(t, c)
		if bound := burst + rate*int(end-start); total > bound {
			t.Fatalf("admitted %d in seconds %d..%d, above burst + rate×elapsed = %d", total, start, end, bound)
		}
		if total < burst {
			t.Fatalf("admitted %d, below the burst %d", total, burst)
		}
	})
}

// TestSCGCompatLayoutsExact: in each of SCG's key layouts, SCG (scgClient)
// and the store alternating on one user's budget of burst 5 admit exactly
// 5 between them within a second (plus a token per second that ticked by),
// and the store's state is in SCG's own two keys. Against SCG 4.2 and
// later, the keys without the route id admitted 5 by SCG plus 5 by sluice.
func TestSCGCompatLayoutsExact(t *testing.T) {
	c := standaloneRedis(t)
	ctx := context.Background()
	s := newTestStore(t, c, nil) // Redis TIME, as SCG
	const burst, rate = 5, 1
	for _, lay := range scgLayouts {
		t.Run(string(lay.compat), func(t *testing.T) {
			p := lay.policy(t, burst, rate)
			scg := scgClient{c: c, rate: rate, burst: burst, requested: 1, routeID: lay.routeID}
			for attempt := 0; ; attempt++ {
				if attempt == 5 {
					t.Fatal("every attempt straddled a second of Redis TIME")
				}
				id := fmt.Sprintf("exact-%d-%s", attempt, testPrefix())
				start := redisTime(t, c)
				bySCG, bySluice := 0, 0
				for range 2 * burst {
					ok, _, _, err := scg.isAllowed(ctx, id)
					if err != nil {
						t.Fatal(err)
					}
					if ok {
						bySCG++
					}
					out := make([]ratelimit.Decision, 1)
					if ok, err = s.Evaluate(ctx, []ratelimit.Request{{Key: lay.key(id), Policy: p, Cost: 1}}, out); err != nil {
						t.Fatal(err)
					}
					if ok {
						bySluice++
					}
				}
				elapsed := redisTime(t, c) - start
				total := bySCG + bySluice
				if total < burst || total > burst+rate*int(elapsed) {
					t.Fatalf("admitted %d (SCG %d, sluice %d) in %d s, want %d (+%d a second)", total, bySCG, bySluice, elapsed, burst, rate)
				}
				tokens, stamp := scg.keys(id)
				if n, err := c.Do(ctx, c.B().Exists().Key(tokens, stamp).Build()).AsInt64(); err != nil || n != 2 {
					t.Fatalf("SCG's keys %s, %s: %d exist (%v), want 2", tokens, stamp, n, err)
				}
				if elapsed != 0 {
					continue // a second ticked: the count was bounded, not exact
				}
				if total != burst || bySCG == 0 || bySluice == 0 {
					t.Fatalf("admitted %d (SCG %d, sluice %d) within one second, want %d from both", total, bySCG, bySluice, burst)
				}
				return
			}
		})
	}
}

// TestSCGCompatCluster: on a Redis Cluster, compat scg and scg-4.1 limits live in the
// slot of SCG's hash tag, whatever bytes the key value holds (braces
// included, as SCG writes them), and a request mixing one with a limit in
// another slot is refused rather than split.
func TestSCGCompatCluster(t *testing.T) {
	c := clusterRedis(t)
	ctx := context.Background()
	s := newTestStore(t, c, nil)
	p := scgPolicy(t, 3, 1)
	// A value starting with '}' leaves SCG's hash tag empty: its two keys
	// fall in two slots, which no script can touch at once.
	split := ratelimit.Request{Key: ratelimit.SCGKey("}" + testPrefix()), Policy: p}
	if _, err := s.Evaluate(ctx, []ratelimit.Request{split}, make([]ratelimit.Decision, 1)); !errors.Is(err, errSCGSplit) {
		t.Errorf("Evaluate of a split key: %v, want errSCGSplit", err)
	}
	if err := s.Peek(ctx, []ratelimit.Request{split}, make([]ratelimit.Decision, 1)); !errors.Is(err, errSCGSplit) {
		t.Errorf("Peek of a split key: %v, want errSCGSplit", err)
	}
	if err := s.Reset(ctx, []ratelimit.Request{split}); err != nil {
		t.Errorf("Reset of a split key: %v", err)
	}
	for _, tc := range []struct {
		id  string
		lay scgLayout
	}{
		{"plain-" + testPrefix(), scgLayouts[0]}, {"br{ace}s-" + testPrefix(), scgLayouts[0]},
		{"a}b-" + testPrefix(), scgLayouts[0]}, {"日本-" + testPrefix(), scgLayouts[0]},
		{"plain-" + testPrefix(), scgLayouts[1]}, {"a}b-" + testPrefix(), scgLayouts[1]},
	} {
		id, key, p := tc.id, tc.lay.key(tc.id), tc.lay.policy(t, 3, 1)
		for i := range 4 {
			ok, out := evaluate(t, s, ratelimit.Request{Key: key, Policy: p})
			if want := i < 3; ok != want {
				// A second may tick between calls and refill one token.
				if !(i == 3 && ok) {
					t.Errorf("id %q call %d: ok=%v %+v", id, i, ok, out[0])
				}
			}
		}
		n, err := c.Do(ctx, c.B().Exists().Key(key+".tokens").Build()).AsInt64()
		if err != nil || n != 1 {
			t.Errorf("id %q: tokens key exists %d (%v)", id, n, err)
		}
	}
	other := ratelimit.MustPolicy(ratelimit.PolicyConfig{Name: "own", Algorithm: ratelimit.TokenBucket, Capacity: 3, Rate: 1})
	var reqs []ratelimit.Request
	for i := range 8 { // eight keys: some land in another slot than the SCG one
		reqs = append(reqs, ratelimit.Request{Key: fmt.Sprintf("own-%d-%s", i, testPrefix()), Policy: other})
	}
	reqs = append(reqs, ratelimit.Request{Key: ratelimit.SCGKey("mixed-" + testPrefix()), Policy: p})
	out := make([]ratelimit.Decision, len(reqs))
	if _, err := s.Evaluate(ctx, reqs, out); !errors.Is(err, errSCGSlots) {
		t.Errorf("mixed slots: %v, want errSCGSlots", err)
	}
}
