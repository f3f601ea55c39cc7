package kit

import (
	"errors"
	"testing"
	"time"

	"github.com/sluice-gw/sluice/ratelimit"
)

func TestCheckRequests(t *testing.T) {
	p := ratelimit.MustPolicy(ratelimit.PolicyConfig{Name: "per-user", Algorithm: ratelimit.TokenBucket, Capacity: 10, Rate: 1})
	// A Request's zero cost means one; CheckRequests applies that default.
	out := make([]ratelimit.Decision, 1)
	if err := CheckRequests([]ratelimit.Request{{Key: "k", Policy: p}}, out); err != nil {
		t.Errorf("CheckRequests(cost 0) = %v, want nil", err)
	}
	if err := CheckRequests([]ratelimit.Request{{Key: "k", Policy: p, Cost: 11}}, out); !errors.Is(err, ratelimit.ErrInvalidCost) {
		t.Errorf("CheckRequests(cost 11) = %v, want ErrInvalidCost", err)
	}
	if err := CheckRequests([]ratelimit.Request{{Key: "k"}}, out); err == nil {
		t.Error("CheckRequests(nil policy) = nil, want an error")
	}
	if err := CheckRequests(make([]ratelimit.Request, 2), out); err == nil {
		t.Error("CheckRequests(2 requests, room for 1) = nil, want an error")
	}
	for _, tt := range []struct{ cost, want int64 }{{0, 1}, {1, 1}, {7, 7}} {
		if got := Cost(ratelimit.Request{Policy: p, Cost: tt.cost}); got != tt.want {
			t.Errorf("Cost(Request{Cost: %d}) = %d, want %d", tt.cost, got, tt.want)
		}
	}
}

// TestParamsOf checks the integers the steps compute with, for each shape of
// policy: the rate rounded to whole µs per unit, the window and max delay in µs.
func TestParamsOf(t *testing.T) {
	tests := []struct {
		cfg  ratelimit.PolicyConfig
		want Params
	}{
		{ratelimit.PolicyConfig{Algorithm: ratelimit.TokenBucket, Capacity: 10, Rate: 3}, Params{Max: 10, IntervalMicros: 333_333}},
		{ratelimit.PolicyConfig{Algorithm: ratelimit.LeakyBucket, Capacity: 4, Rate: 2, Mode: ratelimit.Shape, MaxDelay: 1500 * time.Millisecond},
			Params{Max: 4, IntervalMicros: 500_000, MaxDelayMicros: 1_500_000}},
		{ratelimit.PolicyConfig{Algorithm: ratelimit.GCRA, Burst: 20, Rate: ratelimit.MaxRate}, Params{Max: 20, IntervalMicros: 1}},
		{ratelimit.PolicyConfig{Algorithm: ratelimit.SlidingLog, Limit: 5, Window: time.Minute}, Params{Max: 5, WindowMicros: 60_000_000}},
	}
	for _, tt := range tests {
		if got := ParamsOf(ratelimit.MustPolicy(tt.cfg)); got != tt.want {
			t.Errorf("ParamsOf(%+v) = %+v, want %+v", tt.cfg, got, tt.want)
		}
	}
}

// TestTTL checks that a state is kept until its Reset, and at least 1µs.
func TestTTL(t *testing.T) {
	for _, tt := range []struct{ reset, want time.Duration }{
		{0, time.Microsecond},
		{time.Microsecond, time.Microsecond},
		{45 * time.Second, 45 * time.Second},
	} {
		if got := TTL(ratelimit.Decision{Reset: tt.reset}); got != tt.want {
			t.Errorf("TTL(Decision{Reset: %v}) = %v, want %v", tt.reset, got, tt.want)
		}
	}
}
