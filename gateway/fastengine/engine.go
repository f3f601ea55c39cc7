package fastengine

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/sluice-gw/sluice/gateway/config"
	"github.com/sluice-gw/sluice/gateway/core"
	"github.com/sluice-gw/sluice/gateway/internal/connlimit"
	"github.com/sluice-gw/sluice/gateway/metrics"
)

// Front is how the public server finds, for each request, the Handler of
// the configuration serving now: it returns that handler and a function to
// call once the request has ended (a reload retires a configuration once
// its requests have ended).
type Front func() (h *Handler, release func())

// ServerOptions are what a Server takes besides its configuration section.
type ServerOptions struct {
	// Log receives the engine's own logs; nil discards them.
	Log *slog.Logger
	// Metrics counts the connections refused at their bounds. Required.
	Metrics *metrics.Metrics
	// Panics records a panic the handler leaves unrecovered; nil records
	// none.
	Panics *core.Panics
	// Conns bounds the connections (server.max_conns and
	// server.max_conns_per_ip), shared with the other public listeners;
	// nil makes one of sc's bounds.
	Conns *connlimit.Limit
}

// NewServer returns the public listener's server (see newPublicServer)
// with the timeouts, bounds and header limit of sc, serving each request
// with the Handler front returns.
func NewServer(sc config.Server, front Front, o ServerOptions) *Server {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	serve := func(ctx *fasthttp.RequestCtx) {
		h, release := front()
		defer release()
		h.Serve(ctx)
	}
	expect := func(ctx *fasthttp.RequestCtx) int {
		h, release := front()
		return h.Expect(ctx, release)
	}
	return newPublicServer(serve, expect, sc, o)
}

// Server is the public fasthttp server with its open connections.
type Server = publicServer

// newPublicServer returns the public listener's server: fasthttp, streaming
// request bodies, with the timeouts of g's configuration, every answer it
// gives itself in problem+json (engineError), and its connections tracked
// so that Shutdown can cut off what is still running at its deadline.
//
// read_header_timeout is the engine's read timeout: it bounds the wait from
// a connection's first byte (or a keep-alive connection's next request)
// until the request's headers and the first byte of its body are in; for a
// request with a body, the handler then sets the read deadline of
// read_timeout, counted from the request's start, or lifts it.
//
// expect decides a request that carries Expect: 100-continue before the
// engine sends 100 Continue (see Handler.Expect). A panic the handler
// leaves unrecovered is recorded as the gateway's (o.Panics) and answered
// 500 (answerPanic).
func newPublicServer(handler fasthttp.RequestHandler, expect func(*fasthttp.RequestCtx) int, sc config.Server, o ServerOptions) *publicServer {
	log := o.Log
	maxHeaderBytes := sc.MaxHeaderBytes
	if maxHeaderBytes <= 0 {
		maxHeaderBytes = defaultMaxHeaderBytes
	}
	limit := o.Conns
	if limit == nil {
		limit = connlimit.ForServer(sc, log, o.Metrics)
	}
	ps := &publicServer{conns: make(map[net.Conn]struct{}), limit: limit}
	readTimeout := sc.ReadTimeout
	headerTimeout := sc.ReadHeaderTimeout
	if headerTimeout <= 0 || readTimeout > 0 && readTimeout < headerTimeout {
		headerTimeout = readTimeout
	}
	ps.Server = &fasthttp.Server{
		Handler: func(ctx *fasthttp.RequestCtx) {
			// The handler recovers a panic while it serves a request
			// (Gateway.serveRecovering); this one recovers what is left,
			// the bookkeeping around it, which fasthttp would not.
			defer func() {
				if v := recover(); v != nil {
					o.Panics.Record(metrics.DoorGateway, v)
					answerPanic(ctx)
				}
			}()
			// A request without a body is read whole: the headers' deadline
			// has nothing left to bound, and the engine sets the next
			// request's own. (A deadline the handler sets costs the engine a
			// second call to clear it after the response.)
			if ctx.Request.Header.ContentLength() != 0 {
				if readTimeout > 0 {
					ctx.SetReadDeadline(ctx.Time().Add(readTimeout)) //nolint:errcheck // a closed connection fails the read anyway
				} else if headerTimeout > 0 {
					ctx.SetReadDeadline(time.Time{}) //nolint:errcheck // as above
				}
			}
			handler(ctx)
		},
		// A request with Expect: 100-continue is decided before the
		// engine sends 100 Continue; a refusal is its final answer, and
		// the engine closes the connection (TestExpectEngine pins this).
		ExpectHandler: expect,
		// An HTTP/1.x request of a minor version above 1 is read as
		// HTTP/1.1 before the engine settles its connection's fate.
		HeaderReceived: func(h *fasthttp.RequestHeader) fasthttp.RequestConfig {
			if !h.IsHTTP11() {
				minorAsHTTP11(h)
			}
			return fasthttp.RequestConfig{}
		},
		ErrorHandler:    func(ctx *fasthttp.RequestCtx, err error) { engineError(ctx, err, maxHeaderBytes) },
		ReadTimeout:     headerTimeout,
		WriteTimeout:    sc.WriteTimeout,
		IdleTimeout:     sc.IdleTimeout,
		ReadBufferSize:  serverReadBufferSize(maxHeaderBytes),
		WriteBufferSize: 16 << 10,
		// Every body is streamed: the handler is called once the headers
		// (and at most one byte of the body) are in, and the proxy copies
		// the body to the upstream as it arrives.
		StreamRequestBody:            true,
		MaxRequestBodySize:           1,
		DisablePreParseMultipartForm: true,
		NoDefaultServerHeader:        true,
		NoDefaultContentType:         true,
		CloseOnShutdown:              true,
		Logger:                       slog.NewLogLogger(log.Handler(), slog.LevelDebug),
		ConnState:                    ps.track,
	}
	return ps
}

