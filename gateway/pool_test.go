package gateway

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-gw/sluice/gateway/admin"
	"github.com/sluice-gw/sluice/gateway/config"
	"github.com/sluice-gw/sluice/internal/testkit"
)

// TestPoolHealthChecks: a Gateway probes its pools' targets from New until
// Close; the admin stats and sluice_upstream_target_up show what the
// probes found.
func TestPoolHealthChecks(t *testing.T) {
	var badProbes, goodProbes atomic.Int32
	health := func(n *atomic.Int32, code int) string {
		srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/healthz" {
				n.Add(1)
			}
			w.WriteHeader(code)
		})}
		return "http://" + testkit.Serve(t, srv.Serve)
	}
	bad, good := health(&badProbes, http.StatusServiceUnavailable), health(&goodProbes, http.StatusOK)
	cfg := &config.Config{
		Admin: config.Admin{Token: "tok"},
		Routes: []config.Route{{ID: "fleet", Match: config.Match{Path: "/**"}, Pool: &config.Pool{
			Targets:     []string{bad, good},
			HealthCheck: &config.HealthCheck{Path: "/healthz", Interval: 20 * time.Millisecond, Timeout: 10 * time.Millisecond, UnhealthyThreshold: 1},
		}}},
	}
	config.ApplyDefaults(cfg)
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	g, err := New(cfg, Deps{})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	// Built, the gateway probes nothing; a Server starts its probes.
	time.Sleep(100 * time.Millisecond)
	if n := badProbes.Load() + goodProbes.Load(); n != 0 {
		t.Fatalf("%d probes from a gateway no Server serves, want none", n)
	}
	cfg.Server.Listen, cfg.Admin.Listen = "127.0.0.1:0", "127.0.0.1:0"
	srv := startServer(t, g)
	targets := g.table.Routes()[0].Upstream().Pool.Targets()
	deadline := time.Now().Add(10 * time.Second)
	for targets[0].Up() {
		if time.Now().After(deadline) {
			t.Fatal("the failing target is still in rotation after 10s of probes")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if !targets[1].Up() {
		t.Error("the passing target is out of rotation")
	}

	code, body, _ := call(t, g.admin, "GET", "/admin/v1/stats", "", bearer...)
	if code != http.StatusOK {
		t.Fatalf("stats: %d %s", code, body)
	}
	var v admin.StatsView
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatal(err)
	}
	if len(v.Pools) != 1 || v.Pools[0].Route != "fleet" || len(v.Pools[0].Targets) != 2 ||
		v.Pools[0].Targets[0].Target != bad || v.Pools[0].Targets[0].Up || !v.Pools[0].Targets[1].Up {
		t.Errorf("stats' pools = %+v, want fleet with %s down and %s up", v.Pools, bad, good)
	}
	_, metricsText, _ := call(t, g.admin, "GET", "/metrics", "")
	for _, want := range []string{
		`sluice_upstream_target_up{route="fleet",target="` + bad + `"} 0`,
		`sluice_upstream_target_up{route="fleet",target="` + good + `"} 1`,
		`sluice_upstream_target_ejections_total{reason="active",route="fleet",target="` + bad + `"} 1`,
	} {
		if !strings.Contains(metricsText, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}

	// A gateway a reload swaps in probes its own pools.
	g2, err := New(cfg, Deps{Registry: g.Registry(), Previous: g})
	if err != nil {
		t.Fatal(err)
	}
	defer g2.Close()
	srv.Swap(g2)
	deadline = time.Now().Add(10 * time.Second)
	for g2.table.Routes()[0].Upstream().Pool.Targets()[0].Up() {
		if time.Now().After(deadline) {
			t.Fatal("the swapped-in gateway's failing target is still in rotation after 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}

	// A probe cut short by Close may still reach its server; a running
	// checker would probe each target 10 times in 200ms.
	g.Close()
	g2.Close()
	n := badProbes.Load() + goodProbes.Load()
	time.Sleep(200 * time.Millisecond)
	if m := badProbes.Load() + goodProbes.Load(); m-n > 2 {
		t.Errorf("%d probes after Close, want at most one per target cut short", m-n)
	}
}
