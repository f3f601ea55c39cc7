package ratelimittest

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluice-gw/sluice/ratelimit"
)

const (
	ok = true
	no = false
	us = time.Microsecond
	ms = time.Millisecond
	s  = time.Second
)

// row is one step of a timeline: at t0+at, a request of cost is evaluated
// and must get exactly this decision. next is Decision.Next: with nothing
// left, how long until one more unit is available.
type row struct {
	at        time.Duration
	cost      int64
	allowed   bool
	remaining int64
	reset     time.Duration
	retry     time.Duration
	delay     time.Duration
	next      time.Duration
}

// timeline is a sequence of rows on one fresh key, run once per start time.
type timeline struct {
	name   string
	policy ratelimit.PolicyConfig
	starts []time.Time
	rows   []row
}

// The values below were worked out by hand from docs/semantics.md §2, not copied from the
// code's output; the comments show the arithmetic where it is not obvious.
var timelines = func() []timeline {
	// One shared timeline for the three algorithms that must agree: capacity
	// (or burst) 5, 10 per second, so one unit every 100ms.
	bucket := []row{
		{0, 1, ok, 4, 100 * ms, 0, 0, 0},
		{0, 3, ok, 1, 400 * ms, 0, 0, 0},
		{0, 2, no, 1, 400 * ms, 100 * ms, 0, 0},        // 1 left, the 2nd comes in 100ms
		{50 * ms, 2, no, 1, 350 * ms, 50 * ms, 0, 0},   // the denial above changed nothing
		{100 * ms, 2, ok, 0, 500 * ms, 0, 0, 100 * ms}, // continuous refill: 1 unit after 100ms
		{100 * ms, 1, no, 0, 500 * ms, 100 * ms, 0, 100 * ms},
		{350 * ms, 1, ok, 1, 350 * ms, 0, 0, 0},          // 2.5 units refilled, 0.5 carried over
		{10 * s, 5, ok, 0, 500 * ms, 0, 0, 100 * ms},     // full again, never above capacity
		{10500 * ms, 5, ok, 0, 500 * ms, 0, 0, 100 * ms}, // exactly 5 refilled in 500ms
		{10999999 * us, 5, no, 4, 1 * us, 1 * us, 0, 0},  // 4.99999 units: 1µs short
		{11 * s, 5, ok, 0, 500 * ms, 0, 0, 100 * ms},
	}
	const huge = ratelimit.MaxAmount // 2^53
	hugeRows := func(c int64) []row {
		return []row{
			{0, 1, ok, c - 1, 1 * us, 0, 0, 0},
			{0, c - 1, ok, 0, time.Duration(c) * us, 0, 0, 1 * us},
			{5 * us, 6, no, 5, time.Duration(c-5) * us, 1 * us, 0, 0},
			{6 * us, 6, ok, 0, time.Duration(c) * us, 0, 0, 1 * us},
		}
	}
	// 0.001 per second is one unit every 1000 s.
	slow := []row{
		{0, 1, ok, 0, 1000 * s, 0, 0, 1000 * s},
		{999999999 * us, 1, no, 0, 1 * us, 1 * us, 0, 1 * us},
		{1000 * s, 1, ok, 0, 1000 * s, 0, 0, 1000 * s},
	}
	return []timeline{
		{"token_bucket", ratelimit.PolicyConfig{Algorithm: ratelimit.TokenBucket, Capacity: 5, Rate: 10}, bothStarts, bucket},
		{"gcra", ratelimit.PolicyConfig{Algorithm: ratelimit.GCRA, Burst: 5, Rate: 10}, bothStarts, bucket},
		{"leaky_bucket_police", ratelimit.PolicyConfig{Algorithm: ratelimit.LeakyBucket, Capacity: 5, Rate: 10}, bothStarts, bucket},

		{"token_bucket_capacity_2^53", ratelimit.PolicyConfig{Algorithm: ratelimit.TokenBucket, Capacity: huge, Rate: 1e6}, bothStarts, hugeRows(huge)},
		{"leaky_bucket_capacity_2^53", ratelimit.PolicyConfig{Algorithm: ratelimit.LeakyBucket, Capacity: huge, Rate: 1e6}, bothStarts, hugeRows(huge)},
		// gcra's burst·interval is bounded by 2^52µs.
		{"gcra_burst_2^52", ratelimit.PolicyConfig{Algorithm: ratelimit.GCRA, Burst: huge / 2, Rate: 1e6}, bothStarts, hugeRows(huge / 2)},

		{"token_bucket_rate_0.001", ratelimit.PolicyConfig{Algorithm: ratelimit.TokenBucket, Capacity: 1, Rate: 0.001}, bothStarts, slow},
		{"gcra_rate_0.001", ratelimit.PolicyConfig{Algorithm: ratelimit.GCRA, Burst: 1, Rate: 0.001}, bothStarts, slow},
		{"leaky_bucket_rate_0.001", ratelimit.PolicyConfig{Algorithm: ratelimit.LeakyBucket, Capacity: 1, Rate: 0.001}, bothStarts, slow},

		// Shape: each admitted request is held until the units ahead of it
		// have leaked, one every 500ms, so the upstream sees one every 500ms
		// (forwarded at t0, +0.5s, +1s, +1.5s, +2s (cost 2), +3s); a hold
		// above max_delay 1s is a denial even when the queue has room.
		{"leaky_bucket_shape", ratelimit.PolicyConfig{Algorithm: ratelimit.LeakyBucket, Capacity: 4, Rate: 2, Mode: ratelimit.Shape, MaxDelay: time.Second}, bothStarts, []row{
			{0, 1, ok, 3, 500 * ms, 0, 0, 0},
			{0, 1, ok, 2, 1 * s, 0, 500 * ms, 0},
			{100 * ms, 1, ok, 1, 1400 * ms, 0, 900 * ms, 0},
			{200 * ms, 1, no, 1, 1300 * ms, 300 * ms, 0, 0},         // room, but a 1.3s hold
			{499999 * us, 1, no, 1, 1000001 * us, 1 * us, 0, 0},     // a 1.000001s hold
			{500 * ms, 1, ok, 1, 1500 * ms, 0, 1 * s, 0},            // exactly max_delay
			{600 * ms, 2, no, 1, 1400 * ms, 400 * ms, 0, 0},         // no room for 2
			{1 * s, 2, ok, 0, 2 * s, 0, 1 * s, 1 * s},               // forwarded at +2s
			{1100 * ms, 1, no, 0, 1900 * ms, 900 * ms, 0, 900 * ms}, // full; hold bound binds longer
			{2 * s, 1, ok, 1, 1500 * ms, 0, 1 * s, 0},               // forwarded at +3s
			{10 * s, 4, ok, 0, 2 * s, 0, 0, 1 * s},                  // drained: no hold
		}},
		{"leaky_bucket_shape_unbounded", ratelimit.PolicyConfig{Algorithm: ratelimit.LeakyBucket, Capacity: 5, Rate: 1, Mode: ratelimit.Shape}, bothStarts, []row{
			{0, 1, ok, 4, 1 * s, 0, 0, 0},
			{0, 2, ok, 2, 3 * s, 0, 1 * s, 0},
			{0, 1, ok, 1, 4 * s, 0, 3 * s, 0},
			{0, 2, no, 1, 4 * s, 1 * s, 0, 0},
			{1 * s, 2, ok, 0, 5 * s, 0, 3 * s, 1 * s},
		}},

		// fixed_window: windows are aligned to multiples of W since the epoch.
		{"fixed_window_aligned", ratelimit.PolicyConfig{Algorithm: ratelimit.FixedWindow, Limit: 3, Window: time.Second}, []time.Time{alignedStart}, []row{
			{0, 1, ok, 2, 1 * s, 0, 0, 0},
			{500 * ms, 2, ok, 0, 500 * ms, 0, 0, 500 * ms},
			{999999 * us, 1, no, 0, 1 * us, 1 * us, 0, 1 * us},
			{1 * s, 3, ok, 0, 1 * s, 0, 0, 1 * s},
			{1500 * ms, 1, no, 0, 500 * ms, 500 * ms, 0, 500 * ms},
			{3250 * ms, 2, ok, 1, 750 * ms, 0, 0, 0},
			{3250 * ms, 2, no, 1, 750 * ms, 750 * ms, 0, 0},
		}},
		{"fixed_window_unaligned", ratelimit.PolicyConfig{Algorithm: ratelimit.FixedWindow, Limit: 3, Window: time.Second}, []time.Time{alignedStart.Add(400 * ms)}, []row{
			{0, 3, ok, 0, 600 * ms, 0, 0, 600 * ms}, // the window ends 600ms after t0
			{599999 * us, 1, no, 0, 1 * us, 1 * us, 0, 1 * us},
			{600 * ms, 1, ok, 2, 1 * s, 0, 0, 0},
			{1599999 * us, 2, ok, 0, 1 * us, 0, 0, 1 * us},
			{1600 * ms, 3, ok, 0, 1 * s, 0, 0, 1 * s},
		}},
		{"fixed_window_hour", ratelimit.PolicyConfig{Algorithm: ratelimit.FixedWindow, Limit: 2, Window: time.Hour}, []time.Time{oddStart}, []row{
			{0, 2, ok, 0, time.Hour - 123457*us, 0, 0, time.Hour - 123457*us},
			{time.Hour - 123458*us, 1, no, 0, 1 * us, 1 * us, 0, 1 * us},
			{time.Hour - 123457*us, 1, ok, 1, time.Hour, 0, 0, 0},
		}},

		// sliding_log: exact, window (now−W, now], not aligned.
		{"sliding_log", ratelimit.PolicyConfig{Algorithm: ratelimit.SlidingLog, Limit: 3, Window: time.Second}, bothStarts, []row{
			{0, 1, ok, 2, 1 * s, 0, 0, 0},
			{200 * ms, 2, ok, 0, 1 * s, 0, 0, 800 * ms},
			{500 * ms, 1, no, 0, 700 * ms, 500 * ms, 0, 500 * ms},   // the entry at t0 leaves at +1s
			{999999 * us, 1, no, 0, 200001 * us, 1 * us, 0, 1 * us}, // still inside (now−W, now]
			{1 * s, 1, ok, 0, 1 * s, 0, 0, 200 * ms},                // t0's entry is out
			{1100 * ms, 2, no, 0, 900 * ms, 100 * ms, 0, 100 * ms},  // needs the cost-2 entry of +200ms gone
			{1200 * ms, 2, ok, 0, 1 * s, 0, 0, 800 * ms},
			{1200 * ms, 1, no, 0, 1 * s, 800 * ms, 0, 800 * ms},
		}},

		// sliding_window: estimate = prev·(W−elapsed)/W + curr.
		{"sliding_window_aligned", ratelimit.PolicyConfig{Algorithm: ratelimit.SlidingWindow, Limit: 4, Window: time.Second}, []time.Time{alignedStart}, []row{
			{0, 2, ok, 2, 2 * s, 0, 0, 0}, // reset: the count weighs until the end of the next window
			{500 * ms, 2, ok, 0, 1500 * ms, 0, 0, 750 * ms},
			{750 * ms, 1, no, 0, 1250 * ms, 500 * ms, 0, 500 * ms}, // at +1.25s: 4·0.75 + 0 + 1 = 4
			{1250 * ms, 1, ok, 0, 1750 * ms, 0, 0, 250 * ms},
			{1500 * ms, 1, ok, 0, 1500 * ms, 0, 0, 250 * ms}, // 4·0.5 + 1 + 1 = 4
			{1500 * ms, 1, no, 0, 1500 * ms, 250 * ms, 0, 250 * ms},
			{1750 * ms, 1, ok, 0, 1250 * ms, 0, 0, 250 * ms},    // 4·0.25 + 2 + 1 = 4
			{2500 * ms, 1, ok, 1, 1500 * ms, 0, 0, 0},           // 3·0.5 + 0 + 1 = 2.5, remaining floor(4−2.5)
			{2500 * ms, 2, no, 1, 1500 * ms, 166667 * us, 0, 0}, // 3·(1−e/W) + 1 + 2 ≤ 4 from e = 666667µs
			{2666667 * us, 2, ok, 0, 1333333 * us, 0, 0, 333333 * us},
			{4 * s, 4, ok, 0, 2 * s, 0, 0, 1250 * ms}, // both windows gone
		}},
		{"sliding_window_unaligned", ratelimit.PolicyConfig{Algorithm: ratelimit.SlidingWindow, Limit: 4, Window: time.Second}, []time.Time{alignedStart.Add(400 * ms)}, []row{
			{0, 4, ok, 0, 1600 * ms, 0, 0, 850 * ms},
			{600 * ms, 1, no, 0, 1 * s, 250 * ms, 0, 250 * ms}, // a new window: only prev weighs
			{850 * ms, 1, ok, 0, 1750 * ms, 0, 0, 250 * ms},
		}},
	}
}()

