package httpengine

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-gw/sluice/gateway/config"
	"github.com/sluice-gw/sluice/gateway/core"
	"github.com/sluice-gw/sluice/gateway/internal/panichook"
	"github.com/sluice-gw/sluice/gateway/internal/upconn"
	"github.com/sluice-gw/sluice/gateway/metrics"
	"github.com/sluice-gw/sluice/httplimit"
)

// dialTimeout bounds connecting to an upstream.
const dialTimeout = 10 * time.Second

// transports holds one keep-alive connection pool (an http.Transport) per
// upstream scheme, address and upstream_tls, shared by the routes of one
// gateway.
type transports struct {
	mu sync.Mutex
	by map[string]*http.Transport
}

func newTransports() *transports { return &transports{by: make(map[string]*http.Transport)} }

// of returns the pool for up: HTTP/1.1 for http:// and https://, HTTP/2 by
// prior knowledge for h2c://, HTTP/2 over TLS (ALPN h2, no HTTP/1.1) for
// h2://; over TLS with up's upstream_tls (its authorities, server name and
// client certificate, the files read now). Its error is a file of
// upstream_tls that cannot be loaded.
func (t *transports) of(up *core.Upstream, target *url.URL) (*http.Transport, error) {
	scheme := target.Scheme
	key := scheme + "://" + target.Host
	if ut := up.TLS; ut != nil && config.SchemeTLS(scheme) {
		key += "\x00" + ut.Key()
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if tr := t.by[key]; tr != nil {
		return tr, nil
	}
	tr := &http.Transport{
		Proxy:               nil,
		DialContext:         dialUpstream,
		TLSHandshakeTimeout: dialTimeout,
		DisableCompression:  true,
		MaxIdleConnsPerHost: 1024,
		IdleConnTimeout:     90 * time.Second,
		ReadBufferSize:      16 << 10,
		WriteBufferSize:     16 << 10,
	}
	var protos http.Protocols
	switch scheme {
	case config.SchemeH2C:
		protos.SetUnencryptedHTTP2(true)
	case config.SchemeH2:
		protos.SetHTTP2(true)
	default:
		// http:// and https:// upstreams are spoken to in HTTP/1.1, as
		// fastengine speaks to them.
		protos.SetHTTP1(true)
		tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
	}
	tr.Protocols = &protos
	if config.SchemeTLS(scheme) && up.TLS != nil {
		tc, err := up.TLS.ClientConfig()
		if err != nil {
			return nil, fmt.Errorf("upstream_tls.%w", err)
		}
		tr.TLSClientConfig = tc
	}
	t.by[key] = tr
	return tr, nil
}

// upstreamDialer dials upstream connections.
var upstreamDialer = &net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second}

// dialUpstream dials a connection of an upstream's pool, an upconn.Conn:
// it tells whether a request reached the upstream.
func dialUpstream(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := upstreamDialer.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	if uc := upconn.Wrap(c); uc != nil {
		return uc, nil
	}
	return c, nil
}

// wireScheme is the URL scheme net/http's Transport takes for an upstream
// scheme: http for h2c, https for h2.
func wireScheme(scheme string) string {
	switch scheme {
	case config.SchemeH2C:
		return "http"
	case config.SchemeH2:
		return "https"
	}
	return scheme
}

// close closes every pool's idle connections.
func (t *transports) close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, tr := range t.by {
		tr.CloseIdleConnections()
	}
}

// proxy forwards one route's requests to its upstream with
// httputil.ReverseProxy, applying the forwarding rules of core/forward.go.
// It is safe for concurrent use.
type proxy struct {
	route string
	up    *core.Upstream
	table *core.Table
	// targets are the upstream's targets, by core.Target index.
	targets []ptarget
	rp      *httputil.ReverseProxy
	metrics *metrics.Metrics
	log     *slog.Logger
	panics  *core.Panics
}

