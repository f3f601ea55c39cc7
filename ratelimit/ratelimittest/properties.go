package ratelimittest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/sluice-gw/sluice/ratelimit"
	"github.com/sluice-gw/sluice/ratelimit/kit"
)

// arrival is one generated request: dt µs after the previous one, of cost
// cost. Models reuse it as (time, cost).
type arrival struct {
	dt, cost int64
	at       int64
}

// arrivals draws 1..80 requests whose gaps are often zero (bursts), often
// about scale µs (one unit or one window) and sometimes long.
func arrivals(rt *rapid.T, maxCost, scale int64) []arrival {
	gap := rapid.OneOf(
		rapid.Just(int64(0)),
		rapid.Int64Range(0, scale),
		rapid.Int64Range(scale-1, scale+1),
		rapid.Int64Range(0, 5*scale),
	)
	seq := make([]arrival, rapid.IntRange(1, 80).Draw(rt, "length"))
	for i := range seq {
		seq[i] = arrival{dt: gap.Draw(rt, "dt"), cost: rapid.Int64Range(1, maxCost).Draw(rt, "cost")}
	}
	return seq
}

// check runs prop under rapid for Options.PropertyChecks passing sequences
// (rapid's own count, -rapid.checks, is the upper bound: the remaining runs
// return at once). Once a run fails, every run goes through, so that
// shrinking and the final replay are real.
func (s *suite) check(t *testing.T, prop func(*rapid.T)) {
	t.Helper()
	limit, passed, failing := s.opts.checks(), 0, false
	rapid.Check(t, func(rt *rapid.T) {
		if passed >= limit && !failing {
			return
		}
		ok := false
		defer func() {
			if ok && !rt.Failed() {
				passed++
			} else {
				failing = true
			}
		}()
		prop(rt)
		ok = true
	})
	t.Logf("ratelimittest: %d random sequences checked", passed)
}

func (s *suite) runProperties(t *testing.T) {
	t.Run("BucketsMatchModel", s.propBuckets)
	t.Run("ShapeMatchesModel", s.propShape)
	t.Run("FixedWindowMatchesModel", s.propFixedWindow)
	t.Run("SlidingLogMatchesModel", s.propSlidingLog)
	t.Run("SlidingWindowWithinExactModel", s.propSlidingWindow)
	t.Run("MultiLimitMatchesModels", s.propMultiLimit)
	t.Run("MatchesStepAt", s.propMatchesStepAt)
}

// Intervals (µs per unit) for generated bucket policies: each is 1e6/rate
// for a rate the core represents exactly, from 10^6/s down to 0.001/s.
var intervals = []int64{1, 3, 1_000, 100_000, 250_000, 1_000_000, 2_000_000, 7_000_000, 1_000_000_000}

// Windows (µs) for generated window policies, a prime among them.
var windows = []int64{1, 1_000, 999_983, 1_000_000, 60_000_000, 3_600_000_000}

func bucketPolicy(rt *rapid.T, c ratelimit.PolicyConfig, iv int64) *ratelimit.Policy {
	c.Rate = 1e6 / float64(iv)
	p, err := ratelimit.NewPolicy(c)
	if err != nil {
		rt.Fatalf("NewPolicy(%+v): %v", c, err)
	}
	if kit.ParamsOf(p).IntervalMicros != iv {
		rt.Fatalf("rate %v: interval %dµs, want %d", c.Rate, kit.ParamsOf(p).IntervalMicros, iv)
	}
	return p
}

func windowPolicy(rt *rapid.T, alg ratelimit.Algorithm, l, w int64) *ratelimit.Policy {
	p, err := ratelimit.NewPolicy(ratelimit.PolicyConfig{Algorithm: alg, Limit: l, Window: micros(w)})
	if err != nil {
		rt.Fatalf("NewPolicy: %v", err)
	}
	return p
}

// limitUnderTest is one key on the store and its model.
type limitUnderTest struct {
	name  string
	req   ratelimit.Request
	model model
	got   []ratelimit.Decision // per arrival
}

