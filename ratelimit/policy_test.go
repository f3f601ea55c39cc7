package ratelimit

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

func TestNewPolicyRejects(t *testing.T) {
	const huge = MaxAmount + 1
	tests := []struct {
		name string
		cfg  PolicyConfig
		want []string // each must appear in the error
	}{
		{"no algorithm", PolicyConfig{Capacity: 1, Rate: 1}, []string{"algorithm is required"}},
		{"unknown algorithm", PolicyConfig{Algorithm: "leaky", Capacity: 1, Rate: 1}, []string{`unknown algorithm "leaky"`, "token_bucket"}},

		{"zero capacity", PolicyConfig{Algorithm: TokenBucket, Rate: 1}, []string{"capacity must be at least 1, got 0"}},
		{"negative capacity", PolicyConfig{Algorithm: LeakyBucket, Capacity: -5, Rate: 1}, []string{"capacity must be at least 1, got -5"}},
		{"capacity above 2^53", PolicyConfig{Algorithm: TokenBucket, Capacity: huge, Rate: 1}, []string{"capacity must be at most 2^53", "got 9007199254740993"}},
		{"zero limit", PolicyConfig{Algorithm: FixedWindow, Window: time.Second}, []string{"limit must be at least 1, got 0"}},
		{"limit above 2^53", PolicyConfig{Algorithm: SlidingLog, Limit: huge, Window: time.Second}, []string{"limit must be at most 2^53"}},
		{"zero burst", PolicyConfig{Algorithm: GCRA, Rate: 1}, []string{"burst must be at least 1, got 0"}},
		{"burst above 2^53", PolicyConfig{Algorithm: GCRA, Burst: huge, Rate: 1e6}, []string{"burst must be at most 2^53"}},

		{"zero rate", PolicyConfig{Algorithm: TokenBucket, Capacity: 1}, []string{"rate must be positive, got 0"}},
		{"negative rate", PolicyConfig{Algorithm: GCRA, Burst: 1, Rate: -1}, []string{"rate must be positive, got -1"}},
		{"NaN rate", PolicyConfig{Algorithm: TokenBucket, Capacity: 1, Rate: math.NaN()}, []string{"rate must be a finite number, got NaN"}},
		{"infinite rate", PolicyConfig{Algorithm: TokenBucket, Capacity: 1, Rate: math.Inf(1)}, []string{"rate must be a finite number, got +Inf"}},
		{"minus infinite rate", PolicyConfig{Algorithm: LeakyBucket, Capacity: 1, Rate: math.Inf(-1)}, []string{"rate must be a finite number, got -Inf"}},
		{"rate below minimum", PolicyConfig{Algorithm: TokenBucket, Capacity: 1, Rate: 1e-7}, []string{"rate must be at least 1e-06 per second, got 1e-07"}},
		{"rate above maximum", PolicyConfig{Algorithm: TokenBucket, Capacity: 1, Rate: 2e6}, []string{"rate must be at most 1e+06 per second, got 2e+06"}},

		{"zero window", PolicyConfig{Algorithm: FixedWindow, Limit: 1}, []string{"window must be positive, got 0s"}},
		{"negative window", PolicyConfig{Algorithm: SlidingWindow, Limit: 1, Window: -time.Second}, []string{"window must be positive, got -1s"}},
		{"window above 366 days", PolicyConfig{Algorithm: SlidingLog, Limit: 1, Window: MaxWindow + time.Microsecond}, []string{"window must be at most 8784h0m0s"}},
		{"window not whole µs", PolicyConfig{Algorithm: FixedWindow, Limit: 1, Window: 1500 * time.Nanosecond}, []string{"window must be a whole number of microseconds, got 1.5µs"}},

		{"limit on token_bucket", PolicyConfig{Algorithm: TokenBucket, Capacity: 1, Rate: 1, Limit: 3}, []string{"limit does not apply to token_bucket"}},
		{"burst on leaky_bucket", PolicyConfig{Algorithm: LeakyBucket, Capacity: 1, Rate: 1, Burst: 3}, []string{"burst does not apply to leaky_bucket"}},
		{"window on token_bucket", PolicyConfig{Algorithm: TokenBucket, Capacity: 1, Rate: 1, Window: time.Second}, []string{"window does not apply to token_bucket"}},
		{"capacity on gcra", PolicyConfig{Algorithm: GCRA, Burst: 1, Rate: 1, Capacity: 1}, []string{"capacity does not apply to gcra"}},
		{"limit on gcra", PolicyConfig{Algorithm: GCRA, Burst: 1, Rate: 1, Limit: 1}, []string{"limit does not apply to gcra"}},
		{"rate on fixed_window", PolicyConfig{Algorithm: FixedWindow, Limit: 1, Window: time.Second, Rate: 1}, []string{"rate does not apply to fixed_window"}},
		{"capacity on sliding_log", PolicyConfig{Algorithm: SlidingLog, Limit: 1, Window: time.Second, Capacity: 1}, []string{"capacity does not apply to sliding_log"}},
		{"burst on sliding_window", PolicyConfig{Algorithm: SlidingWindow, Limit: 1, Window: time.Second, Burst: 1}, []string{"burst does not apply to sliding_window"}},
		{"mode on token_bucket", PolicyConfig{Algorithm: TokenBucket, Capacity: 1, Rate: 1, Mode: Shape}, []string{"mode does not apply to token_bucket"}},
		{"max_delay on fixed_window", PolicyConfig{Algorithm: FixedWindow, Limit: 1, Window: time.Second, MaxDelay: time.Second}, []string{"max_delay does not apply to fixed_window"}},

		{"unknown mode", PolicyConfig{Algorithm: LeakyBucket, Capacity: 1, Rate: 1, Mode: "drip"}, []string{`unknown leaky_bucket mode "drip"`}},
		{"max_delay in police mode", PolicyConfig{Algorithm: LeakyBucket, Capacity: 1, Rate: 1, MaxDelay: time.Second}, []string{"max_delay applies only to mode shape"}},
		{"negative max_delay", PolicyConfig{Algorithm: LeakyBucket, Capacity: 1, Rate: 1, Mode: Shape, MaxDelay: -time.Second}, []string{"max_delay must not be negative"}},
		{"max_delay above 366 days", PolicyConfig{Algorithm: LeakyBucket, Capacity: 1, Rate: 1, Mode: Shape, MaxDelay: MaxWindow + time.Second}, []string{"max_delay must be at most"}},

		{"gcra span above 2^52µs", PolicyConfig{Algorithm: GCRA, Burst: 1 << 40, Rate: 1}, []string{"spans more than 2^52µs"}},

		// Every problem is reported, not just the first.
		{"several problems", PolicyConfig{Algorithm: TokenBucket, Rate: math.NaN(), Window: time.Second, Limit: 2},
			[]string{"capacity must be at least 1", "rate must be a finite number", "window does not apply", "limit does not apply"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := NewPolicy(tt.cfg)
			if err == nil {
				t.Fatalf("NewPolicy(%+v) = %v, want an error", tt.cfg, p)
			}
			if !errors.Is(err, ErrInvalidPolicy) {
				t.Errorf("NewPolicy(%+v) error %q does not wrap ErrInvalidPolicy", tt.cfg, err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("NewPolicy(%+v) error %q, want it to contain %q", tt.cfg, err, w)
				}
			}
			wantN := 1
			if tt.name == "several problems" {
				wantN = len(tt.want)
			}
			if n := strings.Count(err.Error(), "\n") + 1; n != wantN {
				t.Errorf("NewPolicy(%+v) reported %d problems, want %d:\n%v", tt.cfg, n, wantN, err)
			}
		})
	}
}