// exchangeKey is the request context's key of the exchange a proxied
// request belongs to.
type exchangeKey struct{}

// ptarget is one target of a route's upstream with its connection pool.
type ptarget struct {
	url       *url.URL
	transport *http.Transport
	// multiplexed is set for an HTTP/2 upstream (h2c://, h2://).
	multiplexed bool
	// setupErr, when not nil, is why the target's pool could not be built
	// (an upstream_tls file): every request to it fails with it (502).
	setupErr error
	core     *core.Target
}

// acquire and release count a request on tg in the core's view.
func (tg *ptarget) acquire()                     { tg.core.Acquire() }
func (tg *ptarget) release(o core.TargetOutcome) { tg.core.Release(o) }

func newProxy(route string, up *core.Upstream, t *core.Table, h *Handler) *proxy {
	p := &proxy{route: route, up: up, table: t, metrics: h.metrics, log: h.log, panics: h.panics}
	for _, ct := range up.Pool.Targets() {
		sch := ct.URL.Scheme
		tg := ptarget{url: ct.URL, core: ct, multiplexed: sch == config.SchemeH2C || sch == config.SchemeH2}
		tg.transport, tg.setupErr = h.ups.of(up, ct.URL)
		if tg.setupErr != nil {
			h.log.Error("upstream TLS configuration not loaded: the route's requests fail with 502", "route", route, "error", tg.setupErr)
		}
		p.targets = append(p.targets, tg)
	}
	p.rp = &httputil.ReverseProxy{
		Rewrite:        p.rewrite,
		Transport:      roundTripper{p},
		FlushInterval:  0, // a body of unknown length, or an event stream, is flushed as it comes
		ErrorLog:       slog.NewLogLogger(h.log.Handler(), slog.LevelDebug),
		ModifyResponse: p.modifyResponse,
		ErrorHandler:   p.fail,
		BufferPool:     &copyBuffers,
	}
	return p
}

// serve forwards x's request and writes the upstream's answer, or the
// problem answer of a failure.
func (p *proxy) serve(w http.ResponseWriter, x *exchange, res *httplimit.Result) {
	if panichook.Hook != nil {
		panichook.Hook("forward", x)
	}
	x.res = res
	if x.grpc {
		x.deadline = grpcDeadline(x.r, p.up.Timeout, time.Now())
	}
	r := x.r.WithContext(context.WithValue(x.r.Context(), exchangeKey{}, x))
	p.rp.ServeHTTP(w, r)
	if x.grpcEnd != 0 {
		grpcEndTrailers(w, x)
	}
}

// exchangeOf returns the exchange of a proxied request.
func exchangeOf(r *http.Request) *exchange { return r.Context().Value(exchangeKey{}).(*exchange) }

// rewrite makes the request sent upstream (docs/semantics.md §4.4): the
// upstream's scheme, address and Host (or the client's under
// preserve_host), the path and query joined to its own, the X-Forwarded-*
// and client address headers, and the trace context. ReverseProxy has
// dropped the hop-by-hop headers (those Connection names too) and the
// client's X-Forwarded-* and Forwarded before.
func (p *proxy) rewrite(pr *httputil.ProxyRequest) {
	x := exchangeOf(pr.In)
	r := &x.Req
	out := pr.Out
	hd := out.Header
	if !upgradable(pr.In) {
		hd.Del("Connection")
		hd.Del("Upgrade")
	}
	hd.Del("X-Real-Ip")
	x.buf = x.buf[:0]
	for i, v := range pr.In.Header["X-Forwarded-For"] {
		if i > 0 {
			x.buf = append(x.buf, ", "...)
		}
		x.buf = append(x.buf, v...)
	}
	x.buf = r.AppendForwardedFor(x.buf)
	if len(x.buf) > 0 {
		hd["X-Forwarded-For"] = []string{string(x.buf)}
	}
	hd["X-Forwarded-Host"] = []string{r.Host()}
	hd["X-Forwarded-Proto"] = []string{r.ForwardedProto()}
	ip := p.table.IP()
	if a, ok := ip.ClientIP(r); ok {
		hd["X-Real-Ip"] = []string{a.String()}
	}
	if fwd := pr.In.Header["Forwarded"]; len(fwd) > 0 && ip.PeerTrusted(r) {
		hd["Forwarded"] = append([]string(nil), fwd...)
	}
	if s := r.Span(); s.On() {
		hd.Del("Traceparent")
		hd.Del("Tracestate")
		s.Inject(func(name, value string) { hd.Set(name, value) })
	}
	if x.grpc && !x.deadline.IsZero() {
		hd["Grpc-Timeout"] = []string{formatGRPCTimeout(time.Until(x.deadline))}
	}
	if out.Body != nil && out.Body != http.NoBody {
		b := &bodyReader{r: out.Body, x: x}
		if x.grpc && pr.In.ProtoMajor == 2 {
			// A call's stream ends when the upstream's answer does: the
			// transport closing this body then closes the client's stream,
			// which ends a read waiting on the client's next message.
			b.in = pr.In.Body
		}
		out.Body = b
	}
}

