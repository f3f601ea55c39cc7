package simulate

import (
	"context"
	"fmt"
	"time"

	"github.com/sluice-gw/sluice/ratelimit"

	"github.com/sluice-gw/sluice/ratelimit/kit"
	"github.com/sluice-gw/sluice/store/memory"
)

// Spec is one policy to simulate.
type Spec struct {
	// Label names the policy in reports and charts.
	Label string
	// Policy is the policy; it must not be nil.
	Policy *ratelimit.Policy
	// Window is the length W of "the most admitted in any window W" and of the
	// exact sliding log the policy is compared with; zero means Policy.Period().
	Window time.Duration
}

// MeasureWindow returns W, the window the spec is measured over: Window, or
// the policy's period when Window is zero, in whole microseconds and at
// least one.
func (s Spec) MeasureWindow() time.Duration { return time.Duration(s.window()) * time.Microsecond }

// window returns the spec's measurement window in µs.
func (s Spec) window() int64 {
	if s.Window > 0 {
		return s.Window.Microseconds()
	}
	return max(1, s.Policy.Period().Microseconds())
}

// Outcome is one policy's verdict on one request.
type Outcome struct {
	// Allowed reports that the policy admitted the request.
	Allowed bool
	// Delay is how long shape mode holds the request; zero otherwise.
	Delay time.Duration
	// Exact is the verdict of an exact sliding log of the spec's limit and
	// window over the same policy's admitted history: what a perfect limiter
	// would have said at this moment.
	Exact bool
}

// Result is what one policy did with every request of a simulation.
type Result struct {
	Spec
	// Outcomes holds one Outcome per event, in event order.
	Outcomes []Outcome
}

// Run decides every event under each spec through a memory store whose
// manual clock is set to the event's time (Epoch + At), in event order.
// Every spec gets a store of its own. It returns an error if a request's
// cost is outside a policy's range.
func Run(specs []Spec, events []Event) ([]Result, error) {
	res := make([]Result, len(specs))
	for i, sp := range specs {
		out, err := runOne(sp, events)
		if err != nil {
			return nil, fmt.Errorf("policy %s: %w", sp.Label, err)
		}
		res[i] = Result{Spec: sp, Outcomes: out}
	}
	return res, nil
}

// runOne simulates one spec.
func runOne(sp Spec, events []Event) ([]Outcome, error) {
	if sp.Policy.IsConcurrency() {
		return runLeases(sp, events)
	}
	clock := kit.NewManualClock(Epoch)
	// The sweeper runs on real time; it only drops state that is already
	// equivalent to none, so it cannot change a decision.
	st, err := memory.New(memory.Options{Clock: clock, Shards: 16, SweepInterval: time.Hour})
	if err != nil {
		return nil, err
	}
	defer st.Close()
	ctx := context.Background()
	w, l := sp.window(), sp.Policy.Max()
	exact := map[string]*ring{}
	reqs := make([]ratelimit.Request, 1)
	dec := make([]ratelimit.Decision, 1)
	out := make([]Outcome, len(events))
	for i, e := range events {
		clock.Set(Epoch.Add(e.At))
		reqs[0] = ratelimit.Request{Key: e.Key, Policy: sp.Policy, Cost: e.Cost}
		ok, err := st.Evaluate(ctx, reqs, dec)
		if err != nil {
			return nil, fmt.Errorf("request %d at %v (key %q, cost %d): %w", i, e.At, e.Key, e.Cost, err)
		}
		r := exact[e.Key]
		if r == nil {
			r = &ring{}
			exact[e.Key] = r
		}
		now := e.At.Microseconds()
		out[i] = Outcome{Allowed: ok, Delay: dec[0].Delay, Exact: r.sum(now, w)+e.Cost <= l}
		if ok {
			r.push(now, e.Cost)
		}
	}
	return out, nil
}

// ring is the admitted history of one key for the exact sliding log:
// (time, cost) pairs, oldest first, with a running sum.
type ring struct {
	at, n []int64
	head  int
	total int64
}

// sum drops entries at or before now−w and returns the units left, those in (now−w, now].
func (r *ring) sum(now, w int64) int64 {
	for r.head < len(r.at) && r.at[r.head] <= now-w {
		r.total -= r.n[r.head]
		r.head++
	}
	if r.head > 1024 && r.head > len(r.at)/2 { // compact
		r.at, r.n = append(r.at[:0], r.at[r.head:]...), append(r.n[:0], r.n[r.head:]...)
		r.head = 0
	}
	return r.total
}

// push records an admission.
func (r *ring) push(at, n int64) {
	r.at, r.n = append(r.at, at), append(r.n, n)
	r.total += n
}
