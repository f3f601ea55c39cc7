package simulate

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/sluice-gw/sluice/ratelimit"
	"github.com/sluice-gw/sluice/ratelimit/kit"
)

func ms(n int64) time.Duration { return time.Duration(n) * time.Millisecond }

func TestPatternEvents(t *testing.T) {
	t.Parallel()
	at := func(p Pattern) []time.Duration {
		t.Helper()
		ev, err := p.Events()
		if err != nil {
			t.Fatalf("%+v.Events(): %v", p, err)
		}
		var out []time.Duration
		for _, e := range ev {
			if e.Key != DefaultKey || e.Cost != max(1, p.Cost) {
				t.Fatalf("%s event %+v: want key %q, cost %d", p.Kind, e, DefaultKey, max(1, p.Cost))
			}
			out = append(out, e.At)
		}
		return out
	}
	tests := []struct {
		name string
		p    Pattern
		want []time.Duration
	}{
		{"steady", Pattern{Kind: Steady, RPS: 4, Duration: time.Second}, []time.Duration{0, ms(250), ms(500), ms(750)}},
		{"steady 3/s", Pattern{Kind: Steady, RPS: 3, Duration: time.Second}, []time.Duration{0, 333333 * time.Microsecond, 666667 * time.Microsecond}},
		{"burst once", Pattern{Kind: Burst, Count: 3, Duration: time.Hour}, []time.Duration{0, 0, 0}},
		{"burst repeated", Pattern{Kind: Burst, Count: 2, Period: time.Second, Duration: ms(2500), Cost: 3},
			[]time.Duration{0, 0, time.Second, time.Second, 2 * time.Second, 2 * time.Second}},
		{"boundary", Pattern{Kind: Boundary, Count: 2, Window: time.Second, Duration: 3 * time.Second},
			[]time.Duration{ms(900), ms(950), ms(1000), ms(1050)}},
		{"boundary spread", Pattern{Kind: Boundary, Count: 2, Window: time.Minute, Spread: time.Second, Duration: 3 * time.Minute},
			[]time.Duration{ms(59000), ms(59500), ms(60000), ms(60500)}},
		{"onoff", Pattern{Kind: OnOff, RPS: 2, On: time.Second, Off: 2 * time.Second, Duration: 5 * time.Second},
			[]time.Duration{0, ms(500), 3 * time.Second, ms(3500)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if diff := cmp.Diff(tt.want, at(tt.p)); diff != "" {
				t.Errorf("%+v.Events() times (-want +got):\n%s", tt.p, diff)
			}
		})
	}
	t.Run("poisson", func(t *testing.T) {
		t.Parallel()
		p := Pattern{Kind: Poisson, RPS: 50, Duration: 2000 * time.Second, Seed: 9}
		a := at(p)
		if n := float64(len(a)); math.Abs(n-1e5) > 5*math.Sqrt(1e5) {
			t.Errorf("poisson at 50/s over 2000s gave %v requests, want 100000 ± 5σ", n)
		}
		if !slices.IsSorted(a) {
			t.Errorf("poisson arrivals are not sorted")
		}
		// Exponential gaps: the share of gaps above the mean is 1/e.
		above := 0
		for i := 1; i < len(a); i++ {
			if a[i]-a[i-1] > ms(20) {
				above++
			}
		}
		if f := float64(above) / float64(len(a)-1); math.Abs(f-1/math.E) > 0.01 {
			t.Errorf("share of gaps above the mean = %.4f, want 1/e = %.4f", f, 1/math.E)
		}
		if b := at(p); !slices.Equal(a, b) {
			t.Errorf("the same seed gave other arrivals")
		}
		p.Seed = 10
		if b := at(p); slices.Equal(a, b) {
			t.Errorf("seeds 9 and 10 gave the same arrivals")
		}
	})
	for _, bad := range []Pattern{
		{Kind: "zigzag", Duration: time.Second},
		{Kind: ""},
		{Kind: Steady, RPS: 0, Duration: time.Second},
		{Kind: Steady, RPS: 1e9, Duration: time.Hour},
		{Kind: Steady, RPS: 1, Duration: 0},
		{Kind: Burst, Count: 0, Duration: time.Second},
		{Kind: Burst, Count: 10, Period: time.Nanosecond, Duration: time.Hour},
		{Kind: OnOff, RPS: 1, On: 0, Duration: time.Second},
		{Kind: Boundary, Count: 1, Window: time.Second, Duration: time.Second},
		{Kind: Boundary, Count: 1, Window: time.Second, Spread: 2 * time.Second, Duration: time.Minute},
		{Kind: Steady, RPS: 1, Duration: time.Second, Cost: -1},
		{Kind: Trace},
	} {
		if _, err := bad.Events(); err == nil {
			t.Errorf("%+v.Events() succeeded, want an error", bad)
		}
	}
}