func TestNewPolicyAccepts(t *testing.T) {
	tests := []struct {
		cfg      PolicyConfig
		max      int64
		interval int64 // µs per unit, 0 for window algorithms
		window   int64 // µs
		period   time.Duration
	}{
		{PolicyConfig{Algorithm: TokenBucket, Capacity: 10, Rate: 1}, 10, 1_000_000, 0, 10 * time.Second},
		{PolicyConfig{Algorithm: TokenBucket, Capacity: MaxAmount, Rate: MaxRate}, MaxAmount, 1, 0, MaxAmount * time.Microsecond},
		{PolicyConfig{Algorithm: TokenBucket, Capacity: 1, Rate: MinRate}, 1, 1e12, 0, 1e12 * time.Microsecond},
		{PolicyConfig{Algorithm: LeakyBucket, Capacity: 10, Rate: 0.5}, 10, 2_000_000, 0, 20 * time.Second},
		{PolicyConfig{Algorithm: LeakyBucket, Capacity: 10, Rate: 5, Mode: Shape, MaxDelay: 2 * time.Second}, 10, 200_000, 0, 2 * time.Second},
		{PolicyConfig{Algorithm: LeakyBucket, Capacity: 10, Rate: 5, Mode: Shape}, 10, 200_000, 0, 2 * time.Second},
		{PolicyConfig{Algorithm: GCRA, Burst: 20, Rate: 10}, 20, 100_000, 0, 2 * time.Second},
		{PolicyConfig{Algorithm: GCRA, Burst: 1 << 52, Rate: MaxRate}, 1 << 52, 1, 0, (1 << 52) * time.Microsecond},
		// 0.3/s is 3333333.3µs per unit: rounded to whole µs (PolicyConfig.Rate).
		{PolicyConfig{Algorithm: GCRA, Burst: 3, Rate: 0.3}, 3, 3_333_333, 0, 9_999_999 * time.Microsecond},
		{PolicyConfig{Algorithm: TokenBucket, Capacity: 1, Rate: 0.001}, 1, 1_000_000_000, 0, 1000 * time.Second},
		{PolicyConfig{Algorithm: FixedWindow, Limit: 100, Window: time.Hour}, 100, 0, 3_600_000_000, time.Hour},
		{PolicyConfig{Algorithm: SlidingLog, Limit: MaxAmount, Window: time.Microsecond}, MaxAmount, 0, 1, time.Microsecond},
		{PolicyConfig{Algorithm: SlidingWindow, Limit: 10, Window: MaxWindow}, 10, 0, MaxWindow.Microseconds(), MaxWindow},
	}
	for _, tt := range tests {
		p, err := NewPolicy(tt.cfg)
		if err != nil {
			t.Errorf("NewPolicy(%+v): %v", tt.cfg, err)
			continue
		}
		if p.Max() != tt.max || p.interval != tt.interval || p.window != tt.window || p.Period() != tt.period {
			t.Errorf("NewPolicy(%+v) = max %d, interval %dµs, window %dµs, period %v; want %d, %d, %d, %v",
				tt.cfg, p.Max(), p.interval, p.window, p.Period(), tt.max, tt.interval, tt.window, tt.period)
		}
	}
	if p := MustPolicy(PolicyConfig{Algorithm: LeakyBucket, Capacity: 1, Rate: 1}); p.Mode() != Police || p.Config().Mode != Police {
		t.Errorf("leaky_bucket without a mode: mode %q, want police", p.Mode())
	}
}

