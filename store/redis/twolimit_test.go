package redis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/sluice-gw/sluice/internal/testdiff"
	"github.com/sluice-gw/sluice/ratelimit"
	"github.com/sluice-gw/sluice/ratelimit/kit"
	"github.com/sluice-gw/sluice/store/memory"
)

// TestTwoLimitsMatchMemory: requests of two limits (the gateway's common
// request, which main.lua decides without tables when both are scalar
// algorithms on two keys) get from Redis, in calls of their own and in
// batches, exactly the memory store's answers, and leave the same state.
// The limits are random policies of every algorithm (a sliding log now and
// then, which takes the general path), random costs, shadows now and then,
// a per-client key and a shared one; the clock moves between batches.
func TestTwoLimitsMatchMemory(t *testing.T) {
	c := standaloneRedis(t)
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 7))
	clock := kit.NewManualClock(time.Unix(1_764_000_000, 0))
	ms, err := memory.New(memory.Options{Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ms.Close() })
	alone := newTestStore(t, c, clock)
	setBatching(alone, 0, false)
	batched := newTestStore(t, c, clock)
	ps := policies(t)
	scalar := ps[:0:0]
	for _, p := range ps {
		if p.Algorithm() != ratelimit.SlidingLog {
			scalar = append(scalar, p)
		}
	}
	pick := func() *ratelimit.Policy {
		if rng.IntN(10) == 0 {
			return ps[rng.IntN(len(ps))]
		}
		return scalar[rng.IntN(len(scalar))]
	}
	ctx := context.Background()
	for round := range 150 {
		reqs := make([][]ratelimit.Request, 1+rng.IntN(12))
		for i := range reqs {
			// A key per policy: the memory store keeps one state per key,
			// which a limit of another algorithm on that key replaces, the
			// Redis store one per key and algorithm.
			p1, p2 := pick(), pick()
			reqs[i] = []ratelimit.Request{
				{Key: fmt.Sprint("client", rng.IntN(3), "/", p1.Name()), Policy: p1, Cost: 1 + rng.Int64N(2), Shadow: rng.IntN(6) == 0},
				{Key: fmt.Sprint("shared", rng.IntN(2), "/", p2.Name()), Policy: p2, Cost: 1, Shadow: rng.IntN(6) == 0},
			}
		}
		got := runBatch(t, batched, reqs)
		for i, r := range reqs {
			want := make([]ratelimit.Decision, 2)
			wantOK, err := ms.Evaluate(ctx, r, want)
			if err != nil {
				t.Fatal(err)
			}
			out := make([]ratelimit.Decision, 2)
			ok, err := alone.Evaluate(ctx, r, out)
			if err != nil {
				t.Fatal(err)
			}
			if ok != wantOK || !testdiff.Equal(out, want) {
				t.Fatalf("round %d, request %d %v (seed %d), alone:\nredis  %v %+v\nmemory %v %+v", round, i, r, seed, ok, out, wantOK, want)
			}
			if got[i].err != nil {
				t.Fatalf("round %d, request %d (seed %d), batched: %v", round, i, seed, got[i].err)
			}
			if got[i].ok != wantOK || !testdiff.Equal(got[i].out, want) {
				t.Fatalf("round %d, request %d of %d %v (seed %d), batched:\nredis  %v %+v\nmemory %v %+v",
					round, i, len(reqs), r, seed, got[i].ok, got[i].out, wantOK, want)
			}
		}
		clock.Advance(time.Duration(rng.Int64N(int64(1200 * time.Millisecond))))
	}
	for _, key := range []string{"client0", "client1", "client2", "shared0", "shared1"} {
		for _, p := range ps {
			r := ratelimit.Request{Key: key + "/" + p.Name(), Policy: p}
			want := peek(t, ms, r)
			if d := testdiff.Diff(want, peek(t, alone, r)); d != "" {
				t.Errorf("%s on %s: state differs at the end (-memory +alone):\n%s", p.Name(), key, d)
			}
			if d := testdiff.Diff(want, peek(t, batched, r)); d != "" {
				t.Errorf("%s on %s: state differs at the end (-memory +batched):\n%s", p.Name(), key, d)
			}
		}
	}
}

// TestDecodeTwoShort: a member of two limits may be answered with two short
// replies; a short reply for a member of more limits, or one followed by a
// value that is not a short reply, is a reply of the wrong shape.
func TestDecodeTwoShort(t *testing.T) {
	c := standaloneRedis(t)
	reply := func(script string) []rueidis.RedisMessage {
		t.Helper()
		vals, err := c.Do(context.Background(), c.B().Eval().Script(script).Numkeys(0).Build()).ToArray()
		if err != nil {
			t.Fatal(err)
		}
		return vals
	}
	short := func(remaining, reset int64) int64 { return -1 - (remaining<<33 + reset) }
	m := &member{n: 2}
	if err := decodeBatch(reply(fmt.Sprintf("return {7, %d, %d}", short(4, 500), short(9, 1000))), []*member{m}); err != nil {
		t.Fatalf("two short replies: %v", err)
	}
	if want := []limitReply{{allowed: true, remaining: 4, reset: 500}, {allowed: true, remaining: 9, reset: 1000}}; !m.overall || !slices.Equal(m.reps, want) {
		t.Errorf("two short replies: overall %v, %+v; want admitted, %+v", m.overall, m.reps, want)
	}
	for _, bad := range []struct {
		script string
		n      int
	}{
		{fmt.Sprintf("return {7, %d, 1}", short(4, 500)), 2},
		{fmt.Sprintf("return {7, %d}", short(4, 500)), 2},
		{fmt.Sprintf("return {7, %d, %d, %d}", short(1, 1), short(1, 1), short(1, 1)), 3},
	} {
		if err := decodeBatch(reply(bad.script), []*member{{n: bad.n}}); !errors.Is(err, errBadReply) {
			t.Errorf("%s for %d limits: %v, want a bad reply", bad.script, bad.n, err)
		}
	}
}
