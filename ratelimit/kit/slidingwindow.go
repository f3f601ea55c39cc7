package kit

import (
	"math"

	"github.com/sluice-gw/sluice/ratelimit"
)

// slidingWindowAt: the sliding-window counter. State T = current window index
// k, N = units admitted in window k, Prev = in window k−1. The previous
// window's count is weighted by the part of it still inside the sliding
// window: estimate = prev·(W−elapsed)/W + curr. Admits when estimate + n ≤ L.
//
// The estimate is a float64 computed in the order the Lua script computes it,
// so both sides round alike.
func slidingWindowAt(p *policy, s *State, now, n int64, out *ratelimit.Decision) {
	l, w := p.max, p.window
	idx := now / w
	curr, prev := int64(0), int64(0)
	if s.Set {
		switch {
		case s.T >= idx:
			// s.T > idx only if the clock went back: keep the newer window.
			idx, curr, prev = s.T, s.N, s.Prev
		case s.T == idx-1:
			prev = s.N
		}
	}
	elapsed := max(0, now-idx*w)
	// lag > 0 only if the clock went back: then nothing changes until the
	// newer window starts, and reset (the key's TTL) and retry wait for it too.
	lag := max(0, idx*w-now)
	est := weighted(prev, w-elapsed, w) + float64(curr)
	d := ratelimit.Decision{Limit: l}
	if est+float64(n) <= float64(l) {
		curr += n
		est += float64(n)
		d.Allowed = true
		*s = State{Set: true, N: curr, Prev: prev, T: idx}
	} else {
		d.RetryAfter = micros(lag + slidingRetry(l, w, elapsed, curr, prev, n))
	}
	d.Remaining = max(0, l-int64(math.Ceil(est)))
	switch {
	case curr > 0:
		d.Reset = micros(lag + 2*w - elapsed)
	case prev > 0:
		d.Reset = micros(lag + w - elapsed)
	}
	*out = d
}

// weighted returns count·(part/w) as a float64, the way the Lua script does.
func weighted(count, part, w int64) float64 {
	return float64(count) * (float64(part) / float64(w))
}

// slidingRetry finds the smallest wait after which a request of cost n fits,
// assuming nothing else is admitted meanwhile. Within the current window the
// previous window's weight decays; if curr+n alone exceeds L it must wait for
// the next window, where curr becomes the decaying previous count. The result
// is the first µs at which the float estimate fits, so the float rounding can
// never make it early.
//
// It is found by bisection: fits(e) is monotone in e (every float operation
// in it is correctly rounded, hence monotone), and a linear walk from the
// closed-form estimate took O(W) steps when L is large, where the float sum
// absorbs the previous window's small weight for a long stretch: 3 s for
// L=2^50 and W=1h, and the Lua mirror ran the same walk inside Redis.
func slidingRetry(l, w, elapsed, curr, prev, n int64) int64 {
	fits := func(e, c, pv int64) bool {
		return weighted(pv, w-e, w)+float64(c)+float64(n) <= float64(l)
	}
	if curr+n <= l && prev > 0 {
		if e := firstFit(elapsed+1, w, func(e int64) bool { return fits(e, curr, prev) }); e < w {
			return e - elapsed
		}
	}
	// next window: prev' = curr, curr' = 0
	if curr == 0 {
		return w - elapsed
	}
	// For n > L (only PeekAt's view, n = 2L, whose retry is unused) nothing
	// ever fits and this returns 2W − elapsed.
	return w - elapsed + firstFit(0, w, func(e int64) bool { return fits(e, 0, curr) })
}

// firstFit returns the smallest e in [lo, hi) with fits(e), or hi if there
// is none; fits must be monotone (false, then true).
func firstFit(lo, hi int64, fits func(int64) bool) int64 {
	for lo < hi {
		mid := lo + (hi-lo)/2
		if fits(mid) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo
}
