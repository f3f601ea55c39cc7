package simulate

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-gw/sluice/config"
	"github.com/sluice-gw/sluice/ratelimit"
)

// ParsePolicy parses a policy written on the command line as
// ALGORITHM[:FIELD=VALUE,...], for example
// "token_bucket:capacity=10,rate=1" or "sliding_log:limit=100,window=1m".
// Fields are those of a config file's policy (capacity, limit, burst, rate,
// window, mode, max_delay) plus name, the label in reports. Rates take the
// config forms: 10, 0.5, 100/1m, 5/s.
func ParsePolicy(s string) (Spec, error) {
	alg, fields, _ := strings.Cut(s, ":")
	c := ratelimit.PolicyConfig{Algorithm: ratelimit.Algorithm(strings.TrimSpace(alg))}
	var errs []error
	if strings.TrimSpace(fields) != "" {
		seen := map[string]bool{}
		for _, f := range strings.Split(fields, ",") {
			k, _, _ := strings.Cut(f, "=")
			if k = strings.TrimSpace(k); seen[k] {
				errs = append(errs, fmt.Errorf("%s given twice", k))
				continue
			}
			seen[k] = true
			if err := setField(&c, f); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if len(errs) > 0 {
		return Spec{}, fmt.Errorf("policy %q: %w", s, errors.Join(errs...))
	}
	p, err := ratelimit.NewPolicy(c)
	if err != nil {
		return Spec{}, fmt.Errorf("policy %q: %w", s, err)
	}
	return Spec{Label: label(p), Policy: p}, nil
}

// setField sets one FIELD=VALUE of c.
func setField(c *ratelimit.PolicyConfig, f string) error {
	k, v, ok := strings.Cut(f, "=")
	k, v = strings.TrimSpace(k), strings.TrimSpace(v)
	if !ok || v == "" {
		return fmt.Errorf("%q: want FIELD=VALUE", f)
	}
	amount := func(dst *int64) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return fmt.Errorf("%s: %q is not a whole number", k, v)
		}
		*dst = n
		return nil
	}
	duration := func(dst *time.Duration) error {
		d, err := time.ParseDuration(v)
		if err != nil {
			return fmt.Errorf("%s: %q is not a duration (write e.g. 1s, 100ms, 1m)", k, v)
		}
		*dst = d
		return nil
	}
	switch k {
	case "name":
		c.Name = v
	case "capacity":
		return amount(&c.Capacity)
	case "limit":
		return amount(&c.Limit)
	case "burst":
		return amount(&c.Burst)
	case "rate":
		r, err := config.ParseRate(v)
		if err != nil {
			return err
		}
		c.Rate = r
	case "window":
		return duration(&c.Window)
	case "max_delay":
		return duration(&c.MaxDelay)
	case "mode":
		c.Mode = ratelimit.Mode(v)
	default:
		return fmt.Errorf("unknown field %q (name, capacity, limit, burst, rate, window, mode, max_delay)", k)
	}
	return nil
}

// label names p in reports: its name, or its algorithm (with "/shape" for a
// shaping leaky bucket).
func label(p *ratelimit.Policy) string {
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
		specs[i] = Spec{Label: label(p), Policy: p, Window: window}
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
