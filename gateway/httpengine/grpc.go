package httpengine

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-gw/sluice/gateway/core"
	"github.com/sluice-gw/sluice/httplimit"
)

// gRPC calls (docs/operations.md, "gRPC"): a request whose Content-Type is
// gRPC's (core.IsGRPC) is forwarded as any other, with its deadline, the
// shorter of its grpc-timeout and the route's timeout, sent upstream as
// grpc-timeout and enforced on the whole call; every answer the gateway
// makes itself is a gRPC one: HTTP 200, application/grpc, and the status
// in grpc-status and grpc-message (core.GRPCStatus), in the headers of a
// trailers-only answer, or in trailers once the upstream's answer has
// begun.

// grpcTimeoutUnits are grpc-timeout's units, finest first.
var grpcTimeoutUnits = []struct {
	unit byte
	d    time.Duration
}{
	{'n', time.Nanosecond}, {'u', time.Microsecond}, {'m', time.Millisecond},
	{'S', time.Second}, {'M', time.Minute}, {'H', time.Hour},
}

// maxGRPCTimeoutValue is the largest value grpc-timeout carries (8 digits).
const maxGRPCTimeoutValue = 99999999

// parseGRPCTimeout parses a grpc-timeout value: 1 to 8 digits and a unit
// (H, M, S, m, u, n).
func parseGRPCTimeout(s string) (time.Duration, bool) {
	if len(s) < 2 || len(s) > 9 {
		return 0, false
	}
	n, err := strconv.ParseUint(s[:len(s)-1], 10, 64)
	if err != nil {
		return 0, false
	}
	for _, u := range grpcTimeoutUnits {
		if u.unit == s[len(s)-1] {
			if d := time.Duration(n) * u.d; d/u.d == time.Duration(n) {
				return d, true
			}
			return time.Duration(1<<63 - 1), true
		}
	}
	return 0, false
}

// formatGRPCTimeout writes d as a grpc-timeout value in the finest unit
// that holds it in 8 digits, rounded down, so that the upstream's deadline
// is never past the gateway's; 1n when d is not positive.
func formatGRPCTimeout(d time.Duration) string {
	if d <= 0 {
		return "1n"
	}
	for _, u := range grpcTimeoutUnits {
		if v := d / u.d; v <= maxGRPCTimeoutValue {
			if v == 0 {
				v = 1
			}
			return strconv.FormatInt(int64(v), 10) + string(u.unit)
		}
	}
	return strconv.Itoa(maxGRPCTimeoutValue) + "H"
}

