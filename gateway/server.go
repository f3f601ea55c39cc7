package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-gw/sluice/gateway/config"
	"github.com/sluice-gw/sluice/gateway/fastengine"
	"github.com/sluice-gw/sluice/gateway/httpengine"
	"github.com/sluice-gw/sluice/gateway/internal/connlimit"
	"github.com/sluice-gw/sluice/gateway/internal/tlsconf"
	"github.com/sluice-gw/sluice/gateway/rls"
)

// tlsListen is c's server.tls.listen, "" without TLS.
func tlsListen(c *config.Config) string {
	if c.Server.TLS == nil {
		return ""
	}
	return c.Server.TLS.Listen
}

// rlsListen is c's rls.listen, "" without an rls section.
func rlsListen(c *config.Config) string {
	if c.RLS == nil {
		return ""
	}
	return c.RLS.Listen
}

// Server runs the public and admin listeners in front of the current
// Gateway and swaps gateways on reload without dropping a request. It is
// safe for concurrent use. The public listener runs on the fasthttp engine
// (fastengine: the data path), the admin listener on net/http.
//
// The listeners, the server timeouts and the connection bounds come from
// the first gateway's configuration; a reload that changes server.listen,
// admin.listen, a server timeout, server.max_conns or
// server.max_conns_per_ip is logged and takes effect only after a restart.
type Server struct {
	log    *slog.Logger
	cur    atomic.Pointer[Gateway]
	public *fastengine.Server
	admin  *http.Server
	pubLn  net.Listener
	// web serves HTTPS on tlsLn (server.tls) and h2c beside public
	// (server.http2.h2c); certs holds the certificates it offers.
	web     *httpengine.Server
	tlsLn   net.Listener
	certs   *tlsconf.Store
	adminLn net.Listener
	// watchStop ends the certificate files' watch.
	watchStop context.CancelFunc
	// rls and rlsLn serve the rate limit service (rls section), if any.
	rls     *rls.Server
	rlsLn   net.Listener
	errc    chan error
	retired sync.WaitGroup
	stop    chan struct{} // closed by Shutdown: retiring gateways stop waiting
	once    sync.Once
}

// NewServer returns a Server that will serve g. log nil discards logs. It
// fails when server.tls's certificates cannot be loaded.
func NewServer(g *Gateway, log *slog.Logger) (*Server, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{log: log, errc: make(chan error, 4), stop: make(chan struct{})}
	s.cur.Store(g)
	errLog := slog.NewLogLogger(log.Handler(), slog.LevelWarn)
	s.public = fastengine.NewServer(g.cfg.Server, s.front, fastengine.ServerOptions{Log: log, Metrics: g.metrics, Panics: g.panics})
	wo := httpengine.ServerOptions{Log: log, Metrics: g.metrics, Panics: g.panics, Conns: s.public.Conns()}
	if tc := g.cfg.Server.TLS; tc != nil {
		var err error
		if s.certs, err = tlsconf.New(tc, log); err != nil {
			return nil, fmt.Errorf("gateway: server.tls: %w", err)
		}
		wo.TLS = s.certs.TLSConfig()
	}
	s.web = httpengine.NewServer(g.cfg.Server, s.webFront, wo)
	s.admin = &http.Server{
		Handler:           http.HandlerFunc(s.serveAdmin),
		ReadHeaderTimeout: 5 * time.Second,
		IdleTimeout:       60 * time.Second,
		ErrorLog:          errLog,
	}
	return s, nil
}