func TestReadTrace(t *testing.T) {
	t.Parallel()
	ev, err := ReadTrace(strings.NewReader("time,key,cost\n1.5,a,2\n# comment\n500ms\n0.5,b\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := []Event{{At: ms(500), Key: DefaultKey, Cost: 1}, {At: ms(500), Key: "b", Cost: 1}, {At: ms(1500), Key: "a", Cost: 2}}
	if diff := cmp.Diff(want, ev); diff != "" {
		t.Errorf("ReadTrace (-want +got):\n%s", diff)
	}
	for _, tc := range []struct{ in, msg string }{
		{"1,a\nsoon,b\n", `line 2: time "soon"`},
		{"-1\n", `line 1: time "-1" is negative`},
		{"1,a,0\n", `line 1: cost "0"`},
		{"1,a,1,x\n", "line 1: want time,key,cost"},
		{"time,key,cost\n", "no requests"},
		{"1,\"a\n", "trace:"},
	} {
		if _, err := ReadTrace(strings.NewReader(tc.in)); err == nil || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("ReadTrace(%q) = %v, want an error containing %q", tc.in, err, tc.msg)
		}
	}
}

func TestCompareSpecs(t *testing.T) {
	t.Parallel()
	specs, err := CompareSpecs(100, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var algs []string
	for _, s := range specs {
		algs = append(algs, s.Label)
		if s.Policy.Max() != 100 || s.Window != time.Minute {
			t.Errorf("%s: max %d, window %v; want 100 and 1m", s.Label, s.Policy.Max(), s.Window)
		}
		if p := s.Policy.Period(); p != time.Minute {
			t.Errorf("%s: period %v, want 1m (rate L/W)", s.Label, p)
		}
	}
	want := []string{"fixed_window", "sliding_window", "sliding_log", "token_bucket", "gcra", "leaky_bucket", "leaky_bucket/shape"}
	if diff := cmp.Diff(want, algs); diff != "" {
		t.Errorf("CompareSpecs labels (-want +got):\n%s", diff)
	}
	if _, err := CompareSpecs(1, 1000*time.Hour*24); err == nil {
		t.Errorf("CompareSpecs with a window beyond MaxWindow succeeded")
	}
}

// run simulates one policy on a pattern.
func run(t *testing.T, c ratelimit.PolicyConfig, p Pattern, step time.Duration) *Report {
	t.Helper()
	pol, err := ratelimit.NewPolicy(c)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Simulation{Pattern: p, Specs: []Spec{{Label: Label(pol), Policy: pol}}, Step: step}.Run()
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// column returns one field of every bucket.
func column(tl []Bucket, f func(Bucket) int64) []int64 {
	var out []int64
	for _, b := range tl {
		out = append(out, f(b))
	}
	return out
}

// TestTokenBucketBurstThenRate: a token bucket under steady overload passes
// its capacity C at once, then r per second.
func TestTokenBucketBurstThenRate(t *testing.T) {
	t.Parallel()
	rep := run(t, ratelimit.PolicyConfig{Algorithm: ratelimit.TokenBucket, Capacity: 10, Rate: 2}, Pattern{Kind: Steady, RPS: 100, Duration: 6 * time.Second}, ms(500))
	got := column(rep.Timelines[0], func(b Bucket) int64 { return b.Admitted })
	// 10 at once (the first token refills 500ms after the first request
	// took one), then 1 per 500ms.
	want := []int64{10, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("admitted per 500ms (-want +got):\n%s", diff)
	}
}

// TestLeakyShapeConstantOutput: bursts into a shaping leaky bucket leave it
// at a constant rate.
func TestLeakyShapeConstantOutput(t *testing.T) {
	t.Parallel()
	rep := run(t, ratelimit.PolicyConfig{Algorithm: ratelimit.LeakyBucket, Capacity: 10, Rate: 5, Mode: ratelimit.Shape}, Pattern{Kind: Burst, Count: 10, Period: 2 * time.Second, Duration: 8 * time.Second}, ms(200))
	out := column(rep.Timelines[0], func(b Bucket) int64 { return b.Out })
	for i, n := range out {
		if n != 1 {
			t.Fatalf("forwarded per 200ms = %v, want 1 in every bucket (first off at %v)", out, time.Duration(i)*ms(200))
		}
	}
	s := rep.Summaries[0]
	if s.OutRateVariance != 0 || s.Admitted != 40 || s.MaxWait != ms(1800) || s.MeanWait != ms(900) {
		t.Errorf("summary = %+v, want variance 0, 40 admitted, max wait 1.8s, mean 900ms", s)
	}
	police := run(t, ratelimit.PolicyConfig{Algorithm: ratelimit.LeakyBucket, Capacity: 10, Rate: 5}, rep.Pattern, ms(200))
	if v := police.Summaries[0].OutRateVariance; v < 100 {
		t.Errorf("police mode output variance = %v, want the bursts to show (> 100)", v)
	}
}

// TestExactSlidingLog: the sliding log is the exact reference, so it never
// disagrees with itself, on any traffic and several keys.
func TestExactSlidingLog(t *testing.T) {
	t.Parallel()
	var ev []Event
	p := Pattern{Kind: Poisson, RPS: 40, Duration: 200 * time.Second, Seed: 3}
	gen, err := p.Events()
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range gen {
		e.Key = []string{"a", "b", "c"}[i%3]
		e.Cost = int64(1 + i%4)
		ev = append(ev, e)
	}
	rep := run(t, ratelimit.PolicyConfig{Algorithm: ratelimit.SlidingLog, Limit: 12, Window: time.Second}, Pattern{Kind: Trace, Recorded: ev}, time.Second)
	s := rep.Summaries[0]
	if s.WronglyAllowed != 0 || s.WronglyDenied != 0 || s.MaxInWindow > 12 {
		t.Errorf("sliding_log vs itself: %+v; want no disagreement and max/W ≤ 12", s)
	}
	if s.Denied == 0 || s.Admitted == 0 {
		t.Errorf("traffic did not reach the limit: %+v", s)
	}
	fw := run(t, ratelimit.PolicyConfig{Algorithm: ratelimit.FixedWindow, Limit: 12, Window: time.Second}, Pattern{Kind: Trace, Recorded: ev}, time.Second)
	if f := fw.Summaries[0]; f.WronglyAllowed == 0 || f.MaxInWindow <= 12 {
		t.Errorf("fixed_window on the same traffic: %+v; want it to exceed the exact limit somewhere", f)
	}
}

// TestRunMatchesStep replays the simulation's decisions with the pure step
// function: Run goes through the memory store but must decide exactly as
// kit.StepAt does on the same timeline.
func TestRunMatchesStep(t *testing.T) {
	t.Parallel()
	ev, err := Pattern{Kind: Poisson, RPS: 30, Duration: 30 * time.Second, Seed: 5, Cost: 2}.Events()
	if err != nil {
		t.Fatal(err)
	}
	specs, err := CompareSpecs(8, 500*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Run(specs, ev)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		var st kit.State
		for i, e := range ev {
			next, d := stepCopy(r.Policy, st, Epoch.Add(e.At).UnixMicro(), e.Cost)
			if d.Allowed {
				st = next
			}
			if o := r.Outcomes[i]; o.Allowed != d.Allowed || o.Delay != d.Delay {
				t.Fatalf("%s request %d at %v: Run gave %+v, StepAt %+v", r.Label, i, e.At, o, d)
			}
		}
	}
}

// TestSpecMeasureWindow: W is the spec's Window when set, else the policy's
// period in whole microseconds.
func TestSpecMeasureWindow(t *testing.T) {
	t.Parallel()
	p, err := ratelimit.NewPolicy(ratelimit.PolicyConfig{Algorithm: ratelimit.TokenBucket, Capacity: 10, Rate: 3})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := (Spec{Policy: p}).MeasureWindow(), p.Period().Truncate(time.Microsecond); got != want || got < 3*time.Second {
		t.Errorf("MeasureWindow without Window = %v, want the period %v (about capacity/rate) in whole µs", got, want)
	}
	if got := (Spec{Policy: p, Window: time.Minute}).MeasureWindow(); got != time.Minute {
		t.Errorf("MeasureWindow with Window 1m = %v, want 1m", got)
	}
}

// stepCopy runs kit.StepAt on a copy of s and returns the new state and the
// decision, leaving s as it was.
func stepCopy(p *ratelimit.Policy, s kit.State, nowMicros, n int64) (kit.State, ratelimit.Decision) {
	var d ratelimit.Decision
	kit.StepAt(p, &s, nowMicros, n, &d)
	return s, d
}