// play runs the arrivals against the store, one Evaluate per limit per
// arrival, comparing each decision with the model's. It returns the absolute
// time of each arrival.
func (e *env) play(rt *rapid.T, seq []arrival, limits []*limitUnderTest) {
	for i := range seq {
		e.clock.Advance(micros(seq[i].dt))
		now := e.clock.Now().UnixMicro()
		seq[i].at = now
		for _, l := range limits {
			l.req.Cost = seq[i].cost
			got := e.evaluate1(l.req)
			want := evaluate(l.model, now, seq[i].cost)
			if d := diff(fmt.Sprintf("%s: arrival %d: Evaluate(+%dµs, cost %d)", l.name, i, seq[i].dt, seq[i].cost), got, want); len(d) > 0 {
				rt.Fatal(strings.Join(d, "\n"))
			}
			l.got = append(l.got, got)
		}
	}
}

// start gives each check a fresh key space and a random phase against the
// windows.
func (e *env) start(rt *rapid.T, seq *int, scale int64) string {
	*seq++
	e.clock.Advance(micros(rapid.Int64Range(0, 3*scale).Draw(rt, "phase")))
	return e.key(fmt.Sprint(*seq))
}

// propBuckets: token_bucket, gcra and leaky_bucket (police) with the same C
// and r all give the model's decisions, field for field, and no more than
// C + r·T units are admitted over any T.
func (s *suite) propBuckets(t *testing.T) {
	e, n := s.newEnv(t, oddStart), 0
	s.check(t, func(rt *rapid.T) {
		c := rapid.Int64Range(1, 10).Draw(rt, "capacity")
		iv := rapid.SampledFrom(intervals).Draw(rt, "interval")
		key := e.start(rt, &n, iv)
		limits := []*limitUnderTest{
			{name: "token_bucket", model: &tokenModel{c: c, iv: iv},
				req: ratelimit.Request{Key: key + "/tb", Policy: bucketPolicy(rt, ratelimit.PolicyConfig{Algorithm: ratelimit.TokenBucket, Capacity: c}, iv)}},
			{name: "gcra", model: &tokenModel{c: c, iv: iv},
				req: ratelimit.Request{Key: key + "/gcra", Policy: bucketPolicy(rt, ratelimit.PolicyConfig{Algorithm: ratelimit.GCRA, Burst: c}, iv)}},
			{name: "leaky_bucket", model: &drainModel{c: c, iv: iv},
				req: ratelimit.Request{Key: key + "/lb", Policy: bucketPolicy(rt, ratelimit.PolicyConfig{Algorithm: ratelimit.LeakyBucket, Capacity: c}, iv)}},
		}
		seq := arrivals(rt, c, iv)
		e.play(rt, seq, limits)
		for _, l := range limits {
			checkRateBound(rt, l.name, seq, l.got, c, iv)
		}
		// The three are one limit: the same decision, field for field.
		for i := range seq {
			if limits[1].got[i] != limits[0].got[i] || limits[2].got[i] != limits[0].got[i] {
				rt.Fatalf("arrival %d: token_bucket %+v, gcra %+v, leaky_bucket %+v: want one decision", i, limits[0].got[i], limits[1].got[i], limits[2].got[i])
			}
		}
	})
}

// checkRateBound: over every span [t_i, t_j] between two admissions, the
// admitted units are at most C + ⌊(t_j−t_i)·r⌋.
func checkRateBound(rt *rapid.T, name string, seq []arrival, got []ratelimit.Decision, c, iv int64) {
	for i := range seq {
		if !got[i].Allowed {
			continue
		}
		sum := int64(0)
		for j := i; j < len(seq); j++ {
			if got[j].Allowed {
				sum += seq[j].cost
				if bound := c + (seq[j].at-seq[i].at)/iv; sum > bound {
					rt.Fatalf("%s: %d units admitted in %v (arrivals %d..%d), more than C + r·T = %d", name, sum, micros(seq[j].at-seq[i].at), i, j, bound)
				}
			}
		}
	}
}

