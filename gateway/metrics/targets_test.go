package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestTargets: the per-target counters count, the up gauge reads each
// target at scrape time, and SetTargets replaces the set shown (a reload).
// A second New on the registry (a reloaded gateway) shares the series.
func TestTargets(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m, err := New(reg)
	if err != nil {
		t.Fatal(err)
	}
	a := m.Target("fleet", "http://a:1")
	a.Request()
	a.Request()
	a.Ejected(EjectPassive)
	a.Ejected(EjectLatency)
	a.Ejected("nonsense") // not counted
	up := true
	m.SetTargets([]TargetState{
		{Route: "fleet", Target: "http://a:1", Up: func() bool { return up }},
		{Route: "fleet", Target: "http://b:1", Up: func() bool { return false }},
	})
	want := `
# HELP sluice_upstream_target_ejections_total Times a pool target was taken out of rotation, by route, target and reason (passive: connection failures in a row; active: failed health-check probes; latency: its latency over shedding.latency_threshold while another target's is within it).
# TYPE sluice_upstream_target_ejections_total counter
sluice_upstream_target_ejections_total{reason="active",route="fleet",target="http://a:1"} 0
sluice_upstream_target_ejections_total{reason="latency",route="fleet",target="http://a:1"} 1
sluice_upstream_target_ejections_total{reason="passive",route="fleet",target="http://a:1"} 1
# HELP sluice_upstream_target_requests_total Requests sent to a pool target, retries included, by route and target.
# TYPE sluice_upstream_target_requests_total counter
sluice_upstream_target_requests_total{route="fleet",target="http://a:1"} 2
# HELP sluice_upstream_target_up 1 while a pool target is in rotation (not ejected by passive or active health checks or for latency), 0 otherwise, by route and target.
# TYPE sluice_upstream_target_up gauge
sluice_upstream_target_up{route="fleet",target="http://a:1"} 1
sluice_upstream_target_up{route="fleet",target="http://b:1"} 0
`
	names := []string{"sluice_upstream_target_ejections_total", "sluice_upstream_target_requests_total", "sluice_upstream_target_up"}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}
	up = false
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP sluice_upstream_target_up 1 while a pool target is in rotation (not ejected by passive or active health checks or for latency), 0 otherwise, by route and target.
# TYPE sluice_upstream_target_up gauge
sluice_upstream_target_up{route="fleet",target="http://a:1"} 0
sluice_upstream_target_up{route="fleet",target="http://b:1"} 0
`), "sluice_upstream_target_up"); err != nil {
		t.Errorf("after the target went down: %v", err)
	}

	// A reloaded gateway's metrics: the counters carry on, and its
	// targets replace the old ones in the gauge.
	m2, err := New(reg)
	if err != nil {
		t.Fatal(err)
	}
	m2.Target("fleet", "http://a:1").Request()
	m2.SetTargets([]TargetState{{Route: "fleet", Target: "http://c:1", Up: func() bool { return true }}})
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP sluice_upstream_target_requests_total Requests sent to a pool target, retries included, by route and target.
# TYPE sluice_upstream_target_requests_total counter
sluice_upstream_target_requests_total{route="fleet",target="http://a:1"} 3
# HELP sluice_upstream_target_up 1 while a pool target is in rotation (not ejected by passive or active health checks or for latency), 0 otherwise, by route and target.
# TYPE sluice_upstream_target_up gauge
sluice_upstream_target_up{route="fleet",target="http://c:1"} 1
`), "sluice_upstream_target_requests_total", "sluice_upstream_target_up"); err != nil {
		t.Errorf("after a reload: %v", err)
	}

	// Nil-safe, as every recording method.
	var none *Metrics
	none.Target("r", "t").Request()
	none.Target("r", "t").Ejected(EjectActive)
	none.SetTargets(nil)
}
