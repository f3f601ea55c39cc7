// Package healthcheck probes the targets of the upstream pools that have a
// health_check (docs/operations.md, "Upstream pools"): an HTTP GET of the
// check's path on each target every interval, a pass on a 2xx or 3xx
// answer within the timeout (redirects are not followed), reported to the
// pool with core.Pool.SetProbe, which applies the thresholds.
//
// A probe speaks the protocol the proxy speaks to the target: HTTP/1.1
// for http:// and https:// targets, HTTP/2 by prior knowledge for h2c://
// and HTTP/2 over TLS for h2://. Each probe opens a connection of its own
// (no keep-alive), so that it finds a target that no longer accepts
// connections. The path is appended to the target's base path, as a
// request for that path would be forwarded, and the Host is the target's.
package healthcheck

import (
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/sluice-gw/sluice/gateway/config"
	"github.com/sluice-gw/sluice/gateway/core"
)

// Pool is one pool to probe: its targets and its route's health_check.
type Pool struct {
	// Route is the route's id, for logs.
	Route string
	Pool  *core.Pool
	// Check is the route's pool.health_check, defaulted.
	Check config.HealthCheck
	// TLS configures the probes of https:// and h2:// targets (the
	// route's upstream_tls); nil verifies against the system's roots with
	// the target's host as the server name.
	TLS *tls.Config
}

// Pools returns the pools of table's routes that have a health_check;
// tlsFor, if not nil, gives each route's TLS configuration (Pool.TLS).
func Pools(table *core.Table, cfg *config.Config, tlsFor func(route string) *tls.Config) []Pool {
	var out []Pool
	for i, rt := range table.Routes() {
		rc := &cfg.Routes[i]
		up := rt.Upstream()
		if up == nil || rc.ID != rt.ID() || rc.Pool == nil || rc.Pool.HealthCheck == nil {
			continue
		}
		p := Pool{Route: rt.ID(), Pool: up.Pool, Check: *rc.Pool.HealthCheck}
		if tlsFor != nil {
			p.TLS = tlsFor(rt.ID())
		}
		out = append(out, p)
	}
	return out
}

// userAgent is the probes' User-Agent.
const userAgent = "sluice-health-check"

// Checker probes pools until Stop.
type Checker struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	// transports are the probes' transports, closed by Stop.
	transports []*http.Transport
}

// Start starts probing each target of each pool, at once and then every
// interval, and returns the Checker that stops it. log receives a line
// when a target's probes turn from passing to failing and back; nil
// discards them.
func Start(pools []Pool, log *slog.Logger) *Checker {
	ctx, cancel := context.WithCancel(context.Background())
	c := &Checker{cancel: cancel}
	for _, p := range pools {
		for _, t := range p.Pool.Targets() {
			pr := newProber(p, t, log)
			c.transports = append(c.transports, pr.transport)
			c.wg.Go(func() { pr.run(ctx) })
		}
	}
	return c
}

// Stop stops every probe and waits for them to end. It is idempotent; a
// nil Checker is stopped.
func (c *Checker) Stop() {
	if c == nil {
		return
	}
	c.cancel()
	c.wg.Wait()
	for _, tr := range c.transports {
		tr.CloseIdleConnections()
	}
}

// prober probes one target.
type prober struct {
	route     string
	pool      *core.Pool
	index     int
	url       string // the probe's URL
	check     config.HealthCheck
	client    *http.Client
	transport *http.Transport
	log       *slog.Logger
	passing   bool // the last probe's result, for logs
}

func newProber(p Pool, t *core.Target, log *slog.Logger) *prober {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	u := *t.URL
	tr := &http.Transport{DisableKeepAlives: true, Proxy: nil, TLSClientConfig: p.TLS}
	if tr.TLSClientConfig != nil {
		tr.TLSClientConfig = tr.TLSClientConfig.Clone()
	}
	var protos http.Protocols
	switch strings.ToLower(u.Scheme) {
	case "h2c":
		u.Scheme = "http"
		protos.SetUnencryptedHTTP2(true)
	case "h2":
		u.Scheme = "https"
		protos.SetHTTP2(true)
	default:
		protos.SetHTTP1(true)
	}
	tr.Protocols = &protos
	path, query, _ := strings.Cut(p.Check.Path, "?")
	raw := strings.TrimSuffix(t.URL.EscapedPath(), "/") + path
	u.Path, u.RawPath = raw, raw
	if dec, err := url.PathUnescape(raw); err == nil {
		u.Path = dec
	}
	u.RawQuery = query
	return &prober{
		route: p.Route, pool: p.Pool, index: t.Index(), url: u.String(), check: p.Check,
		transport: tr, log: log, passing: true,
		client: &http.Client{
			Transport:     tr,
			Timeout:       p.Check.Timeout,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
	}
}

// run probes at once, then every interval, until ctx ends.
func (p *prober) run(ctx context.Context) {
	tick := time.NewTicker(p.check.Interval)
	defer tick.Stop()
	for {
		p.once(ctx)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// once probes the target and reports the result to its pool; a probe cut
// short by ctx reports nothing.
func (p *prober) once(ctx context.Context) {
	ok, why := p.probe(ctx)
	if ctx.Err() != nil {
		return
	}
	p.pool.SetProbe(p.index, ok)
	if ok != p.passing {
		p.passing = ok
		if ok {
			p.log.Info("health check passes", "route", p.route, "target", p.url)
		} else {
			p.log.Warn("health check fails", "route", p.route, "target", p.url, "reason", why)
		}
	}
}

// probe GETs the target's health path: ok on a 2xx or 3xx answer within
// the timeout; why says what failed.
func (p *prober) probe(ctx context.Context) (ok bool, why string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.url, nil)
	if err != nil {
		return false, err.Error()
	}
	req.Header.Set("User-Agent", userAgent)
	resp, err := p.client.Do(req)
	if err != nil {
		return false, err.Error()
	}
	defer resp.Body.Close()
	// A little of the body is read so that the answer is whole; the
	// connection is not reused.
	io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10)) //nolint:errcheck // the status decides
	if resp.StatusCode < 200 || resp.StatusCode > 399 {
		return false, resp.Status
	}
	return true, ""
}
