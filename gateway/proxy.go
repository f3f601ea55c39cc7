package gateway

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"sync"
	"time"

	"github.com/sluice-gw/sluice/httplimit"
	"github.com/sluice-gw/sluice/metrics"
)

// statusClientClosed is recorded when the client leaves before the upstream answers.
const statusClientClosed = 499

// errUpstreamTimeout is the cancellation cause when a route's timeout passes
// before the upstream's response headers arrive.
var errUpstreamTimeout = errors.New("gateway: upstream timeout")

// upstreamTimerKey is the context key of the *time.Timer that enforces a
// route's timeout; ModifyResponse stops it when the response headers arrive.
type upstreamTimerKey struct{}

// proxyHandler forwards requests to one route's upstream. It is safe for
// concurrent use.
type proxyHandler struct {
	route   string
	timeout time.Duration // 0 = none
	proxy   *httputil.ReverseProxy
	metrics *metrics.Metrics
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
	h := &proxyHandler{route: c.route, timeout: c.timeout, metrics: m}
	h.proxy = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			if c.stripPrefix > 0 {
				stripped := stripSegments(pr.Out.URL.EscapedPath(), c.stripPrefix)
				if p, err := url.PathUnescape(stripped); err == nil {
					pr.Out.URL.Path, pr.Out.URL.RawPath = p, stripped
				}
			}
			// SetURL joins the upstream's base path with the request path and
			// sends the upstream's host as Host (SPEC §2.1 default).
			pr.SetURL(c.target)
			if c.preserveHost {
				pr.Out.Host = pr.In.Host
			}
			// ReverseProxy removed the client's X-Forwarded-* before Rewrite.
			// SPEC §2.1 appends the TCP peer to the X-Forwarded-For received,
			// so put that back for SetXForwarded to append to; X-Forwarded-Host
			// and -Proto are set afresh from the inbound request.
			if xff := pr.In.Header["X-Forwarded-For"]; len(xff) > 0 {
				pr.Out.Header["X-Forwarded-For"] = xff
			}
			pr.SetXForwarded()
			setClientAddress(pr, c.ip)
		},
		Transport: transport,
		// Zero: ReverseProxy already flushes every write of a streaming
		// response (no Content-Length, or text/event-stream), so chunks reach
		// the client as they come; a body of known length is copied without
		// a flush per write, which cost 15-18% of the gateway's CPU
		// (bench/cmd/gatewaybench profile).
		FlushInterval: 0,
		// Reuse the 32 KiB copy buffers instead of allocating one per response.
		BufferPool: newBufferPool(),
		ModifyResponse: func(resp *http.Response) error {
			if t, ok := resp.Request.Context().Value(upstreamTimerKey{}).(*time.Timer); ok && !t.Stop() {
				return errUpstreamTimeout // the deadline fired as the headers arrived
			}
			h.observe(resp.Request.Context())
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			h.observe(r.Context())
			if context.Cause(r.Context()) == context.Canceled {
				// The client went away: nobody reads an answer. 499 (nginx's
				// convention) only shows in metrics and logs.
				w.WriteHeader(statusClientClosed)
				return
			}
			if berr := requestBodyError(r.Context()); berr != nil {
				if errors.Is(berr, os.ErrDeadlineExceeded) && context.Cause(r.Context()) == errUpstreamTimeout {
					// The route's timeout passed while the client was still
					// sending its body, and ServeHTTP ended the read.
					log.Debug("request body too slow", "route", c.route, "status", http.StatusRequestTimeout)
					httplimit.WriteProblem(w, http.StatusRequestTimeout, "The request body did not arrive within the route's timeout.")
					return
				}
				// The client's body broke off or was malformed while being
				// streamed (the transport aborted the upstream request): the
				// client's fault, not the upstream's. Debug, not Warn: any
				// client can make this happen as often as it likes.
				log.Debug("request body unreadable", "route", c.route, "status", http.StatusBadRequest, "error", berr)
				httplimit.WriteProblem(w, http.StatusBadRequest, "The request body could not be read.")
				return
			}
			status := http.StatusBadGateway
			detail := "The upstream could not be reached."
			if isTimeout(r.Context(), err) {
				status, detail = http.StatusGatewayTimeout, "The upstream did not answer in time."
			}
			log.Warn("upstream request failed", "route", c.route, "status", status, "error", err)
			httplimit.WriteProblem(w, status, detail)
		},
	}
	return h
}

// upstreamStartKey carries the time the upstream call started.
type upstreamStartKey struct{}

// ServeHTTP forwards r, bounding the wait for the upstream's response headers
// by the route's timeout. The body then streams without that bound. A
// request body that cannot be read while it is forwarded is answered 400,
// and one still arriving when the timeout passes 408.
func (h *proxyHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ctx := context.WithValue(r.Context(), upstreamStartKey{}, time.Now())
	var body *bodyReader
	if r.Body != nil && r.Body != http.NoBody {
		body = &bodyReader{ReadCloser: r.Body}
		ctx = context.WithValue(ctx, bodyReaderKey{}, body)
		defer body.release() // after the timer's Stop below: deferred first, runs last
	}
	if h.timeout > 0 {
		var cancel context.CancelCauseFunc
		ctx, cancel = context.WithCancelCause(ctx)
		defer cancel(nil)
		// Cancelling the upstream request is not enough while the client is
		// still sending its body: the transport returns only once its write
		// of the body ends, and that write waits on the client, so a client
		// that stops sending would hold this request and an upstream
		// connection for as long as it likes. Ending the read on the client's
		// connection ends the write (bodyReader.endRead).
		t := time.AfterFunc(h.timeout, func() {
			cancel(errUpstreamTimeout)
			if body != nil {
				body.endRead(w)
			}
		})
		defer t.Stop()
		ctx = context.WithValue(ctx, upstreamTimerKey{}, t)
	}
	r = r.WithContext(ctx) // a shallow copy: the caller's r keeps its Body
	if body != nil {
		r.Body = body
	}
	h.proxy.ServeHTTP(w, r)
}

// observe records the upstream duration once per request.
func (h *proxyHandler) observe(ctx context.Context) {
	if start, ok := ctx.Value(upstreamStartKey{}).(time.Time); ok {
		h.metrics.UpstreamDuration(h.route, time.Since(start))
	}
}

// isTimeout reports whether the upstream call failed because the route's
// timeout passed (or a transport timeout fired).
func isTimeout(ctx context.Context, err error) bool {
	if errors.Is(err, errUpstreamTimeout) || context.Cause(ctx) == errUpstreamTimeout {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
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
	if a, ok := ip.ClientIP(pr.In); ok {
		pr.Out.Header.Set("X-Real-IP", a.String())
	}
	if fwd := pr.In.Header["Forwarded"]; len(fwd) > 0 && ip.PeerTrusted(pr.In) {
		pr.Out.Header["Forwarded"] = fwd
	}
}
