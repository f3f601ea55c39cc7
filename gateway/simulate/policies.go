package simulate

import (
	"fmt"
	"strconv"
	"time"

	"github.com/sluice-gw/sluice/ratelimit"
)

// Label is the name reports give p when no other is chosen: its name, or
// its algorithm (with "/shape" for a shaping leaky bucket).
func Label(p *ratelimit.Policy) string {
	if p.Name() != "" {
		return p.Name()
	}
	if p.Mode() == ratelimit.Shape {
		return string(p.Algorithm()) + "/shape"
	}
	return string(p.Algorithm())
}

// CompareSpecs returns the six algorithms (the leaky bucket in both modes)
// with parameters equivalent to "limit units per window":
//
//	fixed_window, sliding_window, sliding_log   limit=L, window=W
//	token_bucket                                capacity=L, rate=L/W
//	gcra                                        burst=L, rate=L/W
//	leaky_bucket (police and shape)             capacity=L, rate=L/W
//
// Each admits at most L at once and L per W in the long run, and each is
// measured over the same window W.
func CompareSpecs(limit int64, window time.Duration) ([]Spec, error) {
	rate := float64(limit) / window.Seconds()
	cfgs := []ratelimit.PolicyConfig{
		{Algorithm: ratelimit.FixedWindow, Limit: limit, Window: window},
		{Algorithm: ratelimit.SlidingWindow, Limit: limit, Window: window},
		{Algorithm: ratelimit.SlidingLog, Limit: limit, Window: window},
		{Algorithm: ratelimit.TokenBucket, Capacity: limit, Rate: rate},
		{Algorithm: ratelimit.GCRA, Burst: limit, Rate: rate},
		{Algorithm: ratelimit.LeakyBucket, Capacity: limit, Rate: rate},
		{Algorithm: ratelimit.LeakyBucket, Capacity: limit, Rate: rate, Mode: ratelimit.Shape},
	}
	specs := make([]Spec, len(cfgs))
	for i, c := range cfgs {
		p, err := ratelimit.NewPolicy(c)
		if err != nil {
			return nil, fmt.Errorf("compare with limit %d per %v: %w", limit, window, err)
		}
		specs[i] = Spec{Label: Label(p), Policy: p, Window: window}
	}
	return specs, nil
}

// uniqueLabels appends "#2", "#3"… to repeated labels.
func uniqueLabels(specs []Spec) {
	seen := map[string]int{}
	for i := range specs {
		seen[specs[i].Label]++
		if n := seen[specs[i].Label]; n > 1 {
			specs[i].Label += "#" + strconv.Itoa(n)
		}
	}
}
