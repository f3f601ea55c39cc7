// Package params carries a policy's integer parameters from package
// ratelimit to package ratelimit/kit, so that the step functions in the kit
// read them without package ratelimit exporting them.
package params

// Of returns the integer parameters of a *ratelimit.Policy: its max
// (capacity, limit or burst), the µs per unit of rate (bucket algorithms and
// gcra; else 0), the window in µs (window algorithms; else 0) and shape
// mode's max delay in µs (0 means unbounded). Package ratelimit sets it
// when it is initialised and nothing changes it afterwards; it panics for
// any other type.
var Of func(policy any) (max, interval, window, maxDelay int64)

// MaxMicros saturates computed durations: 2^53µs, about 285 years.
const MaxMicros = 1 << 53

// MulSat returns a·b for non-negative a and b, saturated at 2^53. Lua's
// math.min(2^53, a*b) gives the same result, so Go and Redis agree.
func MulSat(a, b int64) int64 {
	if a != 0 && b > MaxMicros/a {
		return MaxMicros
	}
	return min(a*b, MaxMicros)
}
