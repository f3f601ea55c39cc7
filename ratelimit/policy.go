package ratelimit

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/sluice-gw/sluice/ratelimit/internal/params"
)

// Algorithm names one of the six rate-limiting algorithms. The string values
// are the ones used in configuration files.
type Algorithm string

// The algorithms sluice implements. See the package documentation and
// docs/algorithms.md for the rule each one follows.
const (
	TokenBucket   Algorithm = "token_bucket"
	LeakyBucket   Algorithm = "leaky_bucket"
	FixedWindow   Algorithm = "fixed_window"
	SlidingLog    Algorithm = "sliding_log"
	SlidingWindow Algorithm = "sliding_window"
	GCRA          Algorithm = "gcra"
)

// Algorithms lists every rate algorithm in a stable order. Concurrency, the
// in-flight limit, is not among them: it counts leases, not units over time
// (see [LeaseStore]).
var Algorithms = []Algorithm{TokenBucket, LeakyBucket, FixedWindow, SlidingLog, SlidingWindow, GCRA}

// Mode is the leaky bucket's behaviour when a request fits: police admits it
// at once, shape holds it until its turn so the output rate is even.
type Mode string

// Leaky bucket modes.
const (
	Police Mode = "police"
	Shape  Mode = "shape"
)

// Bounds on policy parameters. They keep every quantity an algorithm computes
// an integer below 2^53, so it is exact both in Go's int64 and in the double
// precision numbers of Redis' Lua.
const (
	// MaxAmount is the largest capacity, limit, burst or cost: 2^53.
	MaxAmount = 1 << 53
	// MinRate is the smallest rate: one unit per 10^6 seconds (about 11.6 days).
	MinRate = 1e-6
	// MaxRate is the largest rate: 10^6 per second, one unit per microsecond.
	MaxRate = 1e6
	// MaxWindow is the longest window or max_delay: 366 days.
	MaxWindow = 366 * 24 * time.Hour
)

// ErrInvalidPolicy is wrapped by every error NewPolicy returns.
var ErrInvalidPolicy = errors.New("invalid policy")

// ErrInvalidCost is returned by a Store or Limiter for a cost below 1 or above
// the policy's limit: such a request could never be admitted.
var ErrInvalidCost = errors.New("invalid cost")

// PolicyConfig describes a policy before validation. Which fields matter
// depends on Algorithm:
//
//	token_bucket    Capacity, Rate
//	leaky_bucket    Capacity, Rate, Mode (default police), MaxDelay (shape only; zero means no bound)
//	fixed_window    Limit, Window
//	sliding_log     Limit, Window
//	sliding_window  Limit, Window
//	gcra            Burst, Rate
//	concurrency     Limit, LeaseTTL (default DefaultLeaseTTL)
//
// Fields that do not apply to the algorithm must be zero.
type PolicyConfig struct {
	// Name identifies the policy in headers, metrics and state keys. It may be empty
	// for library use.
	Name      string
	Algorithm Algorithm
	// Capacity is the bucket size for token_bucket and leaky_bucket: 1..2^53.
	Capacity int64
	// Limit is the number of units per Window for the window algorithms: 1..2^53.
	Limit int64
	// Burst is gcra's burst: 1..2^53.
	Burst int64
	// Rate is in units per second for token_bucket (refill), leaky_bucket (leak)
	// and gcra: MinRate..MaxRate. It is rounded to a whole number of microseconds
	// per unit (1e6/Rate), which is exact for every rate that divides 10^6 and
	// otherwise off by less than one part in 10^6/Rate.
	Rate float64
	// Window is the window length of the window algorithms, at least 1µs and a
	// whole number of microseconds.
	Window time.Duration
	// Mode is leaky_bucket's mode; empty means Police.
	Mode Mode
	// MaxDelay bounds how long shape mode holds a request; zero means no bound
	// beyond the capacity.
	MaxDelay time.Duration
	// Compat, for token_bucket only, makes the policy follow another
	// product's state and arithmetic (CompatSCG, CompatSCG41); empty means
	// sluice's own. Both SCG values need a whole Rate.
	Compat Compat
	// LeaseTTL is how long a concurrency lease lives unless renewed or
	// released: MinLeaseTTL..MaxWindow, a whole number of milliseconds; zero
	// means DefaultLeaseTTL.
	LeaseTTL time.Duration
}

