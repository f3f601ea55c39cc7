package httplimit

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"
)

// quotaExceededType is the RFC 9457 problem type of a 429 answer, the one the
// IETF rate-limit headers draft registers.
const quotaExceededType = "https://iana.org/assignments/http-problem-types#quota-exceeded"

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
// sluice renders non-429 error bodies on net/http; ProblemBody gives the
// same body to other engines.
func WriteProblem(w http.ResponseWriter, status int, detail string) {
	writeProblemBody(w, status, ProblemBody(status, detail))
}

// ProblemBody returns the body WriteProblem writes for status and detail.
func ProblemBody(status int, detail string) []byte {
	return plainProblem(status, detail).marshal()
}

// plainProblem is the problem of a non-429 answer.
func plainProblem(status int, detail string) problem {
	t := http.StatusText(status)
	return problem{Type: "about:blank", Title: t, Status: status, Detail: detail, Error: t, Message: detail}
}

// tooManyRequests is the problem of a 429 whose Retry-After is n seconds.
func tooManyRequests(n int64, violated []string) problem {
	msg := "Rate limit exceeded. Please retry after " + seconds(n) + "."
	t := http.StatusText(http.StatusTooManyRequests)
	if violated == nil {
		violated = []string{} // omitzero keeps an empty, non-nil list
	}
	return problem{
		Type: quotaExceededType, Title: t, Status: http.StatusTooManyRequests, Detail: msg,
		ViolatedPolicies: violated, Error: t, Message: msg, RetryAfter: n,
	}
}

// marshal returns p as JSON.
func (p problem) marshal() []byte {
	body, err := json.Marshal(p)
	if err != nil { // only strings and integers: cannot happen
		panic("httplimit: marshal problem: " + err.Error())
	}
	return body
}

// ProblemHeaders are the headers every problem answer carries besides
// Content-Length, as name and value pairs.
var ProblemHeaders = [2][2]string{{"Content-Type", "application/problem+json"}, {"X-Content-Type-Options", "nosniff"}}

// writeProblemBody writes a problem answer of status with body.
func writeProblemBody(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	for _, kv := range ProblemHeaders {
		h.Set(kv[0], kv[1])
	}
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	w.Write(body) //nolint:errcheck // the client may be gone; nothing to do about it
}

func formatInt(n int64) string { return strconv.FormatInt(n, 10) }

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