// propShape: shape mode gives the model's decisions and delays; without
// max_delay it admits exactly what police mode admits; and the forwarding
// times (arrival + delay) are spaced so the upstream never sees more than r:
// each admitted request of cost n occupies n intervals.
func (s *suite) propShape(t *testing.T) {
	e, n := s.newEnv(t, oddStart), 0
	s.check(t, func(rt *rapid.T) {
		c := rapid.Int64Range(1, 10).Draw(rt, "capacity")
		iv := rapid.SampledFrom(intervals).Draw(rt, "interval")
		maxDelay := rapid.SampledFrom([]int64{iv, 3*iv + iv/2, c * iv}).Draw(rt, "max delay")
		key := e.start(rt, &n, iv)
		shape := func(md int64) ratelimit.Request {
			return ratelimit.Request{Key: fmt.Sprintf("%s/shape%d", key, md), Policy: bucketPolicy(rt, ratelimit.PolicyConfig{
				Algorithm: ratelimit.LeakyBucket, Capacity: c, Mode: ratelimit.Shape, MaxDelay: micros(md)}, iv)}
		}
		limits := []*limitUnderTest{
			{name: "police", model: &drainModel{c: c, iv: iv},
				req: ratelimit.Request{Key: key + "/police", Policy: bucketPolicy(rt, ratelimit.PolicyConfig{Algorithm: ratelimit.LeakyBucket, Capacity: c}, iv)}},
			{name: "shape", model: &drainModel{c: c, iv: iv, shape: true}, req: shape(0)},
			{name: "shape_max_delay", model: &drainModel{c: c, iv: iv, shape: true, maxDelay: maxDelay}, req: shape(maxDelay)},
		}
		seq := arrivals(rt, c, iv)
		e.play(rt, seq, limits)
		for i := range seq {
			if limits[0].got[i].Allowed != limits[1].got[i].Allowed {
				rt.Fatalf("arrival %d: police %s, shape %s: shape must admit what police admits", i, verdict(limits[0].got[i].Allowed), verdict(limits[1].got[i].Allowed))
			}
		}
		for _, l := range limits[1:] {
			prevEnd := int64(-1) // when the previous forwarded request's units are through
			for i, d := range l.got {
				if !d.Allowed {
					continue
				}
				fwd := seq[i].at + d.Delay.Microseconds()
				if fwd < prevEnd {
					rt.Fatalf("%s: arrival %d forwarded %v before the previous one's %d units are through at rate r", l.name, i, micros(prevEnd-fwd), seq[i].cost)
				}
				prevEnd = fwd + seq[i].cost*iv
			}
		}
	})
}

// propFixedWindow: fixed_window gives the model's decisions and never admits
// more than L in one aligned window.
func (s *suite) propFixedWindow(t *testing.T) {
	e, n := s.newEnv(t, oddStart), 0
	s.check(t, func(rt *rapid.T) {
		l := rapid.Int64Range(1, 10).Draw(rt, "limit")
		w := rapid.SampledFrom(windows).Draw(rt, "window")
		key := e.start(rt, &n, w)
		lim := &limitUnderTest{name: "fixed_window", model: newFixedModel(l, w),
			req: ratelimit.Request{Key: key, Policy: windowPolicy(rt, ratelimit.FixedWindow, l, w)}}
		seq := arrivals(rt, l, w/2+1)
		e.play(rt, seq, []*limitUnderTest{lim})
		checkAlignedBound(rt, lim.name, seq, lim.got, l, w)
	})
}

func checkAlignedBound(rt *rapid.T, name string, seq []arrival, got []ratelimit.Decision, l, w int64) {
	per := map[int64]int64{}
	for i, d := range got {
		if d.Allowed {
			k := seq[i].at / w
			if per[k] += seq[i].cost; per[k] > l {
				rt.Fatalf("%s: %d units admitted in the window starting %dµs, limit %d", name, per[k], k*w, l)
			}
		}
	}
}