// Policy is a validated, immutable rate-limit policy. It is safe for
// concurrent use. Create one with NewPolicy.
type Policy struct {
	cfg      PolicyConfig
	max      int64 // capacity, limit or burst
	interval int64 // microseconds per unit (bucket algorithms, gcra)
	window   int64 // microseconds (window algorithms)
	maxDelay int64 // microseconds, shape mode; 0 = unbounded
	leaseTTL int64 // microseconds, concurrency
}

// NewPolicy validates c and returns the policy. Every problem found is
// reported, joined: each is a *[PolicyError] naming the field at fault, and
// each wraps ErrInvalidPolicy.
func NewPolicy(c PolicyConfig) (*Policy, error) {
	var errs []error
	bad := func(field string, value any, reason PolicyReason, format string, args ...any) {
		errs = append(errs, &PolicyError{Field: field, Value: value, Reason: reason, Detail: fmt.Sprintf(format, args...)})
	}
	amount := func(field string, v int64) {
		switch {
		case v < 1:
			bad(field, v, ReasonTooSmall, "%s must be at least 1, got %d", field, v)
		case v > MaxAmount:
			bad(field, v, ReasonTooLarge, "%s must be at most 2^53 (%d), got %d", field, int64(MaxAmount), v)
		}
	}
	takes := algorithmFields[c.Algorithm]
	unused := func(field string, value any, zero bool) {
		if !zero {
			errs = append(errs, &PolicyError{Field: field, Value: value, Reason: ReasonNotApplicable, Takes: slices.Clone(takes),
				Detail: fmt.Sprintf("%s does not apply to %s", field, c.Algorithm)})
		}
	}
	rate := func() {
		switch {
		case math.IsNaN(c.Rate) || math.IsInf(c.Rate, 0):
			bad("rate", c.Rate, ReasonNotFinite, "rate must be a finite number, got %v", c.Rate)
		case c.Rate <= 0:
			bad("rate", c.Rate, ReasonNotPositive, "rate must be positive, got %v", c.Rate)
		case c.Rate < MinRate:
			bad("rate", c.Rate, ReasonTooSmall, "rate must be at least %v per second, got %v", MinRate, c.Rate)
		case c.Rate > MaxRate:
			bad("rate", c.Rate, ReasonTooLarge, "rate must be at most %v per second, got %v", MaxRate, c.Rate)
		}
	}
	window := func() {
		switch {
		case c.Window <= 0:
			bad("window", c.Window, ReasonNotPositive, "window must be positive, got %v", c.Window)
		case c.Window > MaxWindow:
			bad("window", c.Window, ReasonTooLarge, "window must be at most %v, got %v", MaxWindow, c.Window)
		case c.Window%time.Microsecond != 0:
			bad("window", c.Window, ReasonNotWhole, "window must be a whole number of microseconds, got %v", c.Window)
		}
	}
	p := &Policy{cfg: c}
	bucket := c.Algorithm == TokenBucket || c.Algorithm == LeakyBucket || c.Algorithm == GCRA
	switch c.Algorithm {
	case TokenBucket, LeakyBucket:
		amount("capacity", c.Capacity)
		unused("limit", c.Limit, c.Limit == 0)
		unused("burst", c.Burst, c.Burst == 0)
		p.max = c.Capacity
	case GCRA:
		amount("burst", c.Burst)
		unused("capacity", c.Capacity, c.Capacity == 0)
		unused("limit", c.Limit, c.Limit == 0)
		p.max = c.Burst
	case FixedWindow, SlidingLog, SlidingWindow:
		amount("limit", c.Limit)
		unused("capacity", c.Capacity, c.Capacity == 0)
		unused("burst", c.Burst, c.Burst == 0)
		unused("rate", c.Rate, c.Rate == 0)
		window()
		p.max = c.Limit
		p.window = c.Window.Microseconds()
	case Concurrency:
		amount("limit", c.Limit)
		unused("capacity", c.Capacity, c.Capacity == 0)
		unused("burst", c.Burst, c.Burst == 0)
		unused("rate", c.Rate, c.Rate == 0)
		unused("window", c.Window, c.Window == 0)
		p.max = c.Limit
		if c.LeaseTTL == 0 {
			p.cfg.LeaseTTL = DefaultLeaseTTL
		}
		switch t := p.cfg.LeaseTTL; {
		case t < MinLeaseTTL:
			bad("lease_ttl", c.LeaseTTL, ReasonTooSmall, "lease_ttl must be at least %v, got %v", MinLeaseTTL, c.LeaseTTL)
		case t > MaxWindow:
			bad("lease_ttl", c.LeaseTTL, ReasonTooLarge, "lease_ttl must be at most %v, got %v", MaxWindow, c.LeaseTTL)
		case t%time.Millisecond != 0:
			bad("lease_ttl", c.LeaseTTL, ReasonNotWhole, "lease_ttl must be a whole number of milliseconds, got %v", c.LeaseTTL)
		}
		p.leaseTTL = p.cfg.LeaseTTL.Microseconds()
	case "":
		bad("algorithm", c.Algorithm, ReasonMissing, "algorithm is required (one of %v)", allAlgorithms)
	default:
		bad("algorithm", c.Algorithm, ReasonUnknown, "unknown algorithm %q (one of %v)", c.Algorithm, allAlgorithms)
	}
	if c.Algorithm != Concurrency {
		unused("lease_ttl", c.LeaseTTL, c.LeaseTTL == 0)
	}
	if bucket {
		rate()
		unused("window", c.Window, c.Window == 0)
		if len(errs) == 0 {
			p.interval = max(1, int64(math.Round(1e6/c.Rate)))
		}
	}
	if c.Algorithm == LeakyBucket {
		switch c.Mode {
		case "":
			p.cfg.Mode = Police
		case Police, Shape:
		default:
			bad("mode", c.Mode, ReasonUnknown, "unknown leaky_bucket mode %q (police or shape)", c.Mode)
		}
		switch {
		case c.MaxDelay < 0:
			bad("max_delay", c.MaxDelay, ReasonTooSmall, "max_delay must not be negative, got %v", c.MaxDelay)
		case c.MaxDelay > MaxWindow:
			bad("max_delay", c.MaxDelay, ReasonTooLarge, "max_delay must be at most %v, got %v", MaxWindow, c.MaxDelay)
		case c.MaxDelay != 0 && c.Mode != Shape:
			bad("max_delay", c.MaxDelay, ReasonShapeOnly, "max_delay applies only to mode shape")
		}
		p.maxDelay = c.MaxDelay.Microseconds()
	} else {
		unused("mode", c.Mode, c.Mode == "")
		unused("max_delay", c.MaxDelay, c.MaxDelay == 0)
	}
	// gcra keeps its theoretical arrival time as now + burst·interval; it must
	// stay an exact integer in Lua's doubles next to a Unix time in µs.
	if c.Algorithm == GCRA && len(errs) == 0 && p.interval > (1<<52)/p.max {
		bad("", nil, ReasonInvalid, "burst %d at rate %v spans more than 2^52µs (about 142 years); lower burst or raise rate", c.Burst, c.Rate)
	}
	errs = append(errs, compatErrors(c)...)
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return p, nil
}

