package httpengine

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/sluice-gw/sluice/gateway/config"
	"github.com/sluice-gw/sluice/gateway/core"
	"github.com/sluice-gw/sluice/gateway/internal/connlimit"
	"github.com/sluice-gw/sluice/gateway/metrics"
)

// Front is how the public server finds, for each request, the Handler of
// the configuration serving now: it returns that handler and a function to
// call once the request has ended.
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
	// Conns bounds the connections, shared with the other public
	// listeners; nil makes one of the section's bounds.
	Conns *connlimit.Limit
	// TLS is the HTTPS listener's configuration (its certificates, client
	// authentication and versions); nil when there is no HTTPS listener.
	TLS *tls.Config
}

// Server is the net/http side of the public listeners: HTTPS (HTTP/1.1
// and HTTP/2 by ALPN) and h2c, each an http.Server with the timeouts,
// bounds and HTTP/2 settings of the server section, and their connections
// tracked so that CutOff can close what is still open at the drain's end.
type Server struct {
	https *http.Server
	h2c   *http.Server
	conns *connlimit.Limit
	mu    sync.Mutex
	open  map[net.Conn]struct{}
}

// NewServer returns the public net/http servers of sc, serving each
// request with the Handler front returns.
func NewServer(sc config.Server, front Front, o ServerOptions) *Server {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	s := &Server{conns: o.Conns, open: make(map[net.Conn]struct{})}
	if s.conns == nil {
		s.conns = connlimit.ForServer(sc, o.Log, o.Metrics)
	}
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The handler recovers a panic while it serves a request; this one
		// recovers what is left, the bookkeeping around it, which net/http
		// would log and answer by closing the connection.
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				o.Panics.Record(metrics.DoorGateway, v)
				panic(http.ErrAbortHandler)
			}
		}()
		h, release := front()
		defer release()
		h.ServeHTTP(w, r)
	})
	mk := func(protos *http.Protocols) *http.Server {
		bound := sc.MaxHeaderBytes
		if bound <= 0 {
			bound = defaultMaxHeaderBytes
		}
		streams := sc.HTTP2.MaxConcurrentStreams
		if streams <= 0 {
			streams = config.DefaultMaxConcurrentStreams
		}
		hs := &http.Server{
			Handler:           handler,
			Protocols:         protos,
			ReadHeaderTimeout: sc.ReadHeaderTimeout,
			ReadTimeout:       sc.ReadTimeout,
			WriteTimeout:      sc.WriteTimeout,
			IdleTimeout:       sc.IdleTimeout,
			// The handler answers a header block over the bound itself, in
			// problem+json and naming the bound (Handler.decide); Go's
			// server refuses one past twice it, which bounds what a
			// connection makes the server hold.
			MaxHeaderBytes: 2 * bound,
			HTTP2: &http.HTTP2Config{
				MaxConcurrentStreams: streams,
			},
			ErrorLog:  slog.NewLogLogger(o.Log.Handler(), slog.LevelDebug),
			ConnState: s.track,
		}
		return hs
	}
	if o.TLS != nil {
		var p http.Protocols
		p.SetHTTP1(true)
		p.SetHTTP2(true)
		s.https = mk(&p)
		s.https.TLSConfig = o.TLS
	}
	if sc.HTTP2.H2C {
		var p http.Protocols
		p.SetUnencryptedHTTP2(true)
		s.h2c = mk(&p)
	}
	return s
}

// track follows the connections the servers have open.
func (s *Server) track(c net.Conn, state http.ConnState) {
	switch state {
	case http.StateNew:
		s.mu.Lock()
		s.open[c] = struct{}{}
		s.mu.Unlock()
	case http.StateClosed, http.StateHijacked:
		s.mu.Lock()
		delete(s.open, c)
		s.mu.Unlock()
	}
}

