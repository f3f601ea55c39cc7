package gateway

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"time"

	"github.com/sluice-gw/sluice/httplimit"
	"github.com/sluice-gw/sluice/metrics"
)

// statusClientClosed is recorded when the client leaves before the upstream answers.
const statusClientClosed = 499

// proxyError is a failure of a proxied request together with the status
// it is answered with, in the manner of caddy's HandlerError: the upstream
// round trip and the request body's reader return one, and the proxy's
// ErrorHandler renders it, the one place a proxy failure gets its answer.
type proxyError struct {
	Status int    // the answer's status
	Detail string // the problem's detail, for the client
	Log    string // the log message; a 5xx is logged at warn, anything else at debug
	Err    error  // the cause, for the log; may be nil
}

func (e *proxyError) Error() string {
	if e.Err == nil {
		return e.Log
	}
	return e.Log + ": " + e.Err.Error()
}

func (e *proxyError) Unwrap() error { return e.Err }

// errUpstreamTimeout answers a request whose route's timeout passed before
// the upstream's response headers arrived.
var errUpstreamTimeout = &proxyError{Status: http.StatusGatewayTimeout,
	Detail: "The upstream did not answer in time.", Log: "upstream request failed", Err: errors.New("gateway: upstream timeout")}

// upstreamFailed returns the error a failed round trip is answered with:
// 504 for a transport timeout, 502 otherwise.
func upstreamFailed(err error) *proxyError {
	if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
		return &proxyError{Status: http.StatusGatewayTimeout, Detail: errUpstreamTimeout.Detail, Log: errUpstreamTimeout.Log, Err: err}
	}
	return &proxyError{Status: http.StatusBadGateway, Detail: "The upstream could not be reached.", Log: "upstream request failed", Err: err}
}

// proxyHandler forwards requests to one route's upstream. It is safe for
// concurrent use.
type proxyHandler struct {
	proxy httputil.ReverseProxy
	trip  *upstreamTrip
}

// proxyConfig is what a proxy route needs from the configuration.
type proxyConfig struct {
	route        string
	target       *url.URL
	stripPrefix  int
	preserveHost bool
	timeout      time.Duration
	// ip resolves the client address for X-Real-IP and tells whether the
	// peer is a trusted proxy; nil trusts no proxy.
	ip *httplimit.IPResolver
}

// newProxyHandler builds the reverse proxy for one route on a shared transport.
func newProxyHandler(c proxyConfig, transport http.RoundTripper, m *metrics.Metrics, log *slog.Logger) *proxyHandler {
	h := &proxyHandler{trip: &upstreamTrip{next: transport, route: c.route, timeout: c.timeout, metrics: m}}
	h.proxy = httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			if c.stripPrefix > 0 {
				stripped := stripSegments(pr.Out.URL.EscapedPath(), c.stripPrefix)
				if p, err := url.PathUnescape(stripped); err == nil {
					pr.Out.URL.Path, pr.Out.URL.RawPath = p, stripped
				}
			}
			// SetURL joins the upstream's base path with the request path and
			// sends the upstream's host as Host (the default unless
			// preserve_host is set).
			pr.SetURL(c.target)
			if c.preserveHost {
				pr.Out.Host = pr.In.Host
			}
			// ReverseProxy removed the client's X-Forwarded-* before Rewrite.
			// The gateway appends the TCP peer to the X-Forwarded-For
			// received (docs/semantics.md §4.4), so put that back for
			// SetXForwarded to append to; X-Forwarded-Host and -Proto are set
			// afresh from the inbound request.
			if xff := pr.In.Header["X-Forwarded-For"]; len(xff) > 0 {
				pr.Out.Header["X-Forwarded-For"] = xff
			}
			pr.SetXForwarded()
			setClientAddress(pr, c.ip)
		},
		Transport: h.trip,
		// Zero: ReverseProxy already flushes every write of a streaming
		// response (no Content-Length, or text/event-stream), so chunks reach
		// the client as they come; a body of known length is copied without
		// a flush per write, which cost 15-18% of the gateway's CPU
		// (bench/cmd/gatewaybench profile).
		FlushInterval: 0,
		// Reuse the 32 KiB copy buffers instead of allocating one per response.
		BufferPool: newBufferPool(),
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			pe, ok := errors.AsType[*proxyError](err)
			if !ok && context.Cause(r.Context()) == context.Canceled {
				// The client went away: nobody reads an answer. 499 (nginx's
				// convention) only shows in metrics and logs.
				w.WriteHeader(statusClientClosed)
				return
			}
			if !ok {
				pe = upstreamFailed(err)
			}
			level := slog.LevelDebug
			if pe.Status >= 500 {
				level = slog.LevelWarn
			}
			// A body error is Debug, not Warn: any client can make it
			// happen as often as it likes.
			log.Log(r.Context(), level, pe.Log, "route", c.route, "status", pe.Status, "error", pe.Err)
			httplimit.WriteProblem(w, pe.Status, pe.Detail)
		},
	}
	return h
}

// ServeHTTP forwards r. A request body that cannot be read while it is
// forwarded is answered 400, and one still arriving when the route's
// timeout passes 408 (see upstreamTrip).
func (h *proxyHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Body == nil || r.Body == http.NoBody {
		h.proxy.ServeHTTP(w, r)
		return
	}
	body := newBodyReader(r.Body, w)
	defer body.release()
	r = r.WithContext(r.Context()) // a shallow copy: the caller's r keeps its Body
	r.Body = body
	// ReverseProxy hands the transport the body wrapped in a type of its
	// own, so this request's round trip is told its bodyReader directly.
	rp := h.proxy
	rp.Transport = bodyTrip{u: h.trip, body: body}
	rp.ServeHTTP(w, r)
}

