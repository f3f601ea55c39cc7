package kit

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/sluice-gw/sluice/ratelimit"
)

// t0 is the start of the step-level timelines: a Unix time in µs that is a
// multiple of every window up to one hour.
const t0 = int64(1_764_000_000_000_000)

// stepInput is one request of a generated sequence: dt µs after the previous
// one, of cost cost.
type stepInput struct{ dt, cost int64 }

func stateEqual(a, b State) bool {
	return a.Set == b.Set && a.N == b.N && a.Prev == b.Prev && a.T == b.T && slices.Equal(a.Log, b.Log)
}

func cloneState(s State) State {
	s.Log = slices.Clone(s.Log)
	return s
}

// checkStepInvariants plays steps on p from t0 with StepAt (through stepAt) and checks what
// must hold for every algorithm at every step, then the limit each algorithm
// promises over the whole sequence:
//
//   - StepAt never changes its input, and a denial returns the same state;
//   - every Decision is within bounds, and PeekAt predicts it;
//   - retry-after is exact: the same request is admitted at now+retry and
//     not 1µs earlier (for sliding_window, by its own float estimate);
//   - reset is exact: the state is whole at now+reset and not 1µs earlier;
//   - after TTL(d) the state decides like no state at all;
//   - buckets and gcra admit at most max + ⌊T/interval⌋ over any span T;
//     fixed and sliding windows at most L per aligned window; the sliding log
//     at most L in any (t−W, t]; shape mode forwards at most at rate r.
func checkStepInvariants(t *testing.T, p *ratelimit.Policy, steps []stepInput) {
	t.Helper()
	type admission struct{ at, cost, fwd int64 }
	var (
		s    State
		now  = t0
		adm  []admission
		max_ = p.Max()
	)
	fail := func(i int, format string, args ...any) {
		t.Helper()
		t.Fatalf("%v, step %d (t0+%v): %s", p, i, micros(now-t0), fmt.Sprintf(format, args...))
	}
	for i, st := range steps {
		now += st.dt
		n := st.cost
		in := cloneState(s)
		next, d := stepAt(p, s, now, n)
		if !stateEqual(s, in) {
			fail(i, "StepAt changed its input state")
		}
		if d.Limit != max_ || d.Remaining < 0 || d.Remaining > max_ || d.Reset < 0 || d.RetryAfter < 0 || d.Delay < 0 ||
			(d.Allowed && d.RetryAfter != 0) || (!d.Allowed && (d.Delay != 0 || d.RetryAfter <= 0)) {
			fail(i, "cost %d: decision out of bounds: %+v", n, d)
		}
		pk := PeekAt(p, s, now, n)
		if pk.Allowed != d.Allowed || pk.RetryAfter != d.RetryAfter || pk.Delay != d.Delay {
			fail(i, "cost %d: PeekAt = %+v, StepAt = %+v", n, pk, d)
		}
		if d.Allowed {
			s = next
			adm = append(adm, admission{now, n, now + d.Delay.Microseconds()})
			if after := PeekAt(p, s, now, 1); after.Remaining != d.Remaining || after.Reset != d.Reset {
				fail(i, "cost %d admitted with remaining %d, reset %v; PeekAt after: %d, %v", n, d.Remaining, d.Reset, after.Remaining, after.Reset)
			}
		} else {
			if !stateEqual(next, s) {
				fail(i, "cost %d: a denial changed the state", n)
			}
			if pk.Remaining != d.Remaining || pk.Reset != d.Reset {
				fail(i, "cost %d denied with remaining %d, reset %v; PeekAt: %d, %v", n, d.Remaining, d.Reset, pk.Remaining, pk.Reset)
			}
			r := d.RetryAfter.Microseconds()
			if _, d2 := stepAt(p, s, now+r, n); !d2.Allowed {
				fail(i, "cost %d: retry-after %v, but denied then", n, d.RetryAfter)
			}
			if _, d2 := stepAt(p, s, now+r-1, n); d2.Allowed && r > 1 {
				fail(i, "cost %d: retry-after %v, but admitted 1µs earlier", n, d.RetryAfter)
			}
		}
		cur := PeekAt(p, s, now, 1)
		rs := cur.Reset.Microseconds()
		if whole := PeekAt(p, s, now+rs, 1); whole.Remaining != max_ {
			fail(i, "reset %v, but remaining %d then, want %d", cur.Reset, whole.Remaining, max_)
		}
		if rs > 0 {
			if early := PeekAt(p, s, now+rs-1, 1); early.Remaining == max_ {
				fail(i, "reset %v, but whole 1µs earlier", cur.Reset)
			}
		}
		ttl := TTL(cur).Microseconds()
		_, kept := stepAt(p, s, now+ttl, n)
		_, fresh := stepAt(p, State{}, now+ttl, n)
		if kept != fresh {
			fail(i, "TTL %dµs: the kept state decides %+v, no state %+v", ttl, kept, fresh)
		}
	}

	switch p.Algorithm() {
	case ratelimit.TokenBucket, ratelimit.LeakyBucket, ratelimit.GCRA:
		iv := ParamsOf(p).IntervalMicros
		for i := range adm {
			sum := int64(0)
			for j := i; j < len(adm); j++ {
				sum += adm[j].cost
				if bound := max_ + (adm[j].at-adm[i].at)/iv; sum > bound {
					t.Fatalf("%v: %d units admitted in %v, above max + r·T = %d", p, sum, micros(adm[j].at-adm[i].at), bound)
				}
			}
			if p.Mode() == ratelimit.Shape && i > 0 && adm[i].fwd < adm[i-1].fwd+adm[i-1].cost*iv {
				t.Fatalf("%v: admission %d forwarded at t0+%v, before the previous one's %d units are through at t0+%v",
					p, i, micros(adm[i].fwd-t0), adm[i-1].cost, micros(adm[i-1].fwd+adm[i-1].cost*iv-t0))
			}
		}
	case ratelimit.FixedWindow, ratelimit.SlidingWindow:
		per := map[int64]int64{}
		for _, a := range adm {
			k := a.at / ParamsOf(p).WindowMicros
			if per[k] += a.cost; per[k] > max_ {
				t.Fatalf("%v: %d units admitted in the window starting t0+%v", p, per[k], micros(k*ParamsOf(p).WindowMicros-t0))
			}
		}
	case ratelimit.SlidingLog:
		for j := range adm {
			sum := int64(0)
			for i := j; i >= 0 && adm[i].at > adm[j].at-ParamsOf(p).WindowMicros; i-- {
				sum += adm[i].cost
			}
			if sum > max_ {
				t.Fatalf("%v: %d units admitted in the window ending t0+%v", p, sum, micros(adm[j].at-t0))
			}
		}
	}
}

