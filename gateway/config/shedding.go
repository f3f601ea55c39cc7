package config

import (
	"fmt"
	"math"
	"strconv"
	"time"
)

// Shedding configures load shedding by priority (docs/operations.md, "Load
// shedding"): a fleet-wide budget of requests in flight, shared through the
// store, of which each priority may fill only its share, so that the rest
// stays free for more important traffic; and, with LatencyThreshold, the
// shedding of lower priorities first while an upstream answers slowly.
// Requests shed are answered 503 with Retry-After. Off unless present.
type Shedding struct {
	// MaxInFlight is the fleet-wide budget: requests in flight on every
	// instance sharing the store, over every route. Required, at least 1.
	MaxInFlight int64 `yaml:"max_in_flight"`
	// Share is the part of MaxInFlight each priority may fill: a request is
	// shed when the requests in flight reach its priority's share.
	Share ShedShares `yaml:"share"`
	// LatencyThreshold, when set, sheds by the upstream's observed latency
	// (per upstream: the 90th percentile over the clients answered in the
	// last 10 s of each client's time from request sent to first response
	// byte): low requests once it reaches the threshold, normal ones at
	// twice it, high ones at four times it; critical ones never. Every
	// route to the upstream is shed by it, whichever endpoint is slow.
	// Zero turns it off.
	LatencyThreshold time.Duration `yaml:"latency_threshold"`
	// LeaseTTL is how long a request's place in the budget outlives an
	// instance that died holding it. At least 100ms; default 30s.
	LeaseTTL time.Duration `yaml:"lease_ttl"`
}

// ShedShares gives each priority's share of Shedding.MaxInFlight, from 0
// (exclusive) to 1, never more for a lower priority than for a higher one.
type ShedShares struct {
	Critical float64 `yaml:"critical"` // default 1
	High     float64 `yaml:"high"`     // default 0.9
	Normal   float64 `yaml:"normal"`   // default 0.8
	Low      float64 `yaml:"low"`      // default 0.6
}

// Priorities, most important first: the values of a route's priority.
const (
	PriorityCritical = "critical"
	PriorityHigh     = "high"
	PriorityNormal   = "normal"
	PriorityLow      = "low"
)

// Priorities lists the priorities, most important first.
var Priorities = []string{PriorityCritical, PriorityHigh, PriorityNormal, PriorityLow}

// Shedding defaults.
const DefaultShedLeaseTTL = 30 * time.Second

// DefaultShedShares are the shares of a priority left out.
var DefaultShedShares = ShedShares{Critical: 1, High: 0.9, Normal: 0.8, Low: 0.6}

// Of returns the share of priority p (one of Priorities).
func (s ShedShares) Of(p string) float64 {
	switch p {
	case PriorityCritical:
		return s.Critical
	case PriorityHigh:
		return s.High
	case PriorityLow:
		return s.Low
	}
	return s.Normal
}

// Ceiling returns how many requests in flight priority p may reach: its
// share of max, rounded down, but at least 1.
func (s *Shedding) Ceiling(p string) int64 {
	return max(1, int64(math.Floor(s.Share.Of(p)*float64(s.MaxInFlight))))
}

func applySheddingDefaults(s *Shedding) {
	if s == nil {
		return
	}
	setDefault(&s.LeaseTTL, DefaultShedLeaseTTL)
	setDefault(&s.Share.Critical, DefaultShedShares.Critical)
	setDefault(&s.Share.High, DefaultShedShares.High)
	setDefault(&s.Share.Normal, DefaultShedShares.Normal)
	setDefault(&s.Share.Low, DefaultShedShares.Low)
}

// shedding checks the shedding section.
func (v *validator) shedding(s *Shedding) {
	if s.MaxInFlight < 1 {
		v.errf("shedding.max_in_flight", "max_in_flight is required: the fleet-wide budget of requests in flight, at least 1, got %d", s.MaxInFlight)
	}
	prev, prevName := 1.0, ""
	for _, p := range Priorities {
		share := s.Share.Of(p)
		path := "shedding.share." + p
		switch {
		case math.IsNaN(share) || share <= 0 || share > 1:
			v.errf(path, "share must be above 0 and at most 1, got %v", share)
		case share > prev:
			v.errf(path, "share %v of %s is above the %v of %s: a lower priority may never fill more of the budget", share, p, prev, prevName)
		default:
			prev, prevName = share, p
		}
	}
	if s.LatencyThreshold < 0 {
		v.errf("shedding.latency_threshold", "latency_threshold must be positive (or left out to turn latency shedding off), got %v", s.LatencyThreshold)
	}
	switch t := s.LeaseTTL; {
	case t < 100*time.Millisecond:
		v.errf("shedding.lease_ttl", "lease_ttl must be at least 100ms, got %v", t)
	case t%time.Millisecond != 0:
		v.errf("shedding.lease_ttl", "lease_ttl must be a whole number of milliseconds, got %v", t)
	}
}

// priority checks route i's priority.
func (v *validator) priority(c *Config, i int) {
	r := &c.Routes[i]
	switch r.Priority {
	case "":
	case PriorityCritical, PriorityHigh, PriorityNormal, PriorityLow:
		if r.ForwardAuth != nil {
			v.errf(fmt.Sprintf("routes[%d].priority", i), "priority does not apply to a forward_auth route: it answers before the request it describes runs, and is never shed")
		}
	default:
		v.errf(fmt.Sprintf("routes[%d].priority", i), "unknown priority %q (allowed: critical, high, normal, low)", r.Priority)
	}
}

// sheddingLines writes the shedding section for Effective.
func (w *yamlWriter) shedding(s *Shedding) {
	if s == nil {
		return
	}
	f := func(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }
	w.line(0, "shedding:")
	w.kv(1, "max_in_flight", strconv.FormatInt(s.MaxInFlight, 10))
	w.kv(1, "share", fmt.Sprintf("{critical: %s, high: %s, normal: %s, low: %s}", f(s.Share.Critical), f(s.Share.High), f(s.Share.Normal), f(s.Share.Low)))
	w.kv(1, "latency_threshold", duration(s.LatencyThreshold))
	w.kv(1, "lease_ttl", duration(s.LeaseTTL))
}
