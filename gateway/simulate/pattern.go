package simulate

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// Epoch is the wall-clock instant at which every simulation starts:
// 2026-01-01 00:00:00 UTC, a multiple of every window length that divides a
// day, so windows (aligned to the Unix epoch) start with the simulation.
var Epoch = time.Unix(1767225600, 0).UTC()

// DefaultKey is the key of every generated request and of trace rows
// without one.
const DefaultKey = "client"

// Event is one request: when it arrives (since Epoch), its key and its cost.
type Event struct {
	// At is the arrival time since Epoch, in whole microseconds.
	At time.Duration
	// Key names the rate-limit state the request counts against.
	Key string
	// Cost is the units the request takes, at least 1.
	Cost int64
	// Hold is how long the request stays in flight once admitted: what a
	// concurrency policy counts. Zero means it ends as it arrives.
	Hold time.Duration
}

// Pattern kinds.
const (
	Steady   = "steady"   // RPS requests per second, evenly spaced
	Burst    = "burst"    // Count requests at once, every Period (once if Period is zero)
	Boundary = "boundary" // Count requests in the Spread before a window boundary and Count in the Spread after
	OnOff    = "onoff"    // steady at RPS for On, silent for Off, repeated
	Poisson  = "poisson"  // Poisson arrivals at RPS, from Seed
	Trace    = "trace"    // the recorded Events
)

// Patterns lists the pattern kinds in a stable order.
var Patterns = []string{Steady, Burst, Boundary, OnOff, Poisson, Trace}

// Pattern describes the traffic of a simulation. Which fields matter
// depends on Kind; see the constants. Every generated request has key
// DefaultKey and cost Cost (zero means 1).
type Pattern struct {
	// Kind is one of Patterns.
	Kind string
	// Duration is how long traffic is generated; requests arrive in [0, Duration).
	Duration time.Duration
	// RPS is the request rate of steady, onoff and poisson, per second.
	RPS float64
	// Count is the size of each burst, or the number of requests on each side
	// of the boundary.
	Count int64
	// Period repeats a burst; zero means a single burst at 0.
	Period time.Duration
	// Window is the window length whose boundary the boundary pattern attacks:
	// the first window boundary at least Window after Epoch.
	Window time.Duration
	// Spread is the length of each half of the boundary attack; zero means Window/10.
	Spread time.Duration
	// On and Off are the phases of onoff.
	On, Off time.Duration
	// Seed seeds poisson's random numbers (PCG).
	Seed uint64
	// Cost is the cost of every generated request; zero means 1.
	Cost int64
	// Hold is how long every generated request stays in flight once
	// admitted (Event.Hold).
	Hold time.Duration
	// Recorded are the requests of a trace, in any order.
	Recorded []Event
}

// maxEvents bounds a generated pattern, so a typo in a rate cannot exhaust memory.
const maxEvents = 20_000_000

// Events generates the pattern's requests, ordered by arrival (a trace keeps
// its order among requests of equal time). Times are whole microseconds,
// the store's resolution.
func (p Pattern) Events() ([]Event, error) {
	cost := p.Cost
	if cost == 0 {
		cost = 1
	}
	if cost < 0 {
		return nil, fmt.Errorf("cost must be at least 1, got %d", cost)
	}
	if p.Hold < 0 {
		return nil, fmt.Errorf("hold must not be negative, got %v", p.Hold)
	}
	if p.Kind != Trace && p.Duration <= 0 {
		return nil, fmt.Errorf("duration must be positive, got %v", p.Duration)
	}
	var ats []int64 // µs since Epoch
	switch p.Kind {
	case Steady, OnOff, Poisson:
		var err error
		if ats, err = p.rated(); err != nil {
			return nil, err
		}
	case Burst:
		if p.Count < 1 || p.Period < 0 {
			return nil, fmt.Errorf("burst needs a count of at least 1 and a non-negative period, got count %d, period %v", p.Count, p.Period)
		}
		for c := int64(0); c < p.Duration.Microseconds(); c += p.Period.Microseconds() {
			if p.Count*int64(len(ats)+1) > maxEvents {
				return nil, fmt.Errorf("burst gives more than %d requests", maxEvents)
			}
			for range p.Count {
				ats = append(ats, c)
			}
			if p.Period == 0 {
				break
			}
		}
	case Boundary:
		var err error
		if ats, err = boundary(p); err != nil {
			return nil, err
		}
	case Trace:
		return traceEvents(p.Recorded)
	case "":
		return nil, fmt.Errorf("pattern is required (one of %v)", Patterns)
	default:
		return nil, fmt.Errorf("unknown pattern %q (one of %v)", p.Kind, Patterns)
	}
	ev := make([]Event, len(ats))
	for i, at := range ats {
		ev[i] = Event{At: time.Duration(at) * time.Microsecond, Key: DefaultKey, Cost: cost, Hold: p.Hold.Truncate(time.Microsecond)}
	}
	return ev, nil
}