// Start binds both listeners and serves in the background. Errors after
// Start returns arrive on Err.
func (s *Server) Start() error {
	cfg := s.cur.Load().cfg
	var err error
	if s.pubLn, err = net.Listen("tcp", cfg.Server.Listen); err != nil {
		return fmt.Errorf("gateway: listen %s: %w", cfg.Server.Listen, err)
	}
	if s.adminLn, err = net.Listen("tcp", cfg.Admin.Listen); err != nil {
		s.pubLn.Close()
		return fmt.Errorf("gateway: admin listen %s: %w", cfg.Admin.Listen, err)
	}
	if tc := cfg.Server.TLS; tc != nil {
		if s.tlsLn, err = net.Listen("tcp", tc.Listen); err != nil {
			s.pubLn.Close()
			s.adminLn.Close()
			return fmt.Errorf("gateway: server.tls listen %s: %w", tc.Listen, err)
		}
	}
	if cfg.RLS != nil {
		if err = s.startRLS(cfg.RLS); err != nil {
			s.pubLn.Close()
			s.adminLn.Close()
			if s.tlsLn != nil {
				s.tlsLn.Close()
			}
			return err
		}
	}
	if cfg.Server.HTTP2.H2C {
		h1, h2 := httpengine.SplitH2C(connlimit.Listen(s.pubLn, s.public.Conns(), false), cfg.Server.ReadHeaderTimeout)
		go s.servePublic(func() error { return s.public.ServeBounded(h1) })
		go s.servePublic(func() error { return s.web.ServeH2C(h2) })
	} else {
		go s.servePublic(func() error { return s.public.Serve(s.pubLn) })
	}
	if s.tlsLn != nil {
		go s.servePublic(func() error { return s.web.ServeTLS(s.tlsLn) })
		if s.certs != nil {
			ctx, cancel := context.WithCancel(context.Background())
			s.watchStop = cancel
			go s.certs.Watch(ctx)
		}
	}
	go s.serve(s.admin, s.adminLn)
	// Start following the shared overrides table now rather than on the
	// first request (its first read waits for the store).
	go s.cur.Load().store.overrides.ensureStarted()
	s.cur.Load().health.start()
	attrs := []any{"public", s.pubLn.Addr().String(), "admin", s.adminLn.Addr().String()}
	if s.tlsLn != nil {
		attrs = append(attrs, "https", s.tlsLn.Addr().String())
	}
	if cfg.Server.HTTP2.H2C {
		attrs = append(attrs, "h2c", true)
	}
	s.log.Info("sluice listening", attrs...)
	return nil
}

func (s *Server) serve(hs *http.Server, ln net.Listener) {
	if err := hs.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		s.errc <- err
	}
}

func (s *Server) servePublic(serve func() error) {
	if err := serve(); err != nil && !errors.Is(err, net.ErrClosed) {
		s.errc <- err
	}
}

// Err delivers an error when a listener stops serving unexpectedly.
func (s *Server) Err() <-chan error { return s.errc }

// Addr returns the public listener's address (after Start).
func (s *Server) Addr() net.Addr { return s.pubLn.Addr() }

// TLSAddr returns the HTTPS listener's address (after Start), nil without
// server.tls.
func (s *Server) TLSAddr() net.Addr {
	if s.tlsLn == nil {
		return nil
	}
	return s.tlsLn.Addr()
}

// AdminAddr returns the admin listener's address (after Start).
func (s *Server) AdminAddr() net.Addr { return s.adminLn.Addr() }

// Gateway returns the gateway currently serving.
func (s *Server) Gateway() *Gateway { return s.cur.Load() }

// acquire returns the current gateway with its in-flight count raised. The
// second load makes sure a concurrent Swap either sees this request in the
// old gateway's count or this request moves on to the new gateway.
func (s *Server) acquire() *Gateway {
	for {
		g := s.cur.Load()
		g.inflight.Add(1)
		if s.cur.Load() == g {
			return g
		}
		g.inflight.Add(-1)
	}
}

// front is the public engine's Front: the current gateway's handler, with
// the request counted in that gateway's in-flight requests until it ends.
func (s *Server) front() (*fastengine.Handler, func()) {
	g := s.acquire()
	return g.engine, func() { g.inflight.Add(-1) }
}

// webFront is the net/http engine's Front, as front is fastengine's.
func (s *Server) webFront() (*httpengine.Handler, func()) {
	g := s.acquire()
	return g.web, func() { g.inflight.Add(-1) }
}

func (s *Server) serveAdmin(w http.ResponseWriter, r *http.Request) {
	g := s.acquire()
	defer g.inflight.Add(-1)
	g.admin.ServeHTTP(w, r)
}

