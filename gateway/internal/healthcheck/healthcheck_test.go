package healthcheck

import (
	"context"
	"crypto/tls"
	"crypto/x509/pkix"
	"io"
	"log"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-gw/sluice/gateway/config"
	"github.com/sluice-gw/sluice/gateway/core"
	"github.com/sluice-gw/sluice/gateway/metrics"
	"github.com/sluice-gw/sluice/internal/testcert"
	"github.com/sluice-gw/sluice/internal/testkit"
	"github.com/sluice-gw/sluice/ratelimit"
)

// newTable builds a configuration of one pool route "p" over targets with
// health check hc, defaulted, and returns its table and configuration.
// It is not validated: the h2c:// and h2:// targets the tests probe are
// built as they would be once config accepts those schemes.
func newTable(t *testing.T, hc config.HealthCheck, targets ...string) (*core.Table, *config.Config) {
	t.Helper()
	cfg := &config.Config{Routes: []config.Route{{ID: "p", Match: config.Match{Path: "/**"},
		Pool: &config.Pool{Targets: targets, HealthCheck: &hc}}}}
	config.ApplyDefaults(cfg)
	m, err := metrics.New(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	tab, err := core.New(cfg, core.Options{Store: func(string) ratelimit.Store { return nil }, Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	return tab, cfg
}

// server serves h over HTTP/1.1 and h2c on a loopback listener and
// returns its address.
func server(t *testing.T, h http.Handler) string {
	t.Helper()
	var protos http.Protocols
	protos.SetHTTP1(true)
	protos.SetUnencryptedHTTP2(true)
	srv := &http.Server{Handler: h, Protocols: &protos, ReadHeaderTimeout: 5 * time.Second}
	return testkit.Serve(t, srv.Serve)
}

// status answers with the status held in code, counting requests.
type status struct {
	code  atomic.Int32
	count atomic.Int32
	proto atomic.Value // the last request's protocol
	path  atomic.Value // the last request's path and query
	delay time.Duration
}

func (s *status) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.count.Add(1)
	s.proto.Store(r.Proto)
	s.path.Store(r.URL.RequestURI())
	if s.delay > 0 {
		select {
		case <-time.After(s.delay):
		case <-r.Context().Done():
		}
	}
	w.WriteHeader(int(s.code.Load()))
}

func newStatus(code int) *status {
	s := &status{}
	s.code.Store(int32(code))
	return s
}

// proberOf returns the prober of the only pool's target i.
func proberOf(t *testing.T, tab *core.Table, cfg *config.Config, tlsConf *tls.Config, i int) *prober {
	t.Helper()
	pools := Pools(tab, cfg, func(string) *tls.Config { return tlsConf })
	if len(pools) != 1 {
		t.Fatalf("Pools = %d pools, want 1", len(pools))
	}
	return newProber(pools[0], pools[0].Pool.Targets()[i], nil)
}

func TestProbe(t *testing.T) {
	hc := config.HealthCheck{Path: "/healthz?deep=1", Timeout: 200 * time.Millisecond}
	for _, tc := range []struct {
		name string
		code int
		ok   bool
	}{
		{"200", 200, true}, {"204", 204, true}, {"302 (not followed)", 302, true},
		{"404", 404, false}, {"500", 500, false}, {"503", 503, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStatus(tc.code)
			addr := server(t, s)
			tab, cfg := newTable(t, hc, "http://"+addr+"/base/")
			ok, why := proberOf(t, tab, cfg, nil, 0).probe(context.Background())
			if ok != tc.ok {
				t.Errorf("probe of a %d answer: ok %v (%s), want %v", tc.code, ok, why, tc.ok)
			}
			if got, _ := s.path.Load().(string); got != "/base/healthz?deep=1" {
				t.Errorf("probed %q, want /base/healthz?deep=1", got)
			}
			if got, _ := s.proto.Load().(string); got != "HTTP/1.1" {
				t.Errorf("probe over %s, want HTTP/1.1", got)
			}
		})
	}
	t.Run("timeout", func(t *testing.T) {
		s := newStatus(200)
		s.delay = 5 * time.Second
		tab, cfg := newTable(t, hc, "http://"+server(t, s))
		start := time.Now()
		if ok, _ := proberOf(t, tab, cfg, nil, 0).probe(context.Background()); ok {
			t.Error("probe of an answer later than the timeout passed")
		}
		if d := time.Since(start); d > 4*time.Second {
			t.Errorf("probe took %v, want about the 200ms timeout", d)
		}
	})
	t.Run("refused", func(t *testing.T) {
		tab, cfg := newTable(t, hc, "http://"+testkit.ClosedAddr(t))
		if ok, _ := proberOf(t, tab, cfg, nil, 0).probe(context.Background()); ok {
			t.Error("probe of a refused connection passed")
		}
	})
	t.Run("h2c", func(t *testing.T) {
		s := newStatus(200)
		tab, cfg := newTable(t, hc, "h2c://"+server(t, s))
		if ok, why := proberOf(t, tab, cfg, nil, 0).probe(context.Background()); !ok {
			t.Fatalf("probe of an h2c target failed: %s", why)
		}
		if got, _ := s.proto.Load().(string); got != "HTTP/2.0" {
			t.Errorf("probe of an h2c target over %s, want HTTP/2.0", got)
		}
	})
}

// TestProbeTLS: https and h2 targets are probed over TLS with the
// caller's configuration.
func TestProbeTLS(t *testing.T) {
	ca := testcert.NewCA(t, "probe CA")
	leaf := ca.Issue(t, pkix.Name{CommonName: "backend"}, "127.0.0.1")
	cert, err := tls.X509KeyPair(leaf.CertPEM, leaf.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	s := newStatus(200)
	var protos http.Protocols
	protos.SetHTTP1(true)
	protos.SetHTTP2(true)
	srv := &http.Server{Handler: s, Protocols: &protos, ReadHeaderTimeout: 5 * time.Second,
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}}, ErrorLog: log.New(io.Discard, "", 0)}
	addr := testkit.Serve(t, func(ln net.Listener) error { return srv.ServeTLS(ln, "", "") })
	hc := config.HealthCheck{Path: "/healthz", Timeout: 2 * time.Second}
	trusted := &tls.Config{RootCAs: ca.Pool()}
	for _, tc := range []struct {
		scheme, proto string
	}{{"https", "HTTP/1.1"}, {"h2", "HTTP/2.0"}} {
		tab, cfg := newTable(t, hc, tc.scheme+"://"+addr)
		if ok, why := proberOf(t, tab, cfg, trusted, 0).probe(context.Background()); !ok {
			t.Errorf("%s probe with the CA trusted failed: %s", tc.scheme, why)
		} else if got, _ := s.proto.Load().(string); got != tc.proto {
			t.Errorf("%s probe over %s, want %s", tc.scheme, got, tc.proto)
		}
		if ok, _ := proberOf(t, tab, cfg, nil, 0).probe(context.Background()); ok {
			t.Errorf("%s probe passed without the CA trusted", tc.scheme)
		}
	}
}