// upgradable reports whether a request may switch protocols through the
// proxy: an HTTP/1.1 GET asking for a protocol other than h2c (which a
// proxy does not tunnel). Any other request that carries Upgrade is
// proxied as an ordinary one, the header dropped as hop-by-hop.
func upgradable(r *http.Request) bool {
	up := r.Header.Get("Upgrade")
	return up != "" && r.Method == http.MethodGet && r.ProtoMajor == 1 && r.ProtoMinor == 1 &&
		!strings.EqualFold(strings.TrimSpace(up), "h2c")
}

// modifyResponse sets the decision's rate-limit headers on the upstream's
// answer, in place of any the upstream sent. A panic here is recorded and
// becomes errPanicked, so that ReverseProxy closes the upstream's body and
// the answer is the 500 of a gateway failure.
func (p *proxy) modifyResponse(resp *http.Response) (err error) {
	defer func() {
		if v := recover(); v != nil {
			p.panics.Record(metrics.DoorGateway, v)
			err = errPanicked
		}
	}()
	if panichook.Hook != nil {
		panichook.Hook("body", headerPeeker(resp.Header))
	}
	setRateLimitHeaders(resp.Header, exchangeOf(resp.Request).res)
	return nil
}

// errPanicked is a proxied answer whose handling panicked.
var errPanicked = errors.New("gateway: panic while reading the upstream's answer")

// errUpstreamTimeout is a round trip ended by the route's timeout.
var errUpstreamTimeout = errors.New("gateway: upstream timeout")

// fail answers a failed round trip: 400 or 408 when reading the client's
// body failed, nothing (499 recorded) when the client went away, 504 when
// the route's timeout passed, 502 otherwise; with the rate-limit headers of
// the decision that admitted the request. A gRPC call gets that status as
// a gRPC one (writeGRPC). A 5xx is logged at warn, anything else at debug.
func (p *proxy) fail(w http.ResponseWriter, r *http.Request, err error) {
	x := exchangeOf(r)
	status, detail := http.StatusBadGateway, "The upstream could not be reached."
	switch {
	case x.bodyErr != nil && isTimeout(x.bodyErr):
		status, detail = http.StatusRequestTimeout, "The request body did not arrive in time."
	case x.bodyErr != nil && !errors.Is(x.bodyErr, errUpstreamTimeout):
		status, detail = http.StatusBadRequest, "The request body could not be read."
	case errors.Is(err, errPanicked):
		status, detail = http.StatusInternalServerError, "The gateway failed to answer this request."
	case x.timedOut || errors.Is(err, errUpstreamTimeout):
		status, detail = http.StatusGatewayTimeout, "The upstream did not answer in time."
	case r.Context().Err() != nil:
		x.Req.SetStatus(core.StatusClientClosed)
		return
	}
	level := slog.LevelDebug
	if status >= 500 {
		level = slog.LevelWarn
	}
	p.log.Log(r.Context(), level, "upstream request failed", "route", p.route, "status", status, "error", err)
	if sw, ok := w.(*statusWriter); ok && sw.status != 0 {
		// The answer had begun (a body broken off midway): it cannot be
		// replaced, so its connection or stream is ended.
		panic(http.ErrAbortHandler)
	}
	if x.grpc {
		writeGRPC(w, x, status, detail, x.res, 0)
		return
	}
	setRateLimitHeaders(w.Header(), x.res)
	writeProblem(w, status, detail)
}