func TestCheckCost(t *testing.T) {
	p := MustPolicy(PolicyConfig{Name: "per-user", Algorithm: TokenBucket, Capacity: 10, Rate: 1})
	for _, n := range []int64{1, 10} {
		if err := p.CheckCost(n); err != nil {
			t.Errorf("CheckCost(%d) = %v, want nil", n, err)
		}
	}
	for _, n := range []int64{0, -1, 11, math.MaxInt64} {
		err := p.CheckCost(n)
		if !errors.Is(err, ErrInvalidCost) {
			t.Errorf("CheckCost(%d) = %v, want ErrInvalidCost", n, err)
			continue
		}
		if want := `outside 1..10 of policy "per-user"`; !strings.Contains(err.Error(), want) {
			t.Errorf("CheckCost(%d) = %q, want it to contain %q", n, err, want)
		}
	}
}

func TestPolicyString(t *testing.T) {
	tests := map[string]PolicyConfig{
		"token_bucket(capacity=10, rate=1/s)":                           {Algorithm: TokenBucket, Capacity: 10, Rate: 1},
		"leaky_bucket(capacity=10, rate=0.5/s)":                         {Algorithm: LeakyBucket, Capacity: 10, Rate: 0.5},
		"leaky_bucket(capacity=10, rate=5/s, mode=shape, max_delay=2s)": {Algorithm: LeakyBucket, Capacity: 10, Rate: 5, Mode: Shape, MaxDelay: 2 * time.Second},
		"gcra(burst=20, rate=10/s)":                                     {Algorithm: GCRA, Burst: 20, Rate: 10},
		"sliding_log(limit=10, window=1m0s)":                            {Algorithm: SlidingLog, Limit: 10, Window: time.Minute},
	}
	for want, cfg := range tests {
		if got := MustPolicy(cfg).String(); got != want {
			t.Errorf("String() = %q, want %q", got, want)
		}
	}
}
