package core

import (
	"fmt"
	"hash/fnv"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-gw/sluice/gateway/config"
	"github.com/sluice-gw/sluice/gateway/metrics"
	"github.com/sluice-gw/sluice/ratelimit"
	"github.com/sluice-gw/sluice/store/memory"
)

// poolRoute is a route forwarding /p/** to a pool of targets.
func poolRoute(id string, pool config.Pool) config.Route {
	return config.Route{ID: id, Match: config.Match{Path: "/" + id + "/**"}, Pool: &pool}
}

// targetsN returns n target URLs.
func targetsN(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("http://10.0.0.%d:8080", i+1)
	}
	return out
}

// poolTable builds cfg (defaulted, validated) and returns its table, the
// registry its metrics are on, and a fake clock every pool and latency
// signal of the table reads.
func poolTable(t testing.TB, cfg *config.Config) (*Table, *prometheus.Registry, *time.Duration) {
	t.Helper()
	config.ApplyDefaults(cfg)
	if err := cfg.Validate(); err != nil {
		t.Fatalf("the test's configuration is not valid: %v", err)
	}
	st, err := memory.New(memory.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	o := Options{Store: func(string) ratelimit.Store { return st }, Metrics: m, Leases: st}
	tab, err := New(cfg, o)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	now := new(time.Duration)
	*now = time.Hour // away from the origin
	clock := func() time.Duration { return *now }
	for _, rt := range tab.Routes() {
		if up := rt.Upstream(); up != nil {
			up.Pool.now = clock
			for _, tg := range up.Pool.Targets() {
				if tg.Latency != nil {
					tg.Latency.now = clock
				}
			}
		}
	}
	return tab, reg, now
}

// poolOf returns the pool of tab's route id.
func poolOf(t *testing.T, tab *Table, id string) *Pool {
	t.Helper()
	for _, rt := range tab.Routes() {
		if rt.ID() == id {
			return rt.Upstream().Pool
		}
	}
	t.Fatalf("no route %q", id)
	return nil
}

// hashRequest is a request carrying X-User: user.
func hashRequest(t *testing.T, user string) *Request {
	t.Helper()
	r, err := newRequest("GET", "gw.test", "/p/x", http.Header{"X-User": {user}}, netip.MustParseAddrPort("192.0.2.7:40000"))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// counts picks n times and counts the picks of each target.
func counts(p *Pool, n int) []int {
	out := make([]int, len(p.Targets()))
	for range n {
		out[p.Pick(nil, 0).Index()]++
	}
	return out
}

func TestSingleUpstreamPool(t *testing.T) {
	tab, _, _ := poolTable(t, decideConfig(proxyRoute("one", config.Match{Path: "/**"}, "http://127.0.0.1:8081/base")))
	up := tab.Routes()[0].Upstream()
	p := up.Pool
	if p == nil || len(p.Targets()) != 1 || p.Retries() != 0 {
		t.Fatalf("pool of a single upstream = %+v, want one target and no retry", p)
	}
	tg := p.Targets()[0]
	if tg.URL != up.Target || tg.URL.String() != "http://127.0.0.1:8081/base" {
		t.Errorf("target %v, Upstream.Target %v; want the upstream, the same *url.URL", tg.URL, up.Target)
	}
	if got := p.Pick(nil, 0); got != tg {
		t.Errorf("Pick = %v, want the one target", got)
	}
	if got := p.Pick(nil, 1); got != nil {
		t.Errorf("Pick after trying it = %v, want nil", got)
	}
	// Connection failures never eject it.
	for range 10 {
		tg.Acquire()
		tg.Release(TargetConnFailed)
	}
	if !tg.Up() || tg.InFlight() != 0 {
		t.Errorf("after failures: Up %v, in flight %d; want up, 0", tg.Up(), tg.InFlight())
	}
	if n := testing.AllocsPerRun(100, func() { p.Pick(nil, 0) }); n != 0 {
		t.Errorf("Pick of a single upstream: %v allocations, want 0", n)
	}
}

func TestPoolRoundRobin(t *testing.T) {
	tab, _, _ := poolTable(t, decideConfig(poolRoute("p", config.Pool{Targets: targetsN(3)})))
	p := poolOf(t, tab, "p")
	if got := counts(p, 300); got[0] != 100 || got[1] != 100 || got[2] != 100 {
		t.Errorf("300 picks: %v, want 100 each", got)
	}
	if p.Retries() != 1 || p.Balance() != config.BalanceRoundRobin {
		t.Errorf("retries %d, balance %q; want the defaults 1, round_robin", p.Retries(), p.Balance())
	}
	// One target out: the others share evenly.
	p.SetProbe(1, false)
	p.SetProbe(1, false)
	p.SetProbe(1, false)
	if got := counts(p, 300); got[0] != 150 || got[1] != 0 || got[2] != 150 {
		t.Errorf("300 picks with target 1 out: %v, want 150, 0, 150", got)
	}
}

func TestPoolTried(t *testing.T) {
	tab, _, _ := poolTable(t, decideConfig(poolRoute("p", config.Pool{Targets: targetsN(3)})))
	p := poolOf(t, tab, "p")
	for range 10 {
		if got := p.Pick(nil, 0b101); got == nil || got.Index() != 1 {
			t.Fatalf("Pick having tried 0 and 2 = %v, want target 1", got)
		}
	}
	if got := p.Pick(nil, 0b111); got != nil {
		t.Errorf("Pick having tried every target = %v, want nil", got)
	}
	// Every target in rotation tried: the one out of rotation is left.
	for range 3 {
		p.SetProbe(2, false)
	}
	if got := p.Pick(nil, 0b011); got == nil || got.Index() != 2 {
		t.Errorf("Pick having tried those in rotation = %v, want target 2 (out of rotation, not tried)", got)
	}
}

func TestPoolLeastConn(t *testing.T) {
	tab, _, _ := poolTable(t, decideConfig(poolRoute("p", config.Pool{Targets: targetsN(3), Balance: config.BalanceLeastConn})))
	p := poolOf(t, tab, "p")
	tg := p.Targets()
	tg[0].Acquire()
	tg[0].Acquire()
	tg[1].Acquire()
	for range 5 {
		if got := p.Pick(nil, 0); got != tg[2] {
			t.Fatalf("Pick with 2, 1, 0 in flight = target %d, want 2", got.Index())
		}
	}
	tg[2].Acquire()
	// 1 and 2 tie with one in flight each: round robin between them.
	seen := map[int]int{}
	for range 10 {
		seen[p.Pick(nil, 0).Index()]++
	}
	if seen[1] != 5 || seen[2] != 5 {
		t.Errorf("ties of 1 and 2: picks %v, want 5 each", seen)
	}
	tg[0].Release(TargetOK)
	tg[0].Release(TargetOK)
	if got := p.Pick(nil, 0); got != tg[0] {
		t.Errorf("Pick once 0 is idle = target %d, want 0", got.Index())
	}
}

func TestPoolHash(t *testing.T) {
	const users = 2000
	tab, _, _ := poolTable(t, decideConfig(poolRoute("p", config.Pool{Targets: targetsN(4), Balance: config.BalanceHash, HashKey: "header:X-User"})))
	p := poolOf(t, tab, "p")
	before := make([]int, users)
	per := make([]int, 4)
	for u := range users {
		r := hashRequest(t, fmt.Sprint("user-", u))
		before[u] = p.Pick(r, 0).Index()
		per[before[u]]++
		if again := p.Pick(r, 0).Index(); again != before[u] {
			t.Fatalf("user %d: target %d, then %d; want the same", u, before[u], again)
		}
	}
	for i, n := range per {
		if n < users/4*7/10 || n > users/4*13/10 {
			t.Errorf("target %d holds %d of %d users, want about %d: %v", i, n, users, users/4, per)
		}
	}
	// Target 2 leaves: only its users move, spread over the others.
	for range 3 {
		p.SetProbe(2, false)
	}
	moved := make([]int, 4)
	for u := range users {
		got := p.Pick(hashRequest(t, fmt.Sprint("user-", u)), 0).Index()
		switch {
		case before[u] != 2 && got != before[u]:
			t.Fatalf("user %d moved from target %d to %d when target 2 left", u, before[u], got)
		case before[u] == 2 && got == 2:
			t.Fatalf("user %d still on target 2, out of rotation", u)
		case before[u] == 2:
			moved[got]++
		}
	}
	for _, i := range []int{0, 1, 3} {
		if moved[i] == 0 {
			t.Errorf("target 2's users moved %v, want some to each other target", moved)
		}
	}
	// It comes back: every user is where it was.
	p.SetProbe(2, true)
	p.SetProbe(2, true)
	for u := range users {
		if got := p.Pick(hashRequest(t, fmt.Sprint("user-", u)), 0).Index(); got != before[u] {
			t.Fatalf("user %d on target %d after target 2 came back, want %d", u, got, before[u])
		}
	}
	// Without the key's value, round robin.
	r := hashRequest(t, "")
	if got := [2]int{p.Pick(r, 0).Index(), p.Pick(r, 0).Index()}; got[0] == got[1] {
		t.Errorf("requests without X-User went to %v, want round robin", got)
	}
	// A retry goes elsewhere.
	r = hashRequest(t, "user-1")
	if got := p.Pick(r, 1<<before[1]); got == nil || got.Index() == before[1] {
		t.Errorf("retry of user-1 = %v, want a target other than %d", got, before[1])
	}
}

// TestPoolHashDeterministic: the same key goes to the same target in
// every process (the hash is not seeded per process).
func TestPoolHashDeterministic(t *testing.T) {
	for _, s := range []string{"", "user-1", "10.0.0.1", "\xff\x00é"} {
		h := fnv.New64a()
		h.Write([]byte(s))
		if got, want := hashString(s), h.Sum64(); got != want {
			t.Errorf("hashString(%q) = %#x, want %#x (FNV-1a)", s, got, want)
		}
	}
}

func TestPoolPassiveEjection(t *testing.T) {
	tab, reg, now := poolTable(t, decideConfig(poolRoute("p", config.Pool{Targets: targetsN(3),
		Passive: config.PassiveHealth{EjectFor: 10 * time.Second}})))
	p := poolOf(t, tab, "p")
	tg := p.Targets()[1]
	fail := func(o TargetOutcome) {
		tg.Acquire()
		tg.Release(o)
	}
	fail(TargetConnFailed)
	fail(TargetConnFailed)
	fail(TargetOK) // resets the count
	fail(TargetConnFailed)
	fail(TargetConnFailed)
	fail(TargetFailed) // neither counts nor resets
	if !tg.Up() {
		t.Fatal("ejected before 3 connection failures in a row")
	}
	fail(TargetConnFailed)
	if tg.Up() {
		t.Fatal("in rotation after 3 connection failures in a row, want ejected")
	}
	if got := counts(p, 100); got[1] != 0 {
		t.Errorf("picks while ejected: %v, want none for target 1", got)
	}
	*now += 10*time.Second - time.Millisecond
	if tg.Up() {
		t.Error("back before eject_for")
	}
	*now += time.Millisecond
	if !tg.Up() {
		t.Error("not back after eject_for")
	}
	if got := counts(p, 99); got[1] != 33 {
		t.Errorf("picks once back: %v, want 33 for target 1", got)
	}
	wantMetrics(t, reg, `
sluice_upstream_target_ejections_total{reason="passive",route="p",target="http://10.0.0.2:8080"} 1
sluice_upstream_target_requests_total{route="p",target="http://10.0.0.2:8080"} 7
sluice_upstream_target_up{route="p",target="http://10.0.0.2:8080"} 1
`)
	// Ejected again: the gauge reads 0 at once.
	for range 3 {
		fail(TargetConnFailed)
	}
	wantMetrics(t, reg, `
sluice_upstream_target_up{route="p",target="http://10.0.0.2:8080"} 0
`)
}

// TestPoolPassiveOff: passive.failures 0 never ejects.
func TestPoolPassiveOff(t *testing.T) {
	tab, _, _ := poolTable(t, decideConfig(poolRoute("p", config.Pool{Targets: targetsN(2),
		Passive: config.PassiveHealth{Failures: new(0)}})))
	tg := poolOf(t, tab, "p").Targets()[0]
	for range 20 {
		tg.Acquire()
		tg.Release(TargetConnFailed)
	}
	if !tg.Up() {
		t.Error("ejected with passive.failures 0")
	}
}

func TestPoolProbeThresholds(t *testing.T) {
	tab, reg, _ := poolTable(t, decideConfig(poolRoute("p", config.Pool{Targets: targetsN(2),
		HealthCheck: &config.HealthCheck{Path: "/healthz"}})))
	p := poolOf(t, tab, "p")
	tg := p.Targets()[0]
	steps := []struct {
		ok, up bool
	}{
		{false, true}, {false, true}, {true, true}, // a pass resets the failures
		{false, true}, {false, true}, {false, false}, // 3 in a row: out
		{false, false}, {true, false}, {false, false}, // a failure resets the passes
		{true, false}, {true, true}, // 2 in a row: back
		{false, true},
	}
	for i, s := range steps {
		p.SetProbe(0, s.ok)
		if tg.Up() != s.up {
			t.Fatalf("after probe %d (ok %v): Up %v, want %v", i, s.ok, tg.Up(), s.up)
		}
	}
	wantMetrics(t, reg, `
sluice_upstream_target_ejections_total{reason="active",route="p",target="http://10.0.0.1:8080"} 1
`)
}

// TestPoolPanicMode: with no target in rotation, requests are balanced
// over all of them.
func TestPoolPanicMode(t *testing.T) {
	tab, _, _ := poolTable(t, decideConfig(poolRoute("p", config.Pool{Targets: targetsN(3),
		HealthCheck: &config.HealthCheck{Path: "/healthz", UnhealthyThreshold: 1}})))
	p := poolOf(t, tab, "p")
	for i := range 3 {
		p.SetProbe(i, false)
	}
	for _, tg := range p.Targets() {
		if tg.Up() {
			t.Fatalf("target %d up after a failed probe", tg.Index())
		}
	}
	if got := counts(p, 300); got[0] != 100 || got[1] != 100 || got[2] != 100 {
		t.Errorf("picks in panic mode: %v, want 100 each", got)
	}
	if got := p.Pick(nil, 0b110); got == nil || got.Index() != 0 {
		t.Errorf("retry in panic mode = %v, want the untried target 0", got)
	}
}

// slowTargets feeds the latency signals of p's targets: latency[i] for
// target i, for 20 clients.
func slowTargets(p *Pool, latency ...time.Duration) {
	for i, tg := range p.Targets() {
		for c := range uint64(20) {
			tg.Latency.Observe(c+1, latency[i])
		}
		// The client of decide's requests.
		tg.Latency.Observe(clientOfAddr(netip.MustParseAddr("192.0.2.7"), true), latency[i])
	}
}

// TestPoolLatency: a target over shedding.latency_threshold is out of
// rotation while another is within it, and the route's shedding reads the
// lowest signal among the targets in rotation, so the route is not shed.
func TestPoolLatency(t *testing.T) {
	cfg := decideConfig(poolRoute("p", config.Pool{Targets: targetsN(3)}))
	cfg.Routes[0].Priority = config.PriorityLow
	cfg.Shedding = &config.Shedding{MaxInFlight: 1000, LatencyThreshold: 100 * time.Millisecond}
	tab, reg, now := poolTable(t, cfg)
	p := poolOf(t, tab, "p")
	up := tab.Routes()[0].Upstream()
	if up.Latency != nil {
		t.Error("Upstream.Latency of a pool of several targets is set, want nil (each target has its own)")
	}
	for _, tg := range p.Targets() {
		if tg.Latency == nil {
			t.Fatalf("target %d has no latency signal with latency_threshold", tg.Index())
		}
	}
	slowTargets(p, time.Second, 10*time.Millisecond, 20*time.Millisecond)
	*now += latencyRecompute
	if p.Targets()[0].Up() || !p.Targets()[1].Up() || !p.Targets()[2].Up() {
		t.Fatalf("Up = %v %v %v, want the slow target 0 out", p.Targets()[0].Up(), p.Targets()[1].Up(), p.Targets()[2].Up())
	}
	if got := counts(p, 100); got[0] != 0 {
		t.Errorf("picks with target 0 slow: %v, want none for it", got)
	}
	if got := p.shedSignal(); got != p.Targets()[1].Latency {
		t.Errorf("shedSignal is not the fastest target's")
	}
	for range 10 {
		if out := decide(tab, req{target: "/p/x"}); !out.Forward {
			t.Fatalf("request of a low route with one slow target: %d %s, want forwarded", out.Status, out.Body)
		}
	}
	wantMetrics(t, reg, `
sluice_upstream_target_ejections_total{reason="latency",route="p",target="http://10.0.0.1:8080"} 1
sluice_upstream_target_up{route="p",target="http://10.0.0.1:8080"} 0
`)

	// Every target slow: none is out of rotation for it, and the route
	// sheds by the lowest.
	*now += latencyWindow
	slowTargets(p, time.Second, 300*time.Millisecond, 500*time.Millisecond)
	*now += latencyRecompute
	for _, tg := range p.Targets() {
		if !tg.Up() {
			t.Errorf("target %d out with every target slow, want in rotation", tg.Index())
		}
	}
	if got := p.shedSignal().get(); got != 300*time.Millisecond {
		t.Errorf("the pool's signal = %v, want the lowest, 300ms", got)
	}
	shed := 0
	for range 10 {
		if out := decide(tab, req{target: "/p/x"}); out.Status == statusServiceUnavailable {
			shed++
		}
	}
	if shed == 0 {
		t.Error("no request shed with every target over the threshold")
	}

	// Out of rotation, a slow target's signal empties within the window
	// and it comes back.
	*now += latencyWindow
	slowTargets(p, time.Second, 10*time.Millisecond, 10*time.Millisecond)
	*now += latencyRecompute
	if p.Targets()[0].Up() {
		t.Fatal("slow target 0 in rotation")
	}
	*now += latencyWindow + latencyRecompute
	if !p.Targets()[0].Up() {
		t.Error("target 0 not back once its signal emptied")
	}
}

// wantMetrics checks that reg's target series hold every line of want
// (name{labels} value, labels in name order).
func wantMetrics(t *testing.T, reg *prometheus.Registry, want string) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	var all []string
	for _, mf := range mfs {
		if !strings.HasPrefix(mf.GetName(), "sluice_upstream_target_") {
			continue
		}
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			v := m.GetCounter().GetValue()
			if m.GetGauge() != nil {
				v = m.GetGauge().GetValue()
			}
			line := fmt.Sprintf("%s{%s} %v", mf.GetName(), strings.Join(labels, ","), v)
			got[line] = true
			all = append(all, line)
		}
	}
	for _, w := range strings.Split(strings.TrimSpace(want), "\n") {
		if !got[w] {
			t.Errorf("metrics lack %s; they are:\n%s", w, strings.Join(all, "\n"))
		}
	}
}