// isTimeout reports whether err is a timeout (the server's read_timeout
// on the client's body).
func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
}

// bodyReader is the client's request body as the upstream request reads
// it, recording the error a read ends with (other than io.EOF) so that a
// failed round trip is blamed on the client when the client failed.
type bodyReader struct {
	r io.ReadCloser
	x *exchange
	// in, when not nil, is closed with the body: the client's own body,
	// which r (ReverseProxy's wrapper, whose Close does nothing) reads.
	in io.Closer
}

func (b *bodyReader) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err != nil && err != io.EOF && b.x.bodyErr == nil {
		b.x.bodyErr = err
	}
	return n, err
}

func (b *bodyReader) Close() error {
	if b.in != nil {
		b.in.Close()
	}
	return b.r.Close()
}

// roundTripper is the proxy's Transport: the upstream pool's, bounded by
// the route's timeout until the answer's headers arrive (a gRPC call: by
// its deadline until its end, roundTripGRPC), recording
// sluice_upstream_duration_seconds and, for load shedding, the upstream's
// latency (from the request's last byte written to the answer's first).
type roundTripper struct{ p *proxy }

func (rt roundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	p := rt.p
	x := exchangeOf(req)
	// A request that reached no byte of a target (its connection refused,
	// say) is tried on another, at most pool.retries times: only a GET,
	// HEAD or OPTIONS without a body. It was decided once, and keeps its
	// leases throughout.
	retries := 0
	if !x.grpc && (req.Body == nil || req.Body == http.NoBody) &&
		(req.Method == http.MethodGet || req.Method == http.MethodHead || req.Method == http.MethodOptions) {
		retries = p.up.Pool.Retries()
	}
	var tried uint64
	var last error
	for attempt := 0; ; attempt++ {
		ct := p.up.Pool.Pick(&x.Req, tried)
		if ct == nil {
			return nil, last // every target was tried: the last one's failure
		}
		tg := &p.targets[ct.Index()]
		if tg.setupErr != nil {
			return nil, tg.setupErr
		}
		tg.acquire()
		var resp *http.Response
		var err error
		var reached bool
		if x.grpc {
			resp, err = rt.roundTripGRPC(req, x, tg)
			reached = err != nil && !unreached(err)
		} else {
			resp, reached, err = rt.roundTripOne(req, x, tg)
		}
		if err != nil {
			if reached {
				tg.release(core.TargetFailed)
				return nil, err
			}
			tg.release(core.TargetConnFailed)
			tried |= 1 << ct.Index()
			last = err
			if attempt < retries {
				continue
			}
			return nil, err
		}
		outcome := core.TargetOK
		if resp.StatusCode >= 500 {
			outcome = core.TargetFailed
		}
		resp.Body = &releaseBody{ReadCloser: resp.Body, release: func() { tg.release(outcome) }}
		return resp, nil
	}
}

// unreached reports whether a round trip failed before any byte of the
// request reached the target: its connection could not be made.
func unreached(err error) bool {
	var oe *net.OpError
	return errors.As(err, &oe) && oe.Op == "dial"
}

