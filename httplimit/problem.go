package httplimit

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"
)

// QuotaExceededType is the RFC 9457 problem type of a 429 answer, the one the
// IETF rate-limit headers draft registers.
const QuotaExceededType = "https://iana.org/assignments/http-problem-types#quota-exceeded"

// problem is the body of every error sluice writes (docs/semantics.md §5.3):
// an RFC 9457 problem that also carries the plain error and message fields
// clients already parse. Field order is the wire order.
type problem struct {
	Type             string   `json:"type"`
	Title            string   `json:"title"`
	Status           int      `json:"status"`
	Detail           string   `json:"detail"`
	ViolatedPolicies []string `json:"violated-policies,omitzero"`
	Error            string   `json:"error"`
	Message          string   `json:"message"`
	RetryAfter       int64    `json:"retry_after,omitzero"`
}

// WriteProblem writes an error answer with status and detail in the body
// shape of docs/semantics.md §5.3:
// {"type":"about:blank","title":T,"status":S,"detail":D,
// "error":T,"message":D} where T is http.StatusText(status). It sets
// Content-Type to application/problem+json; any other header (Retry-After on
// a 503, say) must be set on w before the call. It is the one place where
// sluice renders non-429 error bodies.
func WriteProblem(w http.ResponseWriter, status int, detail string) {
	t := http.StatusText(status)
	writeProblem(w, problem{Type: "about:blank", Title: t, Status: status, Detail: detail, Error: t, Message: detail})
}

// WriteTooManyRequests writes the 429 answer of docs/semantics.md §5.3:
// Retry-After in whole seconds (rounded up, at least 1), Content-Type
// application/problem+json and the quota-exceeded problem body naming the
// violated policies. Rate-limit headers, if any, must be set on w before the
// call.
func WriteTooManyRequests(w http.ResponseWriter, retryAfter time.Duration, violated []string) {
	n := retryAfterSeconds(retryAfter)
	w.Header().Set("Retry-After", strconv.FormatInt(n, 10))
	msg := "Rate limit exceeded. Please retry after " + seconds(n) + "."
	t := http.StatusText(http.StatusTooManyRequests)
	if violated == nil {
		violated = []string{} // omitzero keeps an empty, non-nil list
	}
	writeProblem(w, problem{
		Type: QuotaExceededType, Title: t, Status: http.StatusTooManyRequests, Detail: msg,
		ViolatedPolicies: violated, Error: t, Message: msg, RetryAfter: n,
	})
}

func writeProblem(w http.ResponseWriter, p problem) {
	body, err := json.Marshal(p)
	if err != nil { // only strings and integers: cannot happen
		panic("httplimit: marshal problem: " + err.Error())
	}
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(p.Status)
	w.Write(body) //nolint:errcheck // the client may be gone; nothing to do about it
}

// seconds is "1 second" or "N seconds".
func seconds(n int64) string {
	if n == 1 {
		return "1 second"
	}
	return strconv.FormatInt(n, 10) + " seconds"
}

// retryAfterSeconds is d in whole seconds, rounded up, at least 1.
func retryAfterSeconds(d time.Duration) int64 {
	return max(1, ceilSeconds(d))
}

// ceilSeconds is d in whole seconds rounded up; 0 for d ≤ 0.
func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Second - 1) / time.Second)
}