// headerTooLarge is the detail of a 431.
func headerTooLarge(bound int) string {
	return fmt.Sprintf("The request line and headers exceed %d bytes.", bound)
}

// publicServer is the public fasthttp server with its open connections.
type publicServer struct {
	*fasthttp.Server
	limit *connlimit.Limit // server.max_conns and server.max_conns_per_ip
	mu    sync.Mutex
	conns map[net.Conn]struct{}
}

// track follows the connections the server has open.
func (ps *publicServer) track(c net.Conn, state fasthttp.ConnState) {
	switch state {
	case fasthttp.StateNew:
		ps.mu.Lock()
		ps.conns[c] = struct{}{}
		ps.mu.Unlock()
	case fasthttp.StateClosed, fasthttp.StateHijacked:
		ps.mu.Lock()
		delete(ps.conns, c)
		ps.mu.Unlock()
	}
	// StateActive and StateIdle, twice per request, take no lock.
}

// CutOff closes every connection still open and returns how many there
// were.
func (ps *publicServer) CutOff() int {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	n := len(ps.conns)
	for c := range ps.conns {
		c.Close()
	}
	return n
}

// engineError answers a request the engine could not read, in the
// problem+json of docs/semantics.md §5.3: 431 for a header block larger than
// its buffer, 408 for a request that did not arrive in time, 501 for a
// transfer coding other than one chunked, 400 for anything malformed. The connection is closed after the answer.
func engineError(ctx *fasthttp.RequestCtx, err error, bound int) {
	ctx.SetConnectionClose()
	var small *fasthttp.ErrSmallBuffer
	var ne net.Error
	switch {
	case errors.As(err, &small) || errors.Is(err, fasthttp.ErrSmallReadBuffer):
		writeProblem(ctx, http.StatusRequestHeaderFieldsTooLarge, headerTooLarge(bound))
	case errors.Is(err, os.ErrDeadlineExceeded) || errors.As(err, &ne) && ne.Timeout():
		writeProblem(ctx, http.StatusRequestTimeout, "The request did not arrive in time.")
	case errors.Is(err, fasthttp.ErrUnsupportedTransferEncoding) || unsupportedCoding(err):
		writeProblem(ctx, http.StatusNotImplemented, "Only a single chunked transfer coding is supported.")
	default:
		writeProblem(ctx, http.StatusBadRequest, "The request is malformed.")
	}
}

// Serve serves the public listener ln within its connection bounds; its
// connections close gracefully (connlimit.Listen).
func (ps *publicServer) Serve(ln net.Listener) error {
	return ps.Server.Serve(connlimit.Listen(ln, ps.limit, false))
}

// ServeBounded serves ln, whose connections are within the bounds already
// (connlimit.Listen, before another engine took its share of them).
func (ps *publicServer) ServeBounded(ln net.Listener) error {
	return ps.Server.Serve(ln)
}

// Conns returns the connection bounds the server applies.
func (ps *publicServer) Conns() *connlimit.Limit { return ps.limit }

// unsupportedCoding reports whether the engine refused a request for its
// Transfer-Encoding: several of them, or one it does not know.
func unsupportedCoding(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "too many transfer-encoding headers") || strings.Contains(msg, "unsupported transfer-encoding")
}