// aim returns a copy of req, the request sent upstream, with ctx, pointed
// at tg: its scheme and address, its Host (or the client's under
// preserve_host) and the request-target joined to its base path. req
// stays as it was, for another attempt.
func (p *proxy) aim(req *http.Request, ctx context.Context, x *exchange, tg *ptarget) *http.Request {
	r := &x.Req
	up := core.Upstream{Target: tg.url, StripPrefix: p.up.StripPrefix, PreserveHost: p.up.PreserveHost}
	out := req.WithContext(ctx)
	u := *req.URL
	u.Scheme, u.Host = wireScheme(tg.url.Scheme), tg.url.Host
	uri := string(up.AppendRequestURI(x.buf[:0], r))
	u.Path, u.RawPath = "", ""
	u.Opaque, u.RawQuery, _ = strings.Cut(uri, "?")
	out.URL = &u
	out.Host = up.Host(r)
	return out
}

// releaseBody calls release once the upstream's answer is closed (its
// body read or dropped); a switched protocol's writes pass through.
type releaseBody struct {
	io.ReadCloser
	once    sync.Once
	release func()
}

func (b *releaseBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(b.release)
	return err
}

func (b *releaseBody) Write(p []byte) (int, error) {
	if w, ok := b.ReadCloser.(io.Writer); ok {
		return w.Write(p)
	}
	return 0, errors.New("gateway: upstream body is not writable")
}

// roundTripOne is one attempt of RoundTrip on target tg, for a request
// other than a gRPC call. On failure, reached reports whether any byte of
// the request reached the target (sendTrace).
func (rt roundTripper) roundTripOne(req *http.Request, x *exchange, tg *ptarget) (resp *http.Response, reached bool, err error) {
	p := rt.p
	start := time.Now()
	st := sendTrace{multiplexed: tg.multiplexed}
	trace := &httptrace.ClientTrace{GotConn: st.gotConn}
	var lt latencyTrace
	lat := tg.core.Latency
	if lat != nil {
		lt.hook(trace)
	}
	ctx := httptrace.WithClientTrace(req.Context(), trace)
	var cancel context.CancelCauseFunc
	var timer *time.Timer
	if p.up.Timeout > 0 {
		ctx, cancel = context.WithCancelCause(ctx)
		timer = time.AfterFunc(p.up.Timeout, func() { cancel(errUpstreamTimeout) })
	}
	resp, err = tg.transport.RoundTrip(p.aim(req, ctx, x, tg))
	timedOut := timer != nil && !timer.Stop()
	p.metrics.UpstreamDuration(p.route, time.Since(start))
	if lat != nil {
		lt.observe(p, x, lat, timedOut)
	}
	if timedOut {
		x.timedOut = true
		if err == nil {
			resp.Body.Close()
		}
		cancel(nil)
		return nil, true, errUpstreamTimeout
	}
	if err != nil {
		if cancel != nil {
			cancel(nil)
		}
		sent := st.sent()
		if sent && (st.reached || unreached(err)) {
			err = &notResentError{err}
		}
		return nil, sent, err
	}
	if cancel != nil {
		resp.Body = &cancelBody{ReadCloser: resp.Body, cancel: cancel}
	}
	return resp, true, nil
}

// sendTrace follows the connections net/http's Transport takes for one
// attempt (httptrace's GotConn) and tells whether any byte of the request
// reached the target (upconn.Conn.Reached). The Transport sends a GET
// again on another connection when a kept-alive one failed after the GET
// was written; once a byte reached the target, sendTrace refuses the
// request on that other connection (upconn.Conn.Refuse), so it is never
// sent twice. Over HTTP/2 (multiplexed), a request reached the target
// once a connection was had: the Transport sends it again only on a
// stream the target refused unprocessed (REFUSED_STREAM, GOAWAY).
type sendTrace struct {
	multiplexed bool
	got         bool
	reached     bool // on an earlier connection
	uc          *upconn.Conn
	mark        upconn.Mark
}

