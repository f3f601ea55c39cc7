package ratelimittest

import (
	"time"

	"github.com/sluice-gw/sluice/ratelimit"
)

// A model is a naive reference for one limit, written from docs/semantics.md §2 without
// the step functions' bookkeeping: it keeps what that section talks about (a
// fractional token count, the time a queue drains, every admitted timestamp,
// a count per window) in exact integer microseconds. Models assume time only
// moves forward.
type model interface {
	// peek is the decision for a request of cost n at now with nothing
	// consumed: Store.Peek's answer, and Evaluate's for a denied request.
	peek(now, n int64) ratelimit.Decision
	// take consumes n at now.
	take(now, n int64)
}

// evaluate is Evaluate's answer for a request on one limit, applying it.
func evaluate(m model, now, n int64) ratelimit.Decision {
	d := m.peek(now, n)
	if d.Allowed {
		m.take(now, n)
		after := m.peek(now, n)
		d.Remaining, d.Reset = after.Remaining, after.Reset
	}
	d.Next = untilOne(m, now, d)
	return d
}

// untilOne is Decision.Next for d, found by asking m about a request of cost 1
// after d: zero while some is left.
func untilOne(m model, now int64, d ratelimit.Decision) time.Duration {
	if d.Remaining > 0 {
		return 0
	}
	return m.peek(now, 1).RetryAfter
}

func micros(us int64) time.Duration { return time.Duration(us) * time.Microsecond }

func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }

// tokenModel is a token bucket holding a fractional number of tokens, kept
// exactly as tokens·interval µs ("scaled"): min(C, tokens + Δt·r) ≥ n.
// GCRA must answer the same.
type tokenModel struct {
	c, iv  int64
	scaled int64 // tokens·iv at time at
	at     int64
	seen   bool
}

func (m *tokenModel) avail(now int64) int64 {
	if !m.seen {
		return m.c * m.iv
	}
	return min(m.c*m.iv, m.scaled+(now-m.at))
}

func (m *tokenModel) peek(now, n int64) ratelimit.Decision {
	a := m.avail(now)
	d := ratelimit.Decision{Allowed: a >= n*m.iv, Limit: m.c, Remaining: a / m.iv, Reset: micros(m.c*m.iv - a)}
	if !d.Allowed {
		d.RetryAfter = micros(n*m.iv - a)
	}
	return d
}

func (m *tokenModel) take(now, n int64) {
	m.scaled, m.at, m.seen = m.avail(now)-n*m.iv, now, true
}

// drainModel is a leaky bucket as a queue that drains one unit per interval:
// it only remembers when the queue will be empty. The fractional level is
// (drain−now)/interval; a request fits when level + n ≤ C. In shape mode it
// waits until the queue ahead has drained, and a wait above maxDelay (when
// set) is a denial.
type drainModel struct {
	c, iv, maxDelay int64
	shape           bool
	drain           int64
}

func (m *drainModel) peek(now, n int64) ratelimit.Decision {
	backlog := max(0, m.drain-now)
	fits := backlog+n*m.iv <= m.c*m.iv
	wait := int64(0)
	if m.shape {
		wait = backlog
	}
	d := ratelimit.Decision{
		Allowed:   fits && (m.maxDelay == 0 || wait <= m.maxDelay),
		Limit:     m.c,
		Remaining: m.c - ceilDiv(backlog, m.iv),
		Reset:     micros(backlog),
	}
	if d.Allowed {
		d.Delay = micros(wait)
		return d
	}
	retry := int64(0)
	if !fits {
		retry = backlog + n*m.iv - m.c*m.iv
	}
	if m.maxDelay > 0 && wait > m.maxDelay {
		retry = max(retry, wait-m.maxDelay)
	}
	d.RetryAfter = micros(retry)
	return d
}

func (m *drainModel) take(now, n int64) { m.drain = max(m.drain, now) + n*m.iv }

