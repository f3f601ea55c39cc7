package simulate

import (
	"container/heap"
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/sluice-gw/sluice/ratelimit"
	"github.com/sluice-gw/sluice/ratelimit/kit"
	"github.com/sluice-gw/sluice/store/memory"
)

// runLeases simulates a concurrency policy: each admitted request takes a
// lease and gives it back Event.Hold later, as the gateway does when the
// response ends. No instance dies in a simulation, so no lease has to
// expire: the policy is simulated with the longest lease TTL, the gateway's
// renewals in effect. Exact is what a perfect in-flight count says: fewer
// than the limit of the key's admitted requests are still running.
func runLeases(sp Spec, events []Event) ([]Outcome, error) {
	cfg := sp.Policy.Config()
	cfg.LeaseTTL = ratelimit.MaxWindow
	p, err := ratelimit.NewPolicy(cfg)
	if err != nil {
		return nil, err
	}
	clock := kit.NewManualClock(Epoch)
	st, err := memory.New(memory.Options{Clock: clock, Shards: 16, SweepInterval: time.Hour})
	if err != nil {
		return nil, err
	}
	defer st.Close()
	ctx := context.Background()
	var running ends
	inflight := map[string]int64{}
	reqs := make([]ratelimit.Request, 1)
	dec := make([]ratelimit.Decision, 1)
	out := make([]Outcome, len(events))
	for i, e := range events {
		// Requests that ended at or before this one's arrival give their
		// slots back first.
		for running.Len() > 0 && running[0].at <= e.At {
			x := heap.Pop(&running).(end)
			clock.Set(Epoch.Add(x.at))
			if err := st.Release(ctx, []ratelimit.Request{x.req}); err != nil {
				return nil, err
			}
			inflight[x.req.Key]--
		}
		clock.Set(Epoch.Add(e.At))
		reqs[0] = ratelimit.Request{Key: e.Key, Policy: p, Lease: strconv.Itoa(i)}
		ok, err := st.Evaluate(ctx, reqs, dec)
		if err != nil {
			return nil, fmt.Errorf("request %d at %v (key %q): %w", i, e.At, e.Key, err)
		}
		out[i] = Outcome{Allowed: ok, Exact: inflight[e.Key] < p.Max()}
		if !ok {
			continue
		}
		if e.Hold <= 0 {
			if err := st.Release(ctx, reqs); err != nil {
				return nil, err
			}
			continue
		}
		inflight[e.Key]++
		heap.Push(&running, end{at: e.At + e.Hold, req: reqs[0]})
	}
	return out, nil
}

// end is when an admitted request's lease is given back.
type end struct {
	at  time.Duration
	req ratelimit.Request
}

// ends is a min-heap of ends by time.
type ends []end

func (h ends) Len() int           { return len(h) }
func (h ends) Less(i, j int) bool { return h[i].at < h[j].at }
func (h ends) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *ends) Push(x any)        { *h = append(*h, x.(end)) }
func (h *ends) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