// Swap makes g serve every new request and retires the old gateway: it is
// closed once its in-flight requests have finished, or after its
// server.shutdown_timeout, whichever comes first.
func (s *Server) Swap(g *Gateway) {
	old := s.cur.Swap(g)
	if old == g {
		return
	}
	go g.store.overrides.ensureStarted()
	g.health.start()
	oc, nc := old.cfg, g.cfg
	if oc.Server.Listen != nc.Server.Listen || oc.Admin.Listen != nc.Admin.Listen {
		s.log.Warn("listen addresses changed; restart sluice to apply", "server.listen", nc.Server.Listen, "admin.listen", nc.Admin.Listen)
	}
	if tlsListen(oc) != tlsListen(nc) || oc.Server.HTTP2 != nc.Server.HTTP2 {
		s.log.Warn("server.tls.listen or server.http2 changed; restart sluice to apply", "server.tls.listen", tlsListen(nc))
	}
	if s.certs != nil && nc.Server.TLS != nil {
		if err := s.certs.Reload(nc.Server.TLS); err != nil {
			s.log.Error("server.tls: keeping the certificates loaded before", "error", err)
		}
	}
	if rlsListen(oc) != rlsListen(nc) {
		s.log.Warn("rls.listen changed; restart sluice to apply", "rls.listen", rlsListen(nc))
	}
	if oc.Server.ReadHeaderTimeout != nc.Server.ReadHeaderTimeout || oc.Server.ReadTimeout != nc.Server.ReadTimeout ||
		oc.Server.WriteTimeout != nc.Server.WriteTimeout || oc.Server.IdleTimeout != nc.Server.IdleTimeout {
		s.log.Warn("server timeouts changed; restart sluice to apply")
	}
	if oc.Server.MaxConns != nc.Server.MaxConns || oc.Server.MaxConnsPerIP != nc.Server.MaxConnsPerIP {
		s.log.Warn("connection bounds changed; restart sluice to apply", "server.max_conns", nc.Server.MaxConns, "server.max_conns_per_ip", nc.Server.MaxConnsPerIP)
	}
	s.retired.Add(1)
	go func() {
		defer s.retired.Done()
		s.retire(old, oc.Server.ShutdownTimeout)
	}()
}

// retire waits for old's in-flight requests (at most grace), then closes it.
func (s *Server) retire(old *Gateway, grace time.Duration) {
	deadline := time.NewTimer(grace)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for old.inflight.Load() > 0 {
		select {
		case <-tick.C:
		case <-s.stop:
		case <-deadline.C:
			s.log.Warn("closing a replaced configuration with requests still running", "requests", old.inflight.Load())
			old.Close()
			return
		}
	}
	if err := old.Close(); err != nil {
		s.log.Warn("closing a replaced configuration", "error", err)
	}
}

// Shutdown stops accepting connections and waits for in-flight requests
// until ctx is done; requests still running then are cut off (and counted in
// the log). It then closes every gateway. It returns ctx's error when
// requests had to be cut off.
func (s *Server) Shutdown(ctx context.Context) error {
	rlsDone := make(chan error, 1)
	go func() { rlsDone <- s.shutdownRLS(ctx) }()
	webDone := make(chan error, 1)
	go func() { webDone <- s.web.Shutdown(ctx) }()
	err := s.public.ShutdownWithContext(ctx)
	if werr := <-webDone; werr != nil && err == nil {
		err = werr
	}
	if err != nil {
		s.log.Warn("shutdown timeout passed; cutting off requests still running", "requests", s.cur.Load().inflight.Load())
		s.public.CutOff()
		s.web.CutOff()
	}
	if rerr := <-rlsDone; rerr != nil && err == nil {
		s.log.Warn("shutdown timeout passed; cut off rate limit service calls still running")
		err = rerr
	}
	actx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if s.admin.Shutdown(actx) != nil {
		s.admin.Close()
	}
	s.once.Do(func() { close(s.stop) })
	if s.watchStop != nil {
		s.watchStop()
	}
	s.retired.Wait()
	if cerr := s.cur.Load().Close(); cerr != nil {
		s.log.Warn("closing the store", "error", cerr)
	}
	return err
}