// encodeGRPCMessage percent-encodes a grpc-message value as the gRPC
// protocol asks: every byte outside printable ASCII (0x20 to 0x7E), and
// '%' itself, as %XX.
func encodeGRPCMessage(msg string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(msg); i++ {
		c := msg[i]
		if c >= 0x20 && c <= 0x7e && c != '%' {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
	return b.String()
}

// problemDetail returns the detail of a problem+json body, "" when it has
// none.
func problemDetail(body []byte) string {
	var p struct {
		Detail string `json:"detail"`
	}
	if json.Unmarshal(body, &p) != nil {
		return ""
	}
	return p.Detail
}

// writeGRPC answers a gRPC call with the gRPC status of HTTP status
// status and message, trailers-only: HTTP 200, application/grpc,
// grpc-status and grpc-message in the one header block, beside the
// decision's rate-limit headers and Retry-After (retryAfter > 0). The
// access log and metrics record status. Nothing is written to the body,
// so that the answer ends with its headers.
func writeGRPC(w http.ResponseWriter, x *exchange, status int, message string, res *httplimit.Result, retryAfter int64) {
	hd := w.Header()
	setRateLimitHeaders(hd, res)
	if retryAfter > 0 {
		hd.Set("Retry-After", strconv.FormatInt(retryAfter, 10))
	}
	code, _ := core.GRPCStatus(status)
	hd.Set("Content-Type", "application/grpc")
	hd.Set("Grpc-Status", strconv.Itoa(code))
	if message != "" {
		hd.Set("Grpc-Message", encodeGRPCMessage(message))
	}
	x.Req.SetStatus(status)
	w.WriteHeader(http.StatusOK)
}

// writeGRPCOutcome answers a gRPC call with the Outcome the core decided:
// a problem's detail, a fixed answer's body, or a redirect's Location as
// the message.
func writeGRPCOutcome(w http.ResponseWriter, x *exchange, out *core.Outcome) {
	msg := ""
	switch {
	case out.Fixed != nil:
		msg = string(out.Body)
	case out.Location != "":
		msg = "This listener redirects to HTTPS: " + out.Location
		w.Header().Set("Location", out.Location)
	case out.Body != nil:
		msg = problemDetail(out.Body)
	}
	writeGRPC(w, x, out.Status, msg, out.Result, out.RetryAfter)
}

// grpcEndTrailers ends a gRPC call whose upstream answer has begun but
// broke off (x.grpcEnd: 504 when its deadline passed, 502 when the
// upstream failed) with the trailers of that status.
func grpcEndTrailers(w http.ResponseWriter, x *exchange) {
	status := x.grpcEnd
	code, _ := core.GRPCStatus(status)
	msg := "The upstream failed during the call."
	if status == http.StatusGatewayTimeout {
		msg = "The call's deadline passed."
	}
	hd := w.Header()
	hd.Set(http.TrailerPrefix+"Grpc-Status", strconv.Itoa(code))
	hd.Set(http.TrailerPrefix+"Grpc-Message", encodeGRPCMessage(msg))
	x.Req.SetStatus(status)
}

// deadlineSlack is how close to a call's deadline an upstream failure is
// taken for the deadline's passing: the upstream, sent what was left of
// the deadline, ends the call (resetting its stream, as grpc-go does) at
// the same moment as the gateway's own timer, and either may be seen first.
const deadlineSlack = time.Millisecond

// pastDeadline reports whether x, a gRPC call, has a deadline that has
// passed, or is within deadlineSlack of it.
func (x *exchange) pastDeadline() bool {
	return !x.deadline.IsZero() && time.Until(x.deadline) < deadlineSlack
}

// grpcBody is the upstream's answer body of a gRPC call, read until the
// call's deadline: when a read fails because the deadline passed or the
// upstream failed (not because the client went away), it records the
// status that ends the call (x.grpcEnd) and reads as the body's end, so
// that the proxy finishes the answer and the call ends with that status in
// trailers, not with a reset stream. Closing it stops the deadline and
// cancels the upstream request.
type grpcBody struct {
	io.ReadCloser
	ctx    context.Context
	cancel context.CancelCauseFunc
	timer  *time.Timer
	x      *exchange
}

func (b *grpcBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == nil || err == io.EOF {
		return n, err
	}
	switch {
	case context.Cause(b.ctx) == errUpstreamTimeout:
		b.x.grpcEnd = http.StatusGatewayTimeout
	case b.x.r.Context().Err() != nil:
		return n, err // the client went away: the stream is reset
	case b.x.pastDeadline():
		b.x.grpcEnd = http.StatusGatewayTimeout
	default:
		b.x.grpcEnd = http.StatusBadGateway
	}
	return n, io.EOF
}

func (b *grpcBody) Close() error {
	if b.timer != nil {
		b.timer.Stop()
	}
	err := b.ReadCloser.Close()
	b.cancel(nil)
	return err
}

// roundTripGRPC is RoundTrip for a gRPC call: the call's deadline
// (x.deadline, none when zero) bounds the whole call, the answer's body
// included, not only the wait for its headers. The upstream's latency is
// observed as for other requests: for a call whose request had ended when
// the answer's headers came (a unary or server-streaming call).
func (rt roundTripper) roundTripGRPC(req *http.Request, x *exchange, tg *ptarget) (*http.Response, error) {
	p := rt.p
	start := time.Now()
	ctx := req.Context()
	var lt latencyTrace
	lat := tg.core.Latency
	if lat != nil {
		ctx = lt.with(ctx)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	var timer *time.Timer
	if !x.deadline.IsZero() {
		timer = time.AfterFunc(time.Until(x.deadline), func() { cancel(errUpstreamTimeout) })
	}
	resp, err := tg.transport.RoundTrip(p.aim(req, ctx, x, tg))
	p.metrics.UpstreamDuration(p.route, time.Since(start))
	timedOut := err != nil && (context.Cause(ctx) == errUpstreamTimeout || req.Context().Err() == nil && x.pastDeadline())
	if lat != nil {
		lt.observe(p, x, lat, timedOut)
	}
	if err != nil {
		if timer != nil {
			timer.Stop()
		}
		cancel(nil)
		if timedOut {
			x.timedOut = true
			return nil, errUpstreamTimeout
		}
		return nil, err
	}
	resp.Body = &grpcBody{ReadCloser: resp.Body, ctx: ctx, cancel: cancel, timer: timer, x: x}
	return resp, nil
}

// validGRPCTimeout reports whether s is a grpc-timeout value.
func validGRPCTimeout(s string) bool {
	_, ok := parseGRPCTimeout(s)
	return ok
}

// grpcDeadline returns the deadline of a gRPC call that arrived at now: the
// shorter of its grpc-timeout (checked already by Handler.decide) and the
// route's timeout (none when 0); zero when it has neither.
func grpcDeadline(r *http.Request, routeTimeout time.Duration, now time.Time) time.Time {
	d := routeTimeout
	if v := r.Header.Get("Grpc-Timeout"); v != "" {
		if t, ok := parseGRPCTimeout(v); ok && (d <= 0 || t < d) {
			d = t
		}
	}
	if d <= 0 {
		return time.Time{}
	}
	return now.Add(d)
}