func (s *sendTrace) gotConn(info httptrace.GotConnInfo) {
	s.got = true
	if s.multiplexed {
		return
	}
	if s.uc != nil && s.uc.Reached(s.mark) {
		s.reached = true
	}
	uc := upconn.Of(info.Conn)
	if uc != nil && s.reached {
		uc.Refuse()
	}
	s.uc = uc
	if uc != nil {
		s.mark = uc.Mark()
	}
}

// notResentError is the failure of a request the Transport tried again
// after its connection failed once the request had reached the target:
// err is what the second try (refused by sendTrace, or a connection the
// target refused) came to.
type notResentError struct{ err error }

func (e *notResentError) Error() string {
	return "the upstream closed the connection after the request reached it (not sent again): " + e.err.Error()
}

func (e *notResentError) Unwrap() error { return e.err }

// sent reports, after a failed round trip, whether any byte of the
// request reached the target.
func (s *sendTrace) sent() bool {
	switch {
	case s.reached:
		return true
	case s.multiplexed || s.uc == nil:
		return s.got
	}
	return s.uc.Reached(s.mark)
}

// latencyTrace records, for load shedding's latency signal, when the
// request's last byte was written and the answer's first byte arrived, in
// Unix nanoseconds (0: not yet); atomic, since an HTTP/2 transport writes
// the request body from a goroutine of its own.
type latencyTrace struct{ wrote, first atomic.Int64 }

// with returns ctx tracing the round trip into lt.
func (lt *latencyTrace) with(ctx context.Context) context.Context {
	trace := &httptrace.ClientTrace{}
	lt.hook(trace)
	return httptrace.WithClientTrace(ctx, trace)
}

// hook sets trace's hooks to trace the round trip into lt.
func (lt *latencyTrace) hook(trace *httptrace.ClientTrace) {
	trace.WroteRequest = func(httptrace.WroteRequestInfo) { lt.wrote.Store(time.Now().UnixNano()) }
	trace.GotFirstResponseByte = func() { lt.first.Store(time.Now().UnixNano()) }
}

// observe feeds the upstream's latency signal once the round trip has
// returned: from the request's end to the answer's first byte, or to now
// when the route's timeout ended it. A request whose body was still being
// sent (a stream) is not observed.
func (lt *latencyTrace) observe(p *proxy, x *exchange, lat *core.LatencySignal, timedOut bool) {
	wrote := lt.wrote.Load()
	if wrote == 0 {
		return
	}
	switch first := lt.first.Load(); {
	case first != 0 && first >= wrote:
		lat.Observe(p.table.ClientOf(&x.Req), time.Duration(first-wrote))
	case first == 0 && timedOut:
		lat.Observe(p.table.ClientOf(&x.Req), time.Since(time.Unix(0, wrote)))
	}
}

// cancelBody releases the round trip's context once the body is closed.
type cancelBody struct {
	io.ReadCloser
	cancel context.CancelCauseFunc
}

func (b *cancelBody) Close() error {
	err := b.ReadCloser.Close()
	b.cancel(nil)
	return err
}

// Write passes a switched protocol's writes on (ReverseProxy writes to a
// 101 answer's body).
func (b *cancelBody) Write(p []byte) (int, error) {
	if w, ok := b.ReadCloser.(io.Writer); ok {
		return w.Write(p)
	}
	return 0, errors.New("gateway: upstream body is not writable")
}

// headerPeeker is an http.Header as the panic hook reads it.
type headerPeeker http.Header

func (h headerPeeker) Peek(name string) []byte { return []byte(http.Header(h).Get(name)) }

// copyBuffers are the buffers answers are copied through, shared by every
// route's ReverseProxy (which would otherwise make a 32 KiB buffer per
// answer).
var copyBuffers bufferPool

type bufferPool struct{ p sync.Pool }

func (b *bufferPool) Get() []byte {
	if v, ok := b.p.Get().(*[]byte); ok {
		return *v
	}
	return make([]byte, 32<<10)
}

func (b *bufferPool) Put(buf []byte) { b.p.Put(&buf) }