// algorithmFields lists the fields each algorithm takes besides algorithm,
// as configuration files name them.
var algorithmFields = map[Algorithm][]string{
	TokenBucket:   {"capacity", "rate"},
	LeakyBucket:   {"capacity", "rate", "mode", "max_delay"},
	FixedWindow:   {"limit", "window"},
	SlidingLog:    {"limit", "window"},
	SlidingWindow: {"limit", "window"},
	GCRA:          {"burst", "rate"},
	Concurrency:   {"limit", "lease_ttl"},
}

// allAlgorithms lists the rate algorithms and Concurrency, for messages.
var allAlgorithms = append(slices.Clone(Algorithms), Concurrency)

// MustPolicy is like NewPolicy but panics on an invalid config. It is meant
// for constants in tests and examples.
func MustPolicy(c PolicyConfig) *Policy {
	p, err := NewPolicy(c)
	if err != nil {
		panic(err)
	}
	return p
}

// Config returns the configuration the policy was built from, with defaults applied.
func (p *Policy) Config() PolicyConfig { return p.cfg }

// Name returns the policy's name.
func (p *Policy) Name() string { return p.cfg.Name }

// Algorithm returns the policy's algorithm.
func (p *Policy) Algorithm() Algorithm { return p.cfg.Algorithm }