// fuzzPolicy turns three fuzzed numbers into a valid policy of any algorithm,
// and gives the time unit its steps are measured in (an interval or a window).
func fuzzPolicy(alg, limit uint8, scale uint32) (*ratelimit.Policy, int64) {
	n := int64(limit%10) + 1
	iv := 1 + int64(scale%3_000_000)
	w := 1 + int64(scale%100_000_000)
	rate := 1e6 / float64(iv)
	var c ratelimit.PolicyConfig
	switch alg % 7 {
	case 0:
		c = ratelimit.PolicyConfig{Algorithm: ratelimit.TokenBucket, Capacity: n, Rate: rate}
	case 1:
		c = ratelimit.PolicyConfig{Algorithm: ratelimit.LeakyBucket, Capacity: n, Rate: rate}
	case 2:
		c = ratelimit.PolicyConfig{Algorithm: ratelimit.LeakyBucket, Capacity: n, Rate: rate, Mode: ratelimit.Shape, MaxDelay: micros(iv * int64(alg/7%8))}
	case 3:
		c = ratelimit.PolicyConfig{Algorithm: ratelimit.GCRA, Burst: n, Rate: rate}
	case 4:
		c = ratelimit.PolicyConfig{Algorithm: ratelimit.FixedWindow, Limit: n, Window: micros(w)}
	case 5:
		c = ratelimit.PolicyConfig{Algorithm: ratelimit.SlidingWindow, Limit: n, Window: micros(w)}
	default:
		c = ratelimit.PolicyConfig{Algorithm: ratelimit.SlidingLog, Limit: n, Window: micros(w)}
	}
	p := ratelimit.MustPolicy(c)
	if q := ParamsOf(p); q.WindowMicros > 0 {
		return p, q.WindowMicros
	}
	return p, ParamsOf(p).IntervalMicros
}

