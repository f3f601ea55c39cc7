package httplimit

import (
	"net/http"

	"github.com/sluice-gw/sluice/ratelimit"
)

// Result is the middleware's answer for one request ([Middleware.Decide]),
// for the engine's adapter to write out: forward the request, or answer it
// with Status and Body; either way with the rate-limit headers. A Result
// may be reused for another request once its values have been written.
type Result struct {
	// Forward is true when the request goes on to the next handler.
	Forward bool
	// Status is the answer's status when Forward is false: 403, 429, 503
	// (or what Options.OnStoreError chose). It is 0 when the client went
	// away during a shape-mode hold: nobody reads an answer.
	Status int
	// Body is the answer's application/problem+json body (docs/semantics.md
	// §5.3) when Status is not 0.
	Body []byte
	// RetryAfter is the Retry-After header's value in seconds; 0 means none.
	RetryAfter int64

	hdr []byte // the five rate-limit header values, back to back
	end [5]int // where each value ends in hdr; end[4] == 0: no headers
	scg scgHeaders

	leases []ratelimit.Request // the leases taken, until Hold takes them over
	held   *Lease              // the leases, already renewed during a shape-mode hold
}

// RateLimitHeaderNames are the names of the rate-limit headers a Result
// carries, in the order of [Result.RateLimitHeader].
var RateLimitHeaderNames = [5]string{HeaderLimit, HeaderRemaining, HeaderReset, HeaderRateLimitPolicy, HeaderRateLimit}

// HasRateLimitHeaders reports whether the response gets the rate-limit
// headers: false when no limit was counted, or every one is hidden (shadow,
// uncounted).
func (r *Result) HasRateLimitHeaders() bool { return r.end[4] > 0 }

// RateLimitHeader returns the value of the header RateLimitHeaderNames[i].
// The bytes belong to r and change when r is reused.
func (r *Result) RateLimitHeader(i int) []byte {
	start := 0
	if i > 0 {
		start = r.end[i-1]
	}
	return r.hdr[start:r.end[i]]
}

// reset makes r ready for a new decision, keeping its buffer.
func (r *Result) reset() {
	clear(r.leases)
	*r = Result{hdr: r.hdr[:0], scg: scgHeaders{buf: r.scg.buf[:0]}, leases: r.leases[:0]}
}

// refuse makes r an answer of status with problem body p.
func (r *Result) refuse(p problem, retryAfter int64) {
	r.Forward, r.Status, r.Body, r.RetryAfter = false, p.Status, p.marshal(), retryAfter
}

// Problem is an answer the middleware gives in place of the next handler:
// Options.OnStoreError returns one.
type Problem struct {
	// Status is the answer's status, such as 503.
	Status int
	// Detail is the problem body's detail and message.
	Detail string
	// RetryAfter is the Retry-After header in seconds; 0 means none.
	RetryAfter int64
}

// WriteResult writes res to w as the net/http adapter does: the rate-limit
// headers and, when res is an answer, Retry-After, the status and the
// problem body. It writes nothing else when res.Forward.
func WriteResult(w http.ResponseWriter, res *Result) {
	if res.HasRateLimitHeaders() {
		// One string for the five values and one slice for the five
		// header entries: two allocations whatever the number of limits.
		all := string(res.hdr[:res.end[4]])
		vals := make([]string, 5)
		start := 0
		for i, n := range res.end {
			vals[i] = all[start:n]
			start = n
		}
		h := w.Header()
		for i, name := range RateLimitHeaderNames {
			h[name] = vals[i : i+1 : i+1]
		}
	}
	writeSCGHeaders(w.Header(), res)
	if res.Forward || res.Status == 0 {
		return
	}
	if res.RetryAfter > 0 {
		w.Header().Set("Retry-After", formatInt(res.RetryAfter))
	}
	writeProblemBody(w, res.Status, res.Body)
}
