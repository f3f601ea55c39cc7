package kit

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluice-gw/sluice/ratelimit"
)

// Regression tests for four classic rate-limiter pitfalls, which the rules
// of docs/semantics.md §1 and §2.7 exclude, and for whole-second refill.
// Pitfall #1 (time comes from the store) is TestPitfall1_TimeFromStore in
// ratelimit/store_pitfall_test.go.

// TestPitfall2_LeakyBucketNoDrift checks docs/semantics.md §1.2: leaking
// floor(elapsed·rate) units and then moving the leak time to now loses the
// fraction on every look. At 0.5/s, looked at every 3 s, that leaks 1 + 1 = 2
// units in 6 s instead of 3. The step keeps whole units and moves the leak
// time only by the time those units took.
func TestPitfall2_LeakyBucketNoDrift(t *testing.T) {
	p := ratelimit.MustPolicy(ratelimit.PolicyConfig{Algorithm: ratelimit.LeakyBucket, Capacity: 10, Rate: 0.5})
	s, d := stepAt(p, State{}, t0, 4)
	if !d.Allowed || d.Remaining != 6 {
		t.Fatalf("stepAt(t0, cost 4) = %+v, want allowed, remaining 6", d)
	}
	// At +3s 1.5 units have leaked: 1 whole, and half of the next carried over.
	s, d = stepAt(p, s, t0+3_000_000, 1)
	if !d.Allowed || d.Remaining != 6 || d.Reset != 7*time.Second {
		t.Fatalf("stepAt(t0+3s, cost 1) = %+v, want allowed, remaining 6 (3 + 1 queued), reset 7s", d)
	}
	// At +6s exactly 3 have leaked: 4 + 1 − 3 = 2 queued.
	if d := PeekAt(p, s, t0+6_000_000, 1); d.Remaining != 8 || d.Reset != 4*time.Second {
		t.Errorf("PeekAt(t0+6s) = remaining %d, reset %v; want 8 (exactly 3 leaked in 6s), 4s", d.Remaining, d.Reset)
	}

	// 10^6 steps at random gaps of 0..3s, admitting whenever there is room,
	// compared at every step with the exact queue: it drains at 0.5/s from
	// the time it was last empty, so after T seconds exactly ⌊…⌋ have leaked.
	const c, iv = 1000, 2_000_000
	p = ratelimit.MustPolicy(ratelimit.PolicyConfig{Algorithm: ratelimit.LeakyBucket, Capacity: c, Rate: 0.5})
	rng := rand.New(rand.NewPCG(6, 3))
	s, now, drain := State{}, t0, int64(0) // drain: when the exact queue is empty
	var admitted int64
	for i := range 1_000_000 {
		now += rng.Int64N(3_000_001)
		n := 1 + rng.Int64N(2)
		backlog := max(0, drain-now)
		next, d := stepAt(p, s, now, n)
		if want := backlog+n*iv <= c*iv; d.Allowed != want {
			t.Fatalf("step %d (t0+%v): stepAt(cost %d) allowed = %v, want %v (exact queue %v)", i, micros(now-t0), n, d.Allowed, want, micros(backlog))
		}
		if d.Allowed {
			s, drain, admitted = next, max(drain, now)+n*iv, admitted+n
			backlog = drain - now
		}
		if want := c - ceilDiv(backlog, iv); d.Remaining != want || d.Reset != micros(backlog) {
			t.Fatalf("step %d (t0+%v): remaining %d, reset %v; want %d, %v", i, micros(now-t0), d.Remaining, d.Reset, want, micros(backlog))
		}
	}
	// About 1.5·10^6 s passed, so about 750 000 units leaked; the run must
	// have kept the bucket busy for that to show.
	if admitted < 700_000 {
		t.Fatalf("only %d units admitted: the run never kept the bucket busy", admitted)
	}
}