// TestThresholds: probes of a real server take its target out of
// rotation after unhealthy_threshold failures in a row, and back after
// healthy_threshold passes in a row.
func TestThresholds(t *testing.T) {
	bad, good := newStatus(500), newStatus(200)
	tab, cfg := newTable(t, config.HealthCheck{Path: "/healthz", HealthyThreshold: 2, UnhealthyThreshold: 3},
		"http://"+server(t, bad), "http://"+server(t, good))
	pr := proberOf(t, tab, cfg, nil, 0)
	target := pr.pool.Targets()[0]
	ctx := context.Background()
	for i, want := range []bool{true, true, false, false} {
		pr.once(ctx)
		if target.Up() != want {
			t.Fatalf("after %d failing probes: Up %v, want %v", i+1, target.Up(), want)
		}
	}
	bad.code.Store(200)
	for i, want := range []bool{false, true} {
		pr.once(ctx)
		if target.Up() != want {
			t.Fatalf("after %d passing probes: Up %v, want %v", i+1, target.Up(), want)
		}
	}
	if !pr.pool.Targets()[1].Up() {
		t.Error("the other target is out of rotation")
	}
}

// TestStartStop: Start probes every target every interval until Stop,
// which waits for the probes to end.
func TestStartStop(t *testing.T) {
	bad, good := newStatus(503), newStatus(200)
	tab, cfg := newTable(t, config.HealthCheck{Path: "/healthz", Interval: 20 * time.Millisecond, Timeout: 10 * time.Millisecond,
		HealthyThreshold: 1, UnhealthyThreshold: 2}, "http://"+server(t, bad), "http://"+server(t, good))
	c := Start(Pools(tab, cfg, nil), nil)
	defer c.Stop()
	pool := tab.Routes()[0].Upstream().Pool
	waitFor(t, "target 0 out of rotation", func() bool { return !pool.Targets()[0].Up() })
	bad.code.Store(200)
	waitFor(t, "target 0 back in rotation", func() bool { return pool.Targets()[0].Up() })
	if good.count.Load() < 2 {
		t.Errorf("target 1 probed %d times, want every interval", good.count.Load())
	}
	c.Stop()
	c.Stop() // idempotent
	// A probe cut short by Stop may still reach its server; a running
	// checker would probe each target 10 times in 200ms.
	n := bad.count.Load() + good.count.Load()
	time.Sleep(200 * time.Millisecond)
	if m := bad.count.Load() + good.count.Load(); m-n > 2 {
		t.Errorf("%d probes after Stop returned, want at most one per target cut short", m-n)
	}
}

// waitFor polls cond until it holds, failing the test after 10s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