func (s *suite) runTimelines(t *testing.T) {
	for _, tl := range timelines {
		p := mustPolicy(t, tl.policy)
		for _, start := range tl.starts {
			name := tl.name
			if len(tl.starts) > 1 {
				name += "/" + startName(start)
			}
			t.Run(name, func(t *testing.T) {
				s.runTimeline(t, p, start, tl.rows)
			})
		}
	}
}

func startName(t time.Time) string {
	if t.Equal(alignedStart) {
		return "aligned_start"
	}
	return "unaligned_start"
}

// runTimeline plays rows on one key. Around every Evaluate it also checks
// Peek: before, Peek predicts the verdict, retry-after and delay; after, a
// denial left everything as it was, and an admission left exactly what
// Evaluate reported.
func (s *suite) runTimeline(t *testing.T, p *ratelimit.Policy, start time.Time, rows []row) {
	e := s.newEnv(t, start)
	req := ratelimit.Request{Key: e.key("k"), Policy: p}
	for i, r := range rows {
		e.set(r.at)
		req.Cost = r.cost
		call := fmt.Sprintf("Evaluate(%s, cost %d)", e.when(), r.cost)
		before := e.peek1(req)
		got := e.evaluate1(req)
		want := ratelimit.Decision{Allowed: r.allowed, Limit: p.Max(), Remaining: r.remaining, Reset: r.reset, RetryAfter: r.retry, Delay: r.delay, Next: r.next}
		if !e.expect(call, got, want) {
			t.Fatalf("row %d of %s failed; later rows depend on it", i, p)
		}
		after := e.peek1(req)
		peekCall := fmt.Sprintf("Peek(%s, cost %d)", e.when(), r.cost)
		if r.allowed {
			// Nothing consumed yet: cost more units remain than after.
			e.expect(peekCall+" before the admission", before, ratelimit.Decision{Allowed: true, Limit: p.Max(), Remaining: r.remaining + r.cost, Reset: before.Reset, Delay: r.delay, Next: before.Next})
			e.expect(peekCall+" after the admission", after, ratelimit.Decision{Allowed: after.Allowed, Limit: p.Max(), Remaining: r.remaining, Reset: r.reset, RetryAfter: after.RetryAfter, Delay: after.Delay, Next: r.next})
		} else {
			e.expect(peekCall+" before the denial", before, want)
			e.expect(peekCall+" after the denial", after, want)
		}
	}
}