// TestPitfall3_FractionalRatesAndHugeCapacities checks docs/semantics.md §1.2:
// rates
// and counts kept as floats lose precision (0.001/s, or a fraction of a token
// next to 2^53). The steps work in integer microseconds and whole units.
func TestPitfall3_FractionalRatesAndHugeCapacities(t *testing.T) {
	for _, c := range []ratelimit.PolicyConfig{
		{Algorithm: ratelimit.TokenBucket, Capacity: 1, Rate: 0.001},
		{Algorithm: ratelimit.LeakyBucket, Capacity: 1, Rate: 0.001},
		{Algorithm: ratelimit.GCRA, Burst: 1, Rate: 0.001},
	} {
		p := ratelimit.MustPolicy(c)
		s, d := stepAt(p, State{}, t0, 1)
		if !d.Allowed || d.Reset != 1000*time.Second {
			t.Fatalf("%v: first request = %+v, want allowed, reset 1000s", p, d)
		}
		if _, d := stepAt(p, s, t0+999_999_999, 1); d.Allowed || d.RetryAfter != time.Microsecond {
			t.Errorf("%v: at +999.999999s = %+v, want denied, retry-after 1µs", p, d)
		}
		if _, d := stepAt(p, s, t0+1_000_000_000, 1); !d.Allowed {
			t.Errorf("%v: at +1000s = %+v, want allowed", p, d)
		}
	}

	// Capacity 2^53 at 0.5/s: half a token next to 2^53 is not a float64
	// (2^53−2.5 rounds to 2^53−2), but the bucket counts whole tokens.
	const huge = ratelimit.MaxAmount
	for _, c := range []ratelimit.PolicyConfig{
		{Algorithm: ratelimit.TokenBucket, Capacity: huge, Rate: 0.5},
		{Algorithm: ratelimit.LeakyBucket, Capacity: huge, Rate: 0.5},
	} {
		p := ratelimit.MustPolicy(c)
		s, d := stepAt(p, State{}, t0, 3)
		if !d.Allowed || d.Remaining != huge-3 {
			t.Fatalf("%v: stepAt(cost 3) = %+v, want remaining 2^53−3", p, d)
		}
		for _, tt := range []struct {
			at   int64
			want int64
		}{{1_000_000, huge - 3}, {2_000_000, huge - 2}, {3_999_999, huge - 2}, {4_000_000, huge - 1}, {6_000_000, huge}} {
			if d := PeekAt(p, s, t0+tt.at, 1); d.Remaining != tt.want {
				t.Errorf("%v: remaining at +%v = %d, want %d", p, micros(tt.at), d.Remaining, tt.want)
			}
		}
		s, d = stepAt(p, s, t0+4_000_000, huge-1)
		if !d.Allowed || d.Remaining != 0 {
			t.Errorf("%v: stepAt(+4s, cost 2^53−1) = %+v, want allowed, remaining 0", p, d)
		}
		if _, d := stepAt(p, s, t0+4_000_000, 1); d.Allowed || d.RetryAfter != 2*time.Second {
			t.Errorf("%v: one more = %+v, want denied, retry-after 2s", p, d)
		}
	}
	p := ratelimit.MustPolicy(ratelimit.PolicyConfig{Algorithm: ratelimit.FixedWindow, Limit: huge, Window: time.Hour})
	s, _ := stepAt(p, State{}, t0, huge-1)
	s, d := stepAt(p, s, t0, 1)
	if !d.Allowed || d.Remaining != 0 {
		t.Errorf("fixed_window limit 2^53: the last unit = %+v, want allowed, remaining 0", d)
	}
	if _, d := stepAt(p, s, t0, 1); d.Allowed {
		t.Errorf("fixed_window limit 2^53: unit 2^53+1 = %+v, want denied", d)
	}
	// Emptied, a bucket of 2^53 at 10^6/s takes about 285 years to refill; a
	// year later it holds exactly a year's worth of microseconds.
	const year = 366 * 24 * 3600 * 1_000_000
	p = ratelimit.MustPolicy(ratelimit.PolicyConfig{Algorithm: ratelimit.TokenBucket, Capacity: huge, Rate: ratelimit.MaxRate})
	s, _ = stepAt(p, State{}, t0, huge)
	if _, d := stepAt(p, s, t0+year, huge); d.Allowed || d.Remaining != year || d.RetryAfter != (huge-year)*time.Microsecond {
		t.Errorf("capacity 2^53 at 10^6/s, a year later: %+v, want denied, remaining %d, retry-after %v", d, year, (huge-year)*time.Microsecond)
	}
}

// TestPitfall4_SlidingLogSameMicrosecond checks docs/semantics.md §2.7: log
// entries
// keyed by their time alone merge when two requests share a microsecond, and
// the log undercounts. Every admitted request stays its own entry.
func TestPitfall4_SlidingLogSameMicrosecond(t *testing.T) {
	const l = 1000
	p := ratelimit.MustPolicy(ratelimit.PolicyConfig{Algorithm: ratelimit.SlidingLog, Limit: l, Window: time.Second})
	var s State
	for i := range l {
		var d ratelimit.Decision
		s, d = stepAt(p, s, t0, 1)
		if !d.Allowed || d.Remaining != int64(l-1-i) || len(s.Log) != i+1 {
			t.Fatalf("request %d at one microsecond: %+v with %d log entries; want allowed, remaining %d, %d entries", i+1, d, len(s.Log), l-1-i, i+1)
		}
	}
	if _, d := stepAt(p, s, t0, 1); d.Allowed || d.RetryAfter != time.Second {
		t.Errorf("request %d = %+v, want denied, retry-after 1s", l+1, d)
	}
	if _, d := stepAt(p, s, t0+999_999, 1); d.Allowed {
		t.Errorf("at +999.999ms = %+v, want denied", d)
	}
	if _, d := stepAt(p, s, t0+1_000_000, l); !d.Allowed {
		t.Errorf("at +1s, cost %d = %+v, want allowed: every entry leaves together", l, d)
	}
}

// TestContinuousRefill: refill is continuous, not in whole seconds (Spring
// Cloud Gateway's token bucket script refilled on whole-second timestamps).
// At 10/s one token comes back every 100ms.
func TestContinuousRefill(t *testing.T) {
	for _, c := range []ratelimit.PolicyConfig{
		{Algorithm: ratelimit.TokenBucket, Capacity: 10, Rate: 10},
		{Algorithm: ratelimit.LeakyBucket, Capacity: 10, Rate: 10},
		{Algorithm: ratelimit.GCRA, Burst: 10, Rate: 10},
	} {
		p := ratelimit.MustPolicy(c)
		s, _ := stepAt(p, State{}, t0+500_000, 10) // mid-second
		steps := []struct {
			at      int64 // µs after t0
			allowed bool
			retry   time.Duration
		}{
			{599_999, false, time.Microsecond},
			{600_000, true, 0},
			{650_000, false, 50 * time.Millisecond},
			{700_000, true, 0},
			{950_000, true, 0}, // 2.5 tokens back: 2 whole
			{950_000, true, 0},
			{950_000, false, 50 * time.Millisecond},
		}
		for _, st := range steps {
			next, d := stepAt(p, s, t0+st.at, 1)
			if d.Allowed != st.allowed || d.RetryAfter != st.retry {
				t.Fatalf("%v: stepAt(t0+%v, cost 1) = %+v, want allowed %v, retry-after %v", p, micros(st.at), d, st.allowed, st.retry)
			}
			if d.Allowed {
				s = next
			}
		}
	}
}

// ceilDiv returns ⌈a/b⌉ for a ≥ 0, b > 0.
func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }
