package simulate

import (
	"cmp"
	"slices"
	"time"

	"github.com/sluice-gw/sluice/ratelimit"
)

// Bucket counts one step of a timeline for one policy.
type Bucket struct {
	// Start is the bucket's start since Epoch; it spans [Start, Start+step).
	Start time.Duration
	// Sent counts requests arriving in the bucket.
	Sent int64
	// Admitted and Denied count the bucket's arrivals by verdict.
	Admitted, Denied int64
	// Out counts admitted requests forwarded in the bucket: at arrival, or
	// after the shape-mode delay.
	Out int64
	// Peak is the most units of one key forwarded in any window W (the spec's
	// window) that ends within the bucket.
	Peak int64
}

// Summary is what one policy did over a whole simulation.
type Summary struct {
	// Label names the policy in reports.
	Label string
	// Policy describes the policy's rule, e.g. "gcra(burst=10, rate=2/s)".
	Policy string
	// Window is W of MaxInWindow and of the exact comparison.
	Window time.Duration
	// Requests, Admitted and Denied count requests.
	Requests, Admitted, Denied int64
	// MaxInWindow is the most units of one key forwarded in any window W.
	MaxInWindow int64
	// Limit is the policy's capacity, limit or burst.
	Limit int64
	// Shape reports leaky-bucket shape mode; only then are waits non-zero.
	Shape bool
	// MeanWait and MaxWait are over admitted requests.
	MeanWait, MaxWait time.Duration
	// OutRateVariance is the population variance of the forwarded rate, per
	// second squared, over the buckets of the timeline.
	OutRateVariance float64
	// WronglyAllowed and WronglyDenied count requests on which the policy and
	// an exact sliding log of (Limit, Window) over the policy's own admitted
	// history disagree.
	WronglyAllowed, WronglyDenied int64
	// MaxInFlight is the most admitted requests of one key in flight at
	// once, each from its arrival until its Event.Hold has passed (a request
	// without a hold ends as it arrives and is not counted).
	MaxInFlight int64
}

// endOf returns the end of the timeline for results: the first multiple of
// step after both duration and the last arrival or forwarding time, and at
// least one step.
func endOf(results []Result, events []Event, duration, step time.Duration) time.Duration {
	end := duration
	for _, r := range results {
		for i, o := range r.Outcomes {
			if o.Allowed {
				end = max(end, events[i].At+o.Delay+1)
			}
		}
	}
	if len(events) > 0 {
		end = max(end, events[len(events)-1].At+1)
	}
	n := max(1, (end+step-1)/step)
	return n * step
}

// timeline counts r's outcomes in buckets of step over [0, end); logs are
// r's forwarded requests by key.
func timeline(r Result, events []Event, logs []keyLog, step, end time.Duration) []Bucket {
	n := int((end + step - 1) / step)
	b := make([]Bucket, n)
	for i := range b {
		b[i].Start = time.Duration(i) * step
	}
	at := func(t time.Duration) *Bucket { return &b[min(n-1, int(t/step))] }
	for i, o := range r.Outcomes {
		e := at(events[i].At)
		e.Sent++
		if o.Allowed {
			e.Admitted++
			at(events[i].At+o.Delay).Out++
		} else {
			e.Denied++
		}
	}
	for _, k := range logs {
		k.peaks(b, step.Microseconds(), r.window())
	}
	return b
}

// keyLog is one key's forwarding times (µs, sorted) with prefix sums of
// units and, for each time, the units in the window ending there.
type keyLog struct {
	at  []int64
	pre []int64 // pre[i] = units of at[:i]
	in  []int64 // in[i] = units forwarded in (at[i]−w, at[i]]
}

// forwarded groups r's admitted requests by key, in key order, and counts
// each one's trailing window of r's measurement window.
func forwarded(r Result, events []Event) []keyLog {
	type fw struct{ at, n int64 }
	by := map[string][]fw{}
	for i, o := range r.Outcomes {
		if o.Allowed {
			e := events[i]
			by[e.Key] = append(by[e.Key], fw{(e.At + o.Delay).Microseconds(), e.Cost})
		}
	}
	keys := make([]string, 0, len(by))
	for k := range by {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	w := r.window()
	logs := make([]keyLog, 0, len(keys))
	for _, k := range keys {
		f := by[k]
		slices.SortStableFunc(f, func(a, b fw) int { return cmp.Compare(a.at, b.at) })
		l := keyLog{at: make([]int64, len(f)), pre: make([]int64, len(f)+1), in: make([]int64, len(f))}
		for i, x := range f {
			l.at[i], l.pre[i+1] = x.at, l.pre[i]+x.n
		}
		lo, hi := 0, 0
		for i, t := range l.at {
			for hi < len(l.at) && l.at[hi] <= t {
				hi++
			}
			for l.at[lo] <= t-w {
				lo++
			}
			l.in[i] = l.pre[hi] - l.pre[lo]
		}
		logs = append(logs, l)
	}
	return logs
}

// peaks raises each bucket's Peak to the most units of this key in a window
// (t−w, t] for t in the bucket. The count only rises at a forwarding time,
// so the maximum is at the bucket's start or at one of those.
func (k keyLog) peaks(b []Bucket, step, w int64) {
	n := len(k.at)
	if n == 0 {
		return
	}
	first := min(len(b), int(k.at[0]/step))
	last := min(len(b), int((k.at[n-1]+w)/step)+1)
	lo, hi, j := 0, 0, 0
	for i := first; i < last; i++ {
		start := b[i].Start.Microseconds()
		for hi < n && k.at[hi] <= start {
			hi++
		}
		for lo < n && k.at[lo] <= start-w {
			lo++
		}
		p := k.pre[hi] - k.pre[lo]
		for j < n && k.at[j] <= start {
			j++
		}
		for ; j < n && k.at[j] < start+step; j++ {
			p = max(p, k.in[j])
		}
		b[i].Peak = max(b[i].Peak, p)
	}
}

// summarize computes r's summary from its forwarded logs and its timeline
// buckets of width step.
func summarize(r Result, logs []keyLog, buckets []Bucket, step time.Duration) Summary {
	s := Summary{
		Label:  r.Label,
		Policy: r.Policy.String(),
		Window: time.Duration(r.window()) * time.Microsecond,
		Limit:  r.Policy.Max(),
		Shape:  r.Policy.Algorithm() == ratelimit.LeakyBucket && r.Policy.Mode() == ratelimit.Shape,
	}
	var wait time.Duration
	for _, o := range r.Outcomes {
		s.Requests++
		if o.Allowed {
			s.Admitted++
			wait += o.Delay
			s.MaxWait = max(s.MaxWait, o.Delay)
		} else {
			s.Denied++
		}
		switch {
		case o.Allowed && !o.Exact:
			s.WronglyAllowed++
		case !o.Allowed && o.Exact:
			s.WronglyDenied++
		}
	}
	if s.Admitted > 0 {
		s.MeanWait = (wait / time.Duration(s.Admitted)).Round(time.Microsecond)
	}
	for _, k := range logs {
		s.MaxInWindow = max(s.MaxInWindow, slices.Max(k.in))
	}
	if len(buckets) > 0 {
		rates := make([]float64, len(buckets))
		mean := 0.0
		for i, b := range buckets {
			rates[i] = float64(b.Out) / step.Seconds()
			mean += rates[i]
		}
		mean /= float64(len(rates))
		for _, x := range rates {
			s.OutRateVariance += (x - mean) * (x - mean)
		}
		s.OutRateVariance /= float64(len(rates))
	}
	return s
}

// maxInFlight returns the most of r's admitted requests of one key that
// were in flight at once: an admitted request runs from At to At+Hold.
func maxInFlight(r Result, events []Event) int64 {
	type edge struct {
		at  time.Duration
		key string
		d   int64
	}
	var edges []edge
	for i, o := range r.Outcomes {
		if e := events[i]; o.Allowed && e.Hold > 0 {
			edges = append(edges, edge{e.At, e.Key, 1}, edge{e.At + e.Hold, e.Key, -1})
		}
	}
	// Ends sort before starts at the same time: a request ending as
	// another arrives gives its slot back first.
	slices.SortStableFunc(edges, func(a, b edge) int {
		if a.at != b.at {
			return cmp.Compare(a.at, b.at)
		}
		return cmp.Compare(a.d, b.d)
	})
	n, most := map[string]int64{}, int64(0)
	for _, e := range edges {
		n[e.key] += e.d
		most = max(most, n[e.key])
	}
	return most
}
