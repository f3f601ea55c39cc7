package ratelimit

import "time"

// Clock tells the time. Stores that keep state in process hold one; the
// algorithms themselves never read a clock.
type Clock interface {
	Now() time.Time
}

// SystemClock is the process clock.
type SystemClock struct{}

// Now returns time.Now().
func (SystemClock) Now() time.Time { return time.Now() }