// bodyTrip is the round trip of one request with a body.
type bodyTrip struct {
	u    *upstreamTrip
	body *bodyReader
}

// RoundTrip implements [http.RoundTripper].
func (b bodyTrip) RoundTrip(req *http.Request) (*http.Response, error) {
	return b.u.roundTrip(req, b.body)
}

// upstreamTrip is one route's round trip to its upstream: it records
// sluice_upstream_duration_seconds, bounds the wait for the response headers
// by the route's timeout (the body then streams without that bound), and
// returns each failure as a *proxyError carrying its status.
type upstreamTrip struct {
	next    http.RoundTripper
	route   string
	timeout time.Duration // 0 = none
	metrics *metrics.Metrics
}

// RoundTrip implements [http.RoundTripper] for a request without a body.
func (u *upstreamTrip) RoundTrip(req *http.Request) (*http.Response, error) {
	return u.roundTrip(req, nil)
}

// roundTrip forwards req, whose body (if any) is body.
func (u *upstreamTrip) roundTrip(req *http.Request, body *bodyReader) (*http.Response, error) {
	start := time.Now()
	defer func() { u.metrics.UpstreamDuration(u.route, time.Since(start)) }()
	if u.timeout <= 0 {
		resp, err := u.next.RoundTrip(req)
		if err != nil {
			return nil, u.failed(req, err, nil, body)
		}
		return resp, nil
	}
	ctx, cancel := context.WithCancelCause(req.Context())
	// Cancelling the upstream request is not enough while the client is
	// still sending its body: the transport returns only once its write of
	// the body ends, and that write waits on the client, so a client that
	// stops sending would hold this request and an upstream connection for
	// as long as it likes. Ending the read on the client's connection ends
	// the write (bodyReader.endRead).
	t := time.AfterFunc(u.timeout, func() {
		if body == nil || !body.endRead(func() { cancel(errBodyTimeout) }) {
			cancel(errUpstreamTimeout)
		}
	})
	resp, err := u.next.RoundTrip(req.WithContext(ctx))
	if !t.Stop() { // the deadline fired, perhaps as the headers arrived
		<-ctx.Done() // the timer's cancel, or the client's, came first
		if resp != nil {
			resp.Body.Close()
		}
		return nil, u.failed(req, err, context.Cause(ctx), body)
	}
	if err != nil {
		cancel(nil)
		return nil, u.failed(req, err, nil, body)
	}
	if resp.StatusCode == http.StatusSwitchingProtocols {
		// An upgraded connection outlives the round trip: its context ends
		// with the client's request.
		return resp, nil
	}
	resp.Body = &cancelOnClose{ReadCloser: resp.Body, cancel: cancel}
	return resp, nil
}

// failed returns the error a failed round trip of req is answered with:
// the client's slow body when the timer ended its read (which also ends
// the client's request context); else, when the client went away, its
// context's error (no *proxyError: nobody reads the answer); else the
// request body's failure (the client's fault); else the route's timeout
// (timeout, the cause the timer cancelled with, or nil); else the
// transport's error as 502 or 504.
func (u *upstreamTrip) failed(req *http.Request, err, timeout error, body *bodyReader) error {
	if timeout == errBodyTimeout {
		return errBodyTimeout
	}
	if cerr := req.Context().Err(); cerr != nil {
		return cerr
	}
	if body != nil {
		// The transport may report the connection it closed rather than
		// the body's error that made it close it.
		if berr := body.failure(); berr != nil {
			return berr
		}
	}
	if timeout != nil {
		return timeout
	}
	return upstreamFailed(err)
}

// cancelOnClose ends the round trip's context when the response body is closed.
type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelCauseFunc
}

func (c *cancelOnClose) Close() error {
	err := c.ReadCloser.Close()
	c.cancel(nil)
	return err
}

// newTransport returns the transport shared by every proxy route of one
// gateway: pooled keep-alive connections, bounded dials and TLS handshakes.
func newTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 64
	t.DialContext = (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	return t
}

// bufferPool is an httputil.BufferPool over a sync.Pool of 32 KiB buffers,
// the size ReverseProxy uses by default.
type bufferPool struct{ p sync.Pool }

func newBufferPool() *bufferPool {
	return &bufferPool{p: sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}}
}

// Get returns a buffer from the pool.
func (b *bufferPool) Get() []byte { return *b.p.Get().(*[]byte) }

// Put returns buf to the pool.
func (b *bufferPool) Put(buf []byte) { b.p.Put(&buf) }

// setClientAddress sets X-Real-IP to the client address as sluice determines
// it for `ip` keys (the peer, or the client a trusted proxy names in
// X-Forwarded-For), replacing whatever the client sent, and passes the
// client's Forwarded header on only from a trusted proxy (ReverseProxy has
// removed it from the outbound request before Rewrite).
func setClientAddress(pr *httputil.ProxyRequest, ip *httplimit.IPResolver) {
	pr.Out.Header.Del("X-Real-IP")
	in := httplimit.HTTPRequest(pr.In)
	if a, ok := ip.ClientIP(in); ok {
		pr.Out.Header.Set("X-Real-IP", a.String())
	}
	if fwd := pr.In.Header["Forwarded"]; len(fwd) > 0 && ip.PeerTrusted(in) {
		pr.Out.Header["Forwarded"] = fwd
	}
}
