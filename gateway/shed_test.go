package gateway

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sluice-gw/sluice/gateway/config"
)

// shedConfig has one route per priority (path /PRIORITY) to upstream and
// the given shedding section.
func shedConfig(upstream string, s config.Shedding) *config.Config {
	var routes []config.Route
	for _, p := range config.Priorities {
		rc := upstreamRoute(p, "/"+p, upstream)
		rc.Timeout = 30 * time.Second
		rc.Priority = p
		routes = append(routes, rc)
	}
	cfg := testConfig(routes...)
	cfg.Shedding = &s
	return cfg
}

// TestSheddingOrderByPriority: an overload of slow requests fills the fleet
// budget (shared by two instances through the store); each priority is shed
// once the requests in flight reach its share, lower priorities first, and
// every shed answer is a 503 with Retry-After, counted by route, priority
// and reason. Once the requests end, the budget is free again.
func TestSheddingOrderByPriority(t *testing.T) {
	for _, st := range leaseStores() {
		t.Run(st.name, func(t *testing.T) {
			up := newSlowUpstream(t)
			// Ceilings: critical 10, high 9, normal 8, low 6.
			cfg := shedConfig(up.URL, config.Shedding{MaxInFlight: 10, LeaseTTL: 30 * time.Second,
				Share: config.DefaultShedShares})
			st.apply(t, cfg)
			gws := []*Gateway{newTestGateway(t, cfg)}
			if st.shared {
				gws = append(gws, newTestGateway(t, cfg))
			}
			var fronts []string
			for _, g := range gws {
				front := httptest.NewServer(g)
				t.Cleanup(front.Close)
				fronts = append(fronts, front.URL)
			}
			answers := make(chan int, 64)
			sent := 0
			// try sends one request of priority p and reports whether it
			// was admitted (it reached the upstream, where it waits) or shed.
			try := func(p string) bool {
				t.Helper()
				before := up.inflight.Load()
				shed := make(chan http.Header, 1)
				front := fronts[sent%len(fronts)]
				sent++
				go func() {
					req, _ := http.NewRequestWithContext(t.Context(), "GET", front+"/"+p, nil)
					resp, err := http.DefaultClient.Do(req)
					if err != nil {
						answers <- 0
						return
					}
					resp.Body.Close()
					if resp.StatusCode == http.StatusServiceUnavailable {
						shed <- resp.Header
						return
					}
					answers <- resp.StatusCode
				}()
				deadline := time.Now().Add(20 * time.Second)
				for {
					select {
					case h := <-shed:
						if h.Get("Retry-After") != "1" {
							t.Errorf("shed %s request: Retry-After = %q, want 1", p, h.Get("Retry-After"))
						}
						return false
					default:
					}
					if up.inflight.Load() > before {
						return true
					}
					if time.Now().After(deadline) {
						t.Fatalf("a %s request was neither shed nor forwarded within 20s", p)
					}
					time.Sleep(2 * time.Millisecond)
				}
			}
			admitted := 0
			for _, step := range []struct {
				priority string
				more     int // admitted before it is shed
			}{{"low", 6}, {"normal", 2}, {"high", 1}, {"critical", 1}} {
				for i := 0; ; i++ {
					if !try(step.priority) {
						if i != step.more {
							t.Fatalf("%s requests: %d admitted on top of %d in flight before the first was shed, want %d", step.priority, i, admitted, step.more)
						}
						break
					}
					if i > step.more {
						t.Fatalf("%s: %d requests admitted with %d in flight, want at most %d", step.priority, i, admitted, step.more)
					}
				}
				admitted += step.more
				// Every lower priority is shed now too.
				if step.priority != "low" && try("low") {
					t.Fatalf("a low request was admitted with %d in flight", admitted)
				}
			}
			up.open()
			for range admitted {
				if s := <-answers; s != http.StatusOK {
					t.Errorf("admitted request = %d, want 200", s)
				}
			}
			// Shed counts: one per priority for its own step, plus one low
			// probe per later step.
			var all strings.Builder
			for _, g := range gws {
				all.WriteString(scrapeMetrics(t, g))
			}
			total := map[string]int{}
			for _, line := range strings.Split(all.String(), "\n") {
				for _, p := range config.Priorities {
					prefix := fmt.Sprintf(`sluice_shed_total{priority=%q,reason="in_flight",route=%q} `, p, p)
					if v, ok := strings.CutPrefix(line, prefix); ok {
						var n int
						fmt.Sscan(v, &n)
						total[p] += n
					}
				}
			}
			want := map[string]int{"low": 4, "normal": 1, "high": 1, "critical": 1}
			for p, n := range want {
				if total[p] != n {
					t.Errorf("sluice_shed_total for %s = %d, want %d (all: %v)", p, total[p], n, total)
				}
			}
			// The budget is free again: a low request goes through (the
			// releases run as the responses end: retry briefly).
			deadline := time.Now().Add(5 * time.Second)
			for {
				status, _, _, err := getAs(t.Context(), fronts[0], "/low", "")
				if err == nil && status == http.StatusOK {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("low request after the overload = %d (%v), want 200 within 5s (lease TTL 30s)", status, err)
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
}

// TestSheddingByLatency: while the upstream's latency (latencySignal) is
// above a priority's multiple of latency_threshold, that priority is shed
// (low at 1×, normal at 2×, high at 4×, critical never); once the upstream
// answers fast again they come back.
func TestSheddingByLatency(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if d, err := time.ParseDuration(r.URL.Query().Get("delay")); err == nil {
			time.Sleep(d)
		}
		w.Write([]byte("ok"))
	}))
	defer up.Close()
	g := newTestGateway(t, shedConfig(up.URL, config.Shedding{MaxInFlight: 1000, LeaseTTL: 30 * time.Second,
		Share: config.DefaultShedShares, LatencyThreshold: time.Second}))
	front := httptest.NewServer(g)
	defer front.Close()
	status := func(path string) int {
		t.Helper()
		s, _, body, err := getAs(t.Context(), front.URL, path, "")
		if err != nil {
			t.Fatal(err)
		}
		if s == http.StatusServiceUnavailable && !strings.Contains(body, "upstream is slow") {
			t.Errorf("%s: 503 body %s, want the latency detail", path, body)
		}
		return s
	}
	// One slow answer (2.5s) of the only client: low (>1s) and normal (>2s)
	// are shed, high (up to 4s) and critical are not. The threshold is far
	// above what a fast answer takes even on a loaded machine.
	if s := status("/critical?delay=2500ms"); s != http.StatusOK {
		t.Fatalf("slow critical request = %d, want 200", s)
	}
	// (critical last: its fast answer may fall in a later second.)
	for _, c := range []struct {
		path string
		want int
	}{{"/low", 503}, {"/normal", 503}, {"/critical", 200}} {
		if s := status(c.path); s != c.want {
			t.Errorf("%s while the upstream takes 2.5s = %d, want %d", c.path, s, c.want)
		}
	}
	// Fast answers in a later second replace the client's slow one: low
	// and normal come back.
	deadline := time.Now().Add(10 * time.Second)
	for status("/low") != http.StatusOK {
		if time.Now().After(deadline) {
			t.Fatal("low still shed 10s after the upstream answers fast again")
		}
		status("/high")
		time.Sleep(20 * time.Millisecond) // polling, with a deadline
	}
	if s := status("/normal"); s != http.StatusOK {
		t.Errorf("normal = %d once low is back, want 200", s)
	}
	if m := scrapeMetrics(t, g); !strings.Contains(m, `sluice_shed_total{priority="low",reason="latency",route="low"}`) {
		t.Errorf("no latency shedding of low in the metrics:\n%s", m)
	}
}