// rated generates the arrivals of the patterns that have a rate.
func (p Pattern) rated() ([]int64, error) {
	if !(p.RPS > 0) || math.IsInf(p.RPS, 0) {
		return nil, fmt.Errorf("rps must be a positive number, got %v", p.RPS)
	}
	if n := p.RPS * p.Duration.Seconds(); n > maxEvents {
		return nil, fmt.Errorf("%v requests a second for %v is %.0f requests, more than the %d a run may have: shorten the duration or lower the rate", p.RPS, p.Duration, n, maxEvents)
	}
	d := p.Duration.Microseconds()
	switch p.Kind {
	case Steady:
		return steady(p.RPS, 0, d), nil
	case Poisson:
		return poisson(p.RPS, d, p.Seed), nil
	}
	if p.On < time.Microsecond || p.Off < 0 {
		return nil, fmt.Errorf("onoff needs a positive on and a non-negative off phase, got on %v, off %v", p.On, p.Off)
	}
	var ats []int64
	for c := int64(0); c < d; c += (p.On + p.Off).Microseconds() {
		ats = append(ats, steady(p.RPS, c, min(c+p.On.Microseconds(), d))...)
	}
	return ats, nil
}

// steady returns evenly spaced arrivals at rps in [from, to) µs.
func steady(rps float64, from, to int64) []int64 {
	var ats []int64
	for i := 0; ; i++ {
		at := from + int64(math.Round(float64(i)*1e6/rps))
		if at >= to {
			return ats
		}
		ats = append(ats, at)
	}
}

// poisson returns Poisson arrivals at rps in [0, to) µs drawn from a PCG
// seeded with seed.
func poisson(rps float64, to int64, seed uint64) []int64 {
	r := rand.New(rand.NewPCG(seed, 0x5eed_51a1ce))
	var ats []int64
	t := 0.0
	for {
		t += r.ExpFloat64() / rps * 1e6
		at := int64(t)
		if at >= to {
			return ats
		}
		ats = append(ats, at)
	}
}

// boundary returns Count arrivals evenly spread over the Spread before the
// first window boundary at least Window after Epoch, and Count over the
// Spread after it.
func boundary(p Pattern) ([]int64, error) {
	w := p.Window.Microseconds()
	if w <= 0 || p.Count < 1 || p.Count > maxEvents/2 {
		return nil, fmt.Errorf("boundary needs a positive window and a count of 1..%d, got window %v, count %d", maxEvents/2, p.Window, p.Count)
	}
	spread := p.Spread.Microseconds()
	if spread == 0 {
		spread = w / 10
	}
	if spread < 1 || spread > w {
		return nil, fmt.Errorf("boundary spread must be within 1µs..window (%v), got %v", p.Window, p.Spread)
	}
	epoch := Epoch.UnixMicro()
	b := ((epoch+w+w-1)/w)*w - epoch // first boundary at least W after Epoch
	ats := make([]int64, 0, 2*p.Count)
	for i := range p.Count {
		ats = append(ats, b-spread+i*spread/p.Count)
	}
	for i := range p.Count {
		ats = append(ats, b+i*spread/p.Count)
	}
	if ats[len(ats)-1] >= p.Duration.Microseconds() {
		return nil, fmt.Errorf("boundary attack around %v does not fit in duration %v", time.Duration(b)*time.Microsecond, p.Duration)
	}
	return ats, nil
}