// propSlidingLog: sliding_log gives the model's decisions and never admits
// more than L in any window (t−W, t].
func (s *suite) propSlidingLog(t *testing.T) {
	e, n := s.newEnv(t, oddStart), 0
	s.check(t, func(rt *rapid.T) {
		l := rapid.Int64Range(1, 10).Draw(rt, "limit")
		w := rapid.SampledFrom(windows).Draw(rt, "window")
		key := e.start(rt, &n, w)
		lim := &limitUnderTest{name: "sliding_log", model: &logModel{l: l, w: w},
			req: ratelimit.Request{Key: key, Policy: windowPolicy(rt, ratelimit.SlidingLog, l, w)}}
		seq := arrivals(rt, l, w/3+1)
		e.play(rt, seq, []*limitUnderTest{lim})
		for j := range seq {
			sum := int64(0)
			for i := j; i >= 0 && seq[i].at > seq[j].at-w; i-- {
				if lim.got[i].Allowed {
					sum += seq[i].cost
				}
			}
			if sum > l {
				rt.Fatalf("sliding_log: %d units admitted in the window ending at arrival %d, limit %d", sum, j, l)
			}
		}
	})
}

// propSlidingWindow: the store's floating-point estimate may only err on the
// strict side of the exact one, and only where the exact estimate sits on a
// whole number: it never admits what the exact model denies, denies what it
// admits only on an exact tie, reports remaining at most one below and
// retry-after at most 1µs later; and no aligned window holds more than L.
func (s *suite) propSlidingWindow(t *testing.T) {
	e, n := s.newEnv(t, oddStart), 0
	s.check(t, func(rt *rapid.T) {
		l := rapid.Int64Range(1, 10).Draw(rt, "limit")
		w := rapid.SampledFrom(windows).Draw(rt, "window")
		key := e.start(rt, &n, w)
		p := windowPolicy(rt, ratelimit.SlidingWindow, l, w)
		m := newSlidingModel(l, w)
		req := ratelimit.Request{Key: key, Policy: p}
		seq := arrivals(rt, l, w/3+1)
		got := make([]ratelimit.Decision, len(seq))
		for i := range seq {
			e.clock.Advance(micros(seq[i].dt))
			now := e.clock.Now().UnixMicro()
			seq[i].at = now
			req.Cost = seq[i].cost
			want := m.peek(now, req.Cost)
			_, _, _, _, estW := m.scaled(now)
			tie := estW%w == 0 || (estW+req.Cost*w) == l*w
			g := e.evaluate1(req)
			got[i] = g
			call := fmt.Sprintf("arrival %d: Evaluate(+%dµs, cost %d)", i, seq[i].dt, req.Cost)
			switch {
			case g.Allowed && !want.Allowed:
				rt.Fatalf("%s = allowed; the exact estimate %d/%d + %d exceeds %d", call, estW, w, req.Cost, l)
			case !g.Allowed && want.Allowed && !tie:
				rt.Fatalf("%s = denied; the exact estimate %d/%d + %d is within %d", call, estW, w, req.Cost, l)
			}
			if g.Allowed {
				m.take(now, req.Cost)
				after := m.peek(now, req.Cost)
				want.Remaining, want.Reset = after.Remaining, after.Reset
				_, _, _, _, estW = m.scaled(now)
				tie = estW%w == 0
			} else {
				if want.Allowed {
					// An exact tie the store denied: it admits as soon as the
					// exact model admits from 1µs later on.
					next := m.peek(now+1, req.Cost)
					want.RetryAfter = time.Microsecond + next.RetryAfter
				}
				if g.RetryAfter < want.RetryAfter || g.RetryAfter > want.RetryAfter+time.Microsecond {
					rt.Fatalf("%s: retry-after = %v, want %v (or 1µs more)", call, g.RetryAfter, want.RetryAfter)
				}
			}
			if g.Remaining != want.Remaining && !(tie && g.Remaining == want.Remaining-1) {
				rt.Fatalf("%s: remaining = %d, want %d", call, g.Remaining, want.Remaining)
			}
			if g.Reset != want.Reset || g.Limit != l {
				rt.Fatalf("%s: reset = %v, limit %d; want %v, %d", call, g.Reset, g.Limit, want.Reset, l)
			}
			checkSlidingNext(rt, call, m, now, g)
		}
		checkAlignedBound(rt, "sliding_window", seq, got, l, w)
	})
}