// ServeTLS serves HTTPS on ln, a TCP listener, within the connection
// bounds; it returns when ln is closed or the server shut down.
func (s *Server) ServeTLS(ln net.Listener) error {
	if s.https == nil {
		return errors.New("httpengine: no TLS configuration")
	}
	err := s.https.ServeTLS(connlimit.Listen(ln, s.conns, true), "", "")
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// ServeH2C serves HTTP/2 by prior knowledge on ln, whose connections open
// with the HTTP/2 preface (SplitH2C) and are within the bounds already.
func (s *Server) ServeH2C(ln net.Listener) error {
	if s.h2c == nil {
		return errors.New("httpengine: h2c is off")
	}
	err := s.h2c.Serve(ln)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Shutdown stops both servers gracefully: listeners closed, idle
// connections closed, HTTP/2 clients sent GOAWAY, and it waits for the
// requests running until ctx is done (then ctx's error).
func (s *Server) Shutdown(ctx context.Context) error {
	var errs []error
	for _, hs := range []*http.Server{s.https, s.h2c} {
		if hs != nil {
			if err := hs.Shutdown(ctx); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// CutOff closes every connection still open and returns how many there
// were.
func (s *Server) CutOff() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.open)
	for c := range s.open {
		c.Close()
	}
	return n
}

// preface is what an HTTP/2 connection by prior knowledge opens with
// (RFC 9113 §3.4).
const preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

// SplitH2C splits ln's connections by their first bytes: those that open
// with the HTTP/2 preface go to h2, the others to h1, each with the bytes
// read replayed. A connection that sends nothing within wait goes to h1,
// whose server answers it (408) as it answers any slow request. Closing
// either listener closes ln.
func SplitH2C(ln net.Listener, wait time.Duration) (h1, h2 net.Listener) {
	sp := &splitter{ln: ln, wait: wait, done: make(chan struct{})}
	sp.h1 = &chanListener{sp: sp, c: make(chan net.Conn)}
	sp.h2 = &chanListener{sp: sp, c: make(chan net.Conn)}
	go sp.accept()
	return sp.h1, sp.h2
}

type splitter struct {
	ln     net.Listener
	wait   time.Duration
	h1, h2 *chanListener
	done   chan struct{}
	once   sync.Once
	err    error
}

func (sp *splitter) accept() {
	for {
		c, err := sp.ln.Accept()
		if err != nil {
			sp.close(err)
			return
		}
		go sp.sniff(c)
	}
}

func (sp *splitter) close(err error) {
	sp.once.Do(func() {
		sp.err = err
		close(sp.done)
		sp.ln.Close()
	})
}

// sniff reads as much of c's first bytes as tells the preface apart and
// hands c on.
func (sp *splitter) sniff(c net.Conn) {
	var buf [len(preface)]byte
	n := 0
	if sp.wait > 0 {
		c.SetReadDeadline(time.Now().Add(sp.wait)) //nolint:errcheck // a failed read hands c to h1
	}
	for n < len(preface) {
		m, err := c.Read(buf[n:])
		n += m
		if string(buf[:n]) != preface[:n] || err != nil {
			break
		}
	}
	c.SetReadDeadline(time.Time{}) //nolint:errcheck // as above
	to := sp.h1
	if string(buf[:n]) == preface {
		to = sp.h2
	}
	pc := &prefixConn{Conn: c, prefix: append([]byte(nil), buf[:n]...)}
	select {
	case to.c <- pc:
	case <-sp.done:
		c.Close()
	}
}

// chanListener is one side of a SplitH2C.
type chanListener struct {
	sp *splitter
	c  chan net.Conn
}

func (l *chanListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.c:
		return c, nil
	case <-l.sp.done:
		return nil, net.ErrClosed
	}
}

func (l *chanListener) Close() error {
	l.sp.close(net.ErrClosed)
	return nil
}

func (l *chanListener) Addr() net.Addr { return l.sp.ln.Addr() }

// prefixConn replays the bytes sniffed off a connection before reading on.
// It unwraps to the connection under it (connlimit.Conn's TCP).
type prefixConn struct {
	net.Conn
	prefix []byte
}

func (c *prefixConn) Read(p []byte) (int, error) {
	if len(c.prefix) > 0 {
		n := copy(p, c.prefix)
		c.prefix = c.prefix[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}

// TCP returns the TCP connection under c, nil when there is none.
func (c *prefixConn) TCP() *net.TCPConn {
	switch u := c.Conn.(type) {
	case interface{ TCP() *net.TCPConn }:
		return u.TCP()
	case *net.TCPConn:
		return u
	}
	return nil
}
