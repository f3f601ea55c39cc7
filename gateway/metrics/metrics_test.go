package metrics

import (
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/sluice-gw/sluice/ratelimit"
)

func TestDecisionsCountEachLimitOnce(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m, err := New(reg)
	if err != nil {
		t.Fatal(err)
	}
	user := ratelimit.MustPolicy(ratelimit.PolicyConfig{Name: "per-user", Algorithm: ratelimit.TokenBucket, Capacity: 5, Rate: 1})
	global := ratelimit.MustPolicy(ratelimit.PolicyConfig{Name: "global", Algorithm: ratelimit.FixedWindow, Limit: 3, Window: time.Second})
	reqs := []ratelimit.Request{{Policy: user}, {Policy: global}, {Policy: user, Shadow: true}}
	tests := []struct {
		name string
		ds   []ratelimit.Decision
		want [3]ratelimit.Verdict
	}{
		{"all admit", []ratelimit.Decision{{Allowed: true}, {Allowed: true}, {Allowed: true}}, [3]ratelimit.Verdict{ratelimit.Allowed, ratelimit.Allowed, ratelimit.Allowed}},
		{"global denies", []ratelimit.Decision{{Allowed: true}, {}, {Allowed: true}}, [3]ratelimit.Verdict{ratelimit.Allowed, ratelimit.Denied, ratelimit.Allowed}},
		{"shadow refuses", []ratelimit.Decision{{Allowed: true}, {Allowed: true}, {}}, [3]ratelimit.Verdict{ratelimit.Allowed, ratelimit.Allowed, ratelimit.ShadowDenied}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for i := range reqs {
				if got := ratelimit.VerdictOf(reqs[i], tt.ds[i]); got != tt.want[i] {
					t.Errorf("ratelimit.VerdictOf(limit %d) = %s, want %s", i, got, tt.want[i])
				}
			}
			m.Decisions("api", reqs, tt.ds)
		})
	}
	want := map[[2]string]float64{
		{"per-user", "allowed"}:       5,
		{"per-user", "shadow_denied"}: 1,
		{"global", "allowed"}:         2,
		{"global", "denied"}:          1,
	}
	for k, v := range want {
		if got := counterValue(t, m.decisions.WithLabelValues("api", k[0], k[1])); got != v {
			t.Errorf("sluice_decisions_total{route=api,policy=%s,result=%s} = %v, want %v", k[0], k[1], got, v)
		}
	}
}

func TestNewTwiceReusesCollectors(t *testing.T) {
	reg := NewRegistry()
	m1, err := New(reg)
	if err != nil {
		t.Fatal(err)
	}
	m1.Request("api", 200)
	m2, err := New(reg)
	if err != nil {
		t.Fatalf("second New on one registry: %v", err)
	}
	m2.Request("api", 200)
	m2.Request("", 404)
	m2.Request("api", 1000)
	if got := counterValue(t, m1.requests.WithLabelValues("api", "200")); got != 2 {
		t.Errorf("requests{api,200} = %v after one request on each Metrics, want 2", got)
	}
	m2.UpstreamDuration("api", 20*time.Millisecond)
	m2.StoreError(KindConnection)
	m2.StoreDuration(time.Millisecond)
	m2.FallbackDecision("api", "local")
	m2.SetFallbackActive(true)
	m1.LocalDenyDecision("api")
	m2.LocalDenyDecision("api")
	m1.RLSUnknownDomain()
	m2.RLSUnknownDomain()

	rec := httptest.NewRecorder()
	Handler(reg).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body := rec.Body.String()
	for _, want := range []string{
		`sluice_requests_total{code="200",route="api"} 2`,
		`sluice_requests_total{code="404",route=""} 1`,
		`sluice_requests_total{code="other",route="api"} 1`,
		`sluice_upstream_duration_seconds_count{route="api"} 1`,
		`sluice_store_errors_total{kind="connection"} 1`,
		`sluice_store_duration_seconds_count 1`,
		`sluice_fallback_decisions_total{mode="local",route="api"} 1`,
		`sluice_fallback_active 1`,
		`sluice_local_deny_decisions_total{route="api"} 2`,
		"sluice_rls_unknown_domain_total 2\n",
		`go_goroutines`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

func TestNewRejectsConflicts(t *testing.T) {
	if _, err := New(nil); err == nil {
		t.Error("New(nil) = nil error, want an error")
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_fallback_active", Help: "x"}))
	if _, err := New(reg); err == nil {
		t.Error("New on a registry with a conflicting sluice_fallback_active = nil error, want an error")
	}
}

func TestNilMetricsRecordsNothing(t *testing.T) {
	var m *Metrics
	m.Request("api", 200)
	m.Decision("api", "p", ratelimit.Allowed)
	m.Decisions("api", nil, nil)
	m.UpstreamDuration("api", time.Second)
	m.StoreError(KindOther)
	m.StoreDuration(time.Second)
	m.FallbackDecision("api", "allow")
	m.SetFallbackActive(false)
	m.LocalDenyDecision("api")
	m.RLSUnknownDomain()
}

func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// The per-route series are looked up once and then reused: repeated and
// concurrent records all land on the right series, codes out of range
// included.
func TestRouteSeriesCountEveryRecord(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m, err := New(reg)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 50 {
				m.Request("api", 200)
				m.Request("api", 99)
				m.Request("api", 600)
				m.Request("web", 200)
				m.Decision("api", "per-user", ratelimit.Allowed)
				m.Decision("api", "per-user", ratelimit.Denied)
				m.UpstreamDuration("api", time.Millisecond)
			}
		})
	}
	wg.Wait()
	for _, c := range []struct {
		got  prometheus.Counter
		want float64
	}{
		{m.requests.WithLabelValues("api", "200"), 200},
		{m.requests.WithLabelValues("api", "other"), 400},
		{m.requests.WithLabelValues("web", "200"), 200},
		{m.decisions.WithLabelValues("api", "per-user", "allowed"), 200},
		{m.decisions.WithLabelValues("api", "per-user", "denied"), 200},
	} {
		if v := counterValue(t, c.got); v != c.want {
			t.Errorf("%v = %v, want %v", c.got.Desc(), v, c.want)
		}
	}
	rec := httptest.NewRecorder()
	Handler(reg).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if want := `sluice_upstream_duration_seconds_count{route="api"} 200`; !strings.Contains(rec.Body.String(), want) {
		t.Errorf("/metrics lacks %q", want)
	}
}