// checkSlidingNext checks a sliding_window decision's Next against the
// exact model: zero while some is left, else the time until a cost-1
// request fits (or 1µs more, where the store's float estimate meets the
// limit exactly and the exact model's admission 1µs later is the answer).
func checkSlidingNext(rt *rapid.T, call string, m *slidingModel, now int64, g ratelimit.Decision) {
	if g.Remaining > 0 {
		if g.Next != 0 {
			rt.Fatalf("%s: next = %v with %d left, want 0", call, g.Next, g.Remaining)
		}
		return
	}
	one := m.peek(now, 1)
	want := one.RetryAfter
	if one.Allowed {
		want = time.Microsecond + m.peek(now+1, 1).RetryAfter
	}
	if g.Next < want || g.Next > want+time.Microsecond {
		rt.Fatalf("%s: next = %v, want %v (or 1µs more)", call, g.Next, want)
	}
}

// propMultiLimit: a request on several limits, some of them shadow, is
// admitted when every non-shadow limit's model admits; then each admitting
// limit consumes; otherwise none does. Each limit's reported decision is
// its model's.
func (s *suite) propMultiLimit(t *testing.T) {
	e, n := s.newEnv(t, oddStart), 0
	s.check(t, func(rt *rapid.T) {
		key := e.start(rt, &n, 1_000_000)
		c := rapid.Int64Range(1, 6).Draw(rt, "capacity")
		l := rapid.Int64Range(1, 6).Draw(rt, "limit")
		iv := rapid.SampledFrom([]int64{1_000, 250_000, 1_000_000}).Draw(rt, "interval")
		w := rapid.SampledFrom([]int64{1_000_000, 999_983, 5_000_000}).Draw(rt, "window")
		reqs := []ratelimit.Request{
			{Key: key + "/tb", Policy: bucketPolicy(rt, ratelimit.PolicyConfig{Algorithm: ratelimit.TokenBucket, Capacity: c}, iv)},
			{Key: key + "/fw", Policy: windowPolicy(rt, ratelimit.FixedWindow, l, w)},
			{Key: key + "/sl", Policy: windowPolicy(rt, ratelimit.SlidingLog, l, w)},
			{Key: key + "/gcra", Policy: bucketPolicy(rt, ratelimit.PolicyConfig{Algorithm: ratelimit.GCRA, Burst: c}, iv)},
		}
		models := []model{&tokenModel{c: c, iv: iv}, newFixedModel(l, w), &logModel{l: l, w: w}, &tokenModel{c: c, iv: iv}}
		for i := range reqs {
			reqs[i].Shadow = rapid.Bool().Draw(rt, "shadow")
		}
		steps := rapid.IntRange(1, 40).Draw(rt, "steps")
		for step := range steps {
			e.clock.Advance(micros(rapid.Int64Range(0, 600_000).Draw(rt, "dt")))
			now := e.clock.Now().UnixMicro()
			want := make([]ratelimit.Decision, len(reqs))
			wantAdmitted := true
			for i := range reqs {
				reqs[i].Cost = rapid.Int64Range(1, min(c, l)).Draw(rt, "cost")
				want[i] = models[i].peek(now, reqs[i].Cost)
				want[i].Next = untilOne(models[i], now, want[i])
				if !reqs[i].Shadow && !want[i].Allowed {
					wantAdmitted = false
				}
			}
			if wantAdmitted {
				for i := range reqs {
					if want[i].Allowed {
						want[i] = evaluate(models[i], now, reqs[i].Cost)
					}
				}
			}
			admitted, got := e.evaluate(reqs...)
			if admitted != wantAdmitted {
				rt.Fatalf("step %d: Evaluate(%s) = %s, want %s", step, costs(reqs), verdict(admitted), verdict(wantAdmitted))
			}
			for i := range reqs {
				if d := diff(fmt.Sprintf("step %d: limit %d (%s, shadow %v)", step, i, reqs[i].Policy.Algorithm(), reqs[i].Shadow), got[i], want[i]); len(d) > 0 {
					rt.Fatal(strings.Join(d, "\n"))
				}
			}
		}
	})
}