// decodeSteps reads three bytes per step: the gap in sixteenths of unit plus
// a few µs of jitter, and the cost. At most 64 steps.
func decodeSteps(p *ratelimit.Policy, unit int64, b []byte) []stepInput {
	var steps []stepInput
	for len(b) >= 3 && len(steps) < 64 {
		steps = append(steps, stepInput{
			dt:   int64(b[0])*unit/16 + int64(b[1]),
			cost: 1 + int64(b[2])%p.Max(),
		})
		b = b[3:]
	}
	return steps
}

// FuzzStepInvariants checks checkStepInvariants on fuzzed policies and
// request sequences. Its seed corpus in testdata/fuzz/FuzzStepInvariants runs
// on every go test.
func FuzzStepInvariants(f *testing.F) {
	f.Add(uint8(0), uint8(4), uint32(100_000), []byte("\x00\x00\x03\x00\x00\x02\x08\x00\x01\x10\x00\x05"))
	f.Fuzz(func(t *testing.T, alg, limit uint8, scale uint32, steps []byte) {
		p, unit := fuzzPolicy(alg, limit, scale)
		checkStepInvariants(t, p, decodeSteps(p, unit, steps))
	})
}

// TestStepInvariantsRandom runs checkStepInvariants on a fixed set of
// pseudo-random policies and sequences, so that every test run covers more
// than the fuzz corpus.
func TestStepInvariantsRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(2026, 11))
	for range 1500 {
		p, unit := fuzzPolicy(uint8(rng.UintN(256)), uint8(rng.UintN(256)), rng.Uint32())
		steps := make([]byte, 3*(1+rng.IntN(64)))
		for i := range steps {
			steps[i] = byte(rng.UintN(256))
			if i%3 == 0 && rng.IntN(3) == 0 {
				steps[i] = 0 // bursts
			}
		}
		checkStepInvariants(t, p, decodeSteps(p, unit, steps))
	}
}

// TestPeekAt checks that PeekAt reports the state as it is: full for a key
// never seen, and the request's own verdict.
func TestPeekAt(t *testing.T) {
	for alg := range uint8(7) {
		p, _ := fuzzPolicy(alg, 2, 1_000_000) // max 3
		d := PeekAt(p, State{}, t0, 2)
		if want := (ratelimit.Decision{Allowed: true, Limit: 3, Remaining: 3}); d != want {
			t.Errorf("%v: PeekAt(no state, cost 2) = %+v, want %+v", p, d, want)
		}
		s, _ := stepAt(p, State{}, t0, 2)
		if d := PeekAt(p, s, t0, 2); d.Allowed || d.Remaining != 1 || d.RetryAfter == 0 {
			t.Errorf("%v: PeekAt(1 left, cost 2) = %+v, want denied, remaining 1, a retry-after", p, d)
		}
		if d := PeekAt(p, s, t0, 1); !d.Allowed || d.Remaining != 1 {
			t.Errorf("%v: PeekAt(1 left, cost 1) = %+v, want allowed, remaining 1", p, d)
		}
	}
	// PeekAt may run under a read lock: it must not write even to the spare
	// capacity of the log it is given.
	p := ratelimit.MustPolicy(ratelimit.PolicyConfig{Algorithm: ratelimit.SlidingLog, Limit: 5, Window: time.Second})
	log := make([]LogEntry, 1, 4)
	log[0] = LogEntry{At: t0, N: 1}
	spare := log[:2]
	spare[1] = LogEntry{At: -1, N: -1}
	PeekAt(p, State{Set: true, Log: log}, t0+1, 1)
	if spare[1] != (LogEntry{At: -1, N: -1}) {
		t.Errorf("PeekAt wrote %+v into the log's spare capacity", spare[1])
	}
}

// stepAt is StepAt on a copy of s: it returns the new state and the
// decision, and leaves s as it was.
func stepAt(p *ratelimit.Policy, s State, nowMicros, n int64) (State, ratelimit.Decision) {
	var d ratelimit.Decision
	StepAt(p, &s, nowMicros, n, &d)
	return s, d
}
