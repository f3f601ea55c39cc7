package ratelimit

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/sluice-gw/sluice/internal/testdiff"
)

// TestPolicyErrorFields checks that each problem NewPolicy reports names its
// field, the value given and the rule, so that a caller can point at it.
func TestPolicyErrorFields(t *testing.T) {
	tests := []struct {
		name string
		cfg  PolicyConfig
		want []PolicyError // Detail left out
	}{
		{"no algorithm", PolicyConfig{}, []PolicyError{{Field: "algorithm", Value: Algorithm(""), Reason: ReasonMissing}}},
		{"unknown algorithm", PolicyConfig{Algorithm: "leaky"}, []PolicyError{{Field: "algorithm", Value: Algorithm("leaky"), Reason: ReasonUnknown}}},
		{"zero capacity", PolicyConfig{Algorithm: TokenBucket, Rate: 1}, []PolicyError{{Field: "capacity", Value: int64(0), Reason: ReasonTooSmall}}},
		{"huge limit", PolicyConfig{Algorithm: FixedWindow, Limit: MaxAmount + 1, Window: time.Second},
			[]PolicyError{{Field: "limit", Value: int64(MaxAmount + 1), Reason: ReasonTooLarge}}},
		{"NaN rate and a window", PolicyConfig{Algorithm: GCRA, Burst: 1, Rate: math.Inf(1), Window: time.Second}, []PolicyError{
			{Field: "rate", Value: math.Inf(1), Reason: ReasonNotFinite},
			{Field: "window", Value: time.Second, Reason: ReasonNotApplicable, Takes: []string{"burst", "rate"}},
		}},
		{"rate below minimum", PolicyConfig{Algorithm: TokenBucket, Capacity: 1, Rate: 1e-7}, []PolicyError{{Field: "rate", Value: 1e-7, Reason: ReasonTooSmall}}},
		{"zero window", PolicyConfig{Algorithm: SlidingLog, Limit: 1}, []PolicyError{{Field: "window", Value: time.Duration(0), Reason: ReasonNotPositive}}},
		{"window not whole µs", PolicyConfig{Algorithm: SlidingLog, Limit: 1, Window: 1500}, []PolicyError{{Field: "window", Value: time.Duration(1500), Reason: ReasonNotWhole}}},
		{"mode on fixed_window", PolicyConfig{Algorithm: FixedWindow, Limit: 1, Window: time.Second, Mode: Shape},
			[]PolicyError{{Field: "mode", Value: Shape, Reason: ReasonNotApplicable, Takes: []string{"limit", "window"}}}},
		{"unknown mode", PolicyConfig{Algorithm: LeakyBucket, Capacity: 1, Rate: 1, Mode: "drip"}, []PolicyError{{Field: "mode", Value: Mode("drip"), Reason: ReasonUnknown}}},
		{"max_delay in police mode", PolicyConfig{Algorithm: LeakyBucket, Capacity: 1, Rate: 1, MaxDelay: time.Second},
			[]PolicyError{{Field: "max_delay", Value: time.Second, Reason: ReasonShapeOnly}}},
		{"negative max_delay", PolicyConfig{Algorithm: LeakyBucket, Capacity: 1, Rate: 1, Mode: Shape, MaxDelay: -1},
			[]PolicyError{{Field: "max_delay", Value: time.Duration(-1), Reason: ReasonTooSmall}}},
		{"gcra span", PolicyConfig{Algorithm: GCRA, Burst: 1 << 40, Rate: 1}, []PolicyError{{Reason: ReasonInvalid}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewPolicy(tt.cfg)
			if err == nil {
				t.Fatalf("NewPolicy(%+v) = nil error, want %d problems", tt.cfg, len(tt.want))
			}
			var got []PolicyError
			for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
				var pe *PolicyError
				if !errors.As(e, &pe) {
					t.Fatalf("NewPolicy(%+v): %v is not a *PolicyError", tt.cfg, e)
				}
				if !errors.Is(pe, ErrInvalidPolicy) || pe.Error() != "invalid policy: "+pe.Detail || pe.Detail == "" {
					t.Errorf("NewPolicy(%+v): %q: want \"invalid policy: \" + a Detail, wrapping ErrInvalidPolicy", tt.cfg, pe)
				}
				c := *pe
				c.Detail = ""
				got = append(got, c)
			}
			if diff := testdiff.Diff(tt.want, got); diff != "" {
				t.Errorf("NewPolicy(%+v) problems (-want +got):\n%s", tt.cfg, diff)
			}
		})
	}
}

// TestPolicyErrorTakesIsACopy checks that changing one error's Takes does not
// change the next.
func TestPolicyErrorTakesIsACopy(t *testing.T) {
	cfg := PolicyConfig{Algorithm: GCRA, Burst: 1, Rate: 1, Limit: 2}
	_, err := NewPolicy(cfg)
	var pe *PolicyError
	if !errors.As(err, &pe) {
		t.Fatalf("NewPolicy(%+v) = %v, want a *PolicyError", cfg, err)
	}
	pe.Takes[0] = "changed"
	_, err = NewPolicy(cfg)
	if !errors.As(err, &pe) || pe.Takes[0] != "burst" {
		t.Errorf("NewPolicy(%+v) Takes = %v after a caller changed an earlier one, want [burst rate]", cfg, pe.Takes)
	}
}