// propMatchesStepAt replays random sequences, with the clock sometimes going
// back, on every algorithm and compares each Evaluate and Peek with
// kit.StepAt and PeekAt on a state kept here the way a store keeps it
// (stored on admission, expired TTL after): every store must decide exactly
// as the core does, so that one timeline gives the same decisions on all of
// them. The clock goes back only while the key has not expired, since a
// store may forget an expired key at any time.
func (s *suite) propMatchesStepAt(t *testing.T) {
	e, n := s.newEnv(t, oddStart), 0
	s.check(t, func(rt *rapid.T) {
		limit := rapid.Int64Range(1, 6).Draw(rt, "max")
		iv := rapid.SampledFrom(intervals[:len(intervals)-1]).Draw(rt, "interval")
		w := rapid.SampledFrom(windows).Draw(rt, "window")
		cfgs := []ratelimit.PolicyConfig{
			{Algorithm: ratelimit.TokenBucket, Capacity: limit, Rate: 1e6 / float64(iv)},
			{Algorithm: ratelimit.LeakyBucket, Capacity: limit, Rate: 1e6 / float64(iv)},
			{Algorithm: ratelimit.LeakyBucket, Capacity: limit, Rate: 1e6 / float64(iv), Mode: ratelimit.Shape, MaxDelay: micros(2 * iv)},
			{Algorithm: ratelimit.GCRA, Burst: limit, Rate: 1e6 / float64(iv)},
			{Algorithm: ratelimit.FixedWindow, Limit: limit, Window: micros(w)},
			{Algorithm: ratelimit.SlidingWindow, Limit: limit, Window: micros(w)},
			{Algorithm: ratelimit.SlidingLog, Limit: limit, Window: micros(w)},
		}
		cfg := rapid.SampledFrom(cfgs).Draw(rt, "policy")
		p, err := ratelimit.NewPolicy(cfg)
		if err != nil {
			rt.Fatalf("NewPolicy(%+v): %v", cfg, err)
		}
		q := kit.ParamsOf(p)
		scale := q.IntervalMicros + q.WindowMicros
		req := ratelimit.Request{Key: e.start(rt, &n, scale), Policy: p}
		var (
			state   kit.State
			expires int64
			maxSeen int64
		)
		steps := rapid.IntRange(1, 60).Draw(rt, "steps")
		for i := range steps {
			dt := rapid.OneOf(rapid.Just(int64(0)), rapid.Int64Range(0, scale), rapid.Int64Range(0, 4*scale)).Draw(rt, "dt")
			if maxSeen < expires && rapid.IntRange(0, 5).Draw(rt, "back") == 0 {
				dt = -rapid.Int64Range(1, 2*scale).Draw(rt, "back by")
			}
			e.clock.Advance(micros(dt))
			now := e.clock.Now().UnixMicro()
			maxSeen = max(maxSeen, now)
			cur := state
			if now >= expires {
				cur = kit.State{}
			}
			req.Cost = rapid.Int64Range(1, limit).Draw(rt, "cost")
			call := fmt.Sprintf("%v, step %d: Peek(%+dµs, cost %d)", p, i, dt, req.Cost)
			if d := diff(call, e.peek1(req), kit.PeekAt(p, cur, now, req.Cost)); len(d) > 0 {
				rt.Fatal(strings.Join(d, "\n"))
			}
			next, want := cur, ratelimit.Decision{}
			kit.StepAt(p, &next, now, req.Cost, &want)
			call = fmt.Sprintf("%v, step %d: Evaluate(%+dµs, cost %d)", p, i, dt, req.Cost)
			if d := diff(call, e.evaluate1(req), want); len(d) > 0 {
				rt.Fatal(strings.Join(d, "\n"))
			}
			if want.Allowed {
				state, expires = next, now+kit.TTL(want).Microseconds()
			}
		}
	})
}