// Mode returns the leaky bucket mode (Police or Shape); empty for other algorithms.
func (p *Policy) Mode() Mode { return p.cfg.Mode }

// Max returns the policy's limit: capacity, limit or burst, whichever applies.
func (p *Policy) Max() int64 { return p.max }

// Period returns the time the policy takes to restore its whole limit: the
// window for window algorithms, the lease TTL for concurrency (the longest a
// lease the holder never releases keeps its slot), max·interval for the
// others. It is the `w` of the IETF RateLimit-Policy header.
func (p *Policy) Period() time.Duration {
	if p.leaseTTL > 0 {
		return time.Duration(p.leaseTTL) * time.Microsecond
	}
	if p.window > 0 {
		return time.Duration(p.window) * time.Microsecond
	}
	return time.Duration(params.MulSat(p.max, p.interval)) * time.Microsecond
}

// LeaseTTL returns a concurrency policy's lease TTL; zero for the rate
// algorithms.
func (p *Policy) LeaseTTL() time.Duration { return time.Duration(p.leaseTTL) * time.Microsecond }

// IsConcurrency reports whether p is an in-flight limit (algorithm
// concurrency), decided by leases rather than by a rate step.
func (p *Policy) IsConcurrency() bool { return p.cfg.Algorithm == Concurrency }

// CheckCost reports ErrInvalidCost unless 1 ≤ n ≤ Max(); a concurrency
// policy takes exactly one slot per request, so only n = 1.
func (p *Policy) CheckCost(n int64) error {
	if p.leaseTTL > 0 && n != 1 {
		return fmt.Errorf("%w: cost %d on concurrency policy %q (a request holds one slot)", ErrInvalidCost, n, p.cfg.Name)
	}
	if n < 1 || n > p.max {
		return fmt.Errorf("%w: cost %d outside 1..%d of policy %q", ErrInvalidCost, n, p.max, p.cfg.Name)
	}
	return nil
}

// String returns a short description such as "token_bucket(capacity=10, rate=1/s)".
func (p *Policy) String() string {
	c := p.cfg
	switch c.Algorithm {
	case TokenBucket:
		if c.Compat != "" {
			return fmt.Sprintf("token_bucket(capacity=%d, rate=%v/s, compat=%s)", c.Capacity, c.Rate, c.Compat)
		}
		return fmt.Sprintf("token_bucket(capacity=%d, rate=%v/s)", c.Capacity, c.Rate)
	case LeakyBucket:
		if c.Mode == Shape && c.MaxDelay > 0 {
			return fmt.Sprintf("leaky_bucket(capacity=%d, rate=%v/s, mode=shape, max_delay=%v)", c.Capacity, c.Rate, c.MaxDelay)
		}
		if c.Mode == Shape { // no max_delay: a wait is bounded by the capacity only
			return fmt.Sprintf("leaky_bucket(capacity=%d, rate=%v/s, mode=shape)", c.Capacity, c.Rate)
		}
		return fmt.Sprintf("leaky_bucket(capacity=%d, rate=%v/s)", c.Capacity, c.Rate)
	case GCRA:
		return fmt.Sprintf("gcra(burst=%d, rate=%v/s)", c.Burst, c.Rate)
	case Concurrency:
		return fmt.Sprintf("concurrency(limit=%d, lease_ttl=%v)", c.Limit, c.LeaseTTL)
	default:
		return fmt.Sprintf("%s(limit=%d, window=%v)", c.Algorithm, c.Limit, c.Window)
	}
}