// fixedModel counts units per aligned window k = floor(now/W).
type fixedModel struct {
	l, w   int64
	counts map[int64]int64
}

func newFixedModel(l, w int64) *fixedModel { return &fixedModel{l: l, w: w, counts: map[int64]int64{}} }

func (m *fixedModel) peek(now, n int64) ratelimit.Decision {
	k := now / m.w
	count, end := m.counts[k], (k+1)*m.w-now
	d := ratelimit.Decision{Allowed: count+n <= m.l, Limit: m.l, Remaining: m.l - count}
	if count > 0 {
		d.Reset = micros(end)
	}
	if !d.Allowed {
		d.RetryAfter = micros(end)
	}
	return d
}

func (m *fixedModel) take(now, n int64) { m.counts[now/m.w] += n }

// logModel keeps every admitted (time, cost) and sums those in (now−W, now].
type logModel struct {
	l, w    int64
	entries []arrival // at, cost
}

func (m *logModel) peek(now, n int64) ratelimit.Decision {
	var in []arrival
	used := int64(0)
	for _, e := range m.entries {
		if e.at > now-m.w {
			in = append(in, e)
			used += e.cost
		}
	}
	d := ratelimit.Decision{Allowed: used+n <= m.l, Limit: m.l, Remaining: m.l - used}
	if len(in) > 0 {
		d.Reset = micros(in[len(in)-1].at + m.w - now)
	}
	if !d.Allowed {
		for _, e := range in { // the oldest leave first
			used -= e.cost
			if used+n <= m.l {
				d.RetryAfter = micros(e.at + m.w - now)
				break
			}
		}
	}
	return d
}

func (m *logModel) take(now, n int64) { m.entries = append(m.entries, arrival{at: now, cost: n}) }

// slidingModel is the sliding-window counter in exact rationals: it works
// with the estimate times W, prev·(W−elapsed) + curr·W, where the store uses
// floating point.
type slidingModel struct {
	l, w   int64
	counts map[int64]int64
}

func newSlidingModel(l, w int64) *slidingModel {
	return &slidingModel{l: l, w: w, counts: map[int64]int64{}}
}

// scaled returns the window index, the elapsed time in it, prev, curr and
// estimate·W.
func (m *slidingModel) scaled(now int64) (k, elapsed, prev, curr, estW int64) {
	k = now / m.w
	elapsed = now - k*m.w
	prev, curr = m.counts[k-1], m.counts[k]
	return k, elapsed, prev, curr, prev*(m.w-elapsed) + curr*m.w
}

func (m *slidingModel) peek(now, n int64) ratelimit.Decision {
	_, elapsed, prev, curr, estW := m.scaled(now)
	d := ratelimit.Decision{Allowed: estW+n*m.w <= m.l*m.w, Limit: m.l, Remaining: max(0, m.l-ceilDiv(estW, m.w))}
	switch {
	case curr > 0:
		d.Reset = micros(2*m.w - elapsed)
	case prev > 0:
		d.Reset = micros(m.w - elapsed)
	}
	if !d.Allowed {
		d.RetryAfter = micros(m.retry(elapsed, prev, curr, n))
	}
	return d
}

// retry is the exact earliest wait: within this window while prev decays,
// else in the next one, where curr is the decaying previous count.
func (m *slidingModel) retry(elapsed, prev, curr, n int64) int64 {
	w, l := m.w, m.l
	if curr+n <= l && prev > 0 {
		// prev·(W−e) ≤ (L−curr−n)·W  ⇔  e ≥ W − ⌊(L−curr−n)·W/prev⌋
		if e := w - (l-curr-n)*w/prev; e < w {
			return max(e, elapsed) - elapsed
		}
	}
	if curr == 0 {
		return w - elapsed
	}
	e := max(0, w-(l-n)*w/curr)
	return w - elapsed + e
}

func (m *slidingModel) take(now, n int64) { m.counts[now/m.w] += n }
