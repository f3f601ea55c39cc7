// Package panichook holds the one test hook of the gateway's request path:
// a function called at named points of a request (the core's decision,
// the engine's proxy, tunnel and body pumps), which the panic tests set to
// panic where a request's headers ask. It is nil outside those tests, and
// each point costs a nil check.
package panichook

// Peeker is a request's or a response's headers, as Hook reads them.
type Peeker interface {
	Peek(key string) []byte
}

// Hook is nil but in tests, which set it before serving any request.
var Hook func(point string, h Peeker)