// TestPoolConcurrent: picks, outcomes, probes and latency comparisons run
// together (go test -race), and concurrent failures eject a target once.
func TestPoolConcurrent(t *testing.T) {
	cfg := decideConfig(poolRoute("p", config.Pool{Targets: targetsN(4), Balance: config.BalanceLeastConn,
		Passive: config.PassiveHealth{Failures: new(1), EjectFor: time.Hour}, HealthCheck: &config.HealthCheck{Path: "/h"}}))
	cfg.Shedding = &config.Shedding{MaxInFlight: 1000, LatencyThreshold: time.Second}
	tab, reg, _ := poolTable(t, cfg)
	p := poolOf(t, tab, "p")
	done := make(chan struct{})
	for w := range 8 {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := range 500 {
				tg := p.Pick(nil, 0)
				tg.Acquire()
				tg.Latency.Observe(uint64(w+1), time.Millisecond)
				if tg.Index() == 3 {
					tg.Release(TargetConnFailed)
				} else {
					tg.Release(TargetOK)
				}
				if i%50 == 0 {
					p.SetProbe(i%3, true)
				}
			}
		}()
	}
	for range 8 {
		<-done
	}
	for _, tg := range p.Targets() {
		if tg.InFlight() != 0 {
			t.Errorf("target %d: %d in flight after every request ended", tg.Index(), tg.InFlight())
		}
	}
	wantMetrics(t, reg, `
sluice_upstream_target_ejections_total{reason="passive",route="p",target="http://10.0.0.4:8080"} 1
sluice_upstream_target_up{route="p",target="http://10.0.0.4:8080"} 0
`)
}

// BenchmarkPoolPick: a single upstream's Pick is the hot path of every
// proxied request.
func BenchmarkPoolPick(b *testing.B) {
	for _, bc := range []struct {
		name string
		cfg  *config.Config
	}{
		{"upstream", decideConfig(proxyRoute("p", config.Match{Path: "/p/**"}, "http://127.0.0.1:8081"))},
		{"round_robin_4", decideConfig(poolRoute("p", config.Pool{Targets: targetsN(4)}))},
		{"least_conn_4", decideConfig(poolRoute("p", config.Pool{Targets: targetsN(4), Balance: config.BalanceLeastConn}))},
	} {
		b.Run(bc.name, func(b *testing.B) {
			tab, _, _ := poolTable(b, bc.cfg)
			p := tab.Routes()[0].Upstream().Pool
			b.ReportAllocs()
			for b.Loop() {
				tg := p.Pick(nil, 0)
				tg.Acquire()
				tg.Release(TargetOK)
			}
		})
	}
}
