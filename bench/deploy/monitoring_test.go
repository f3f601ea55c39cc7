package deploy

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/yaml"

	"github.com/sluice-gw/sluice/gateway"
	"github.com/sluice-gw/sluice/gateway/config"
	"github.com/sluice-gw/sluice/gateway/metrics"
	"github.com/sluice-gw/sluice/internal/sluicetest"
)

const (
	monitoringDir = "../../deploy/monitoring"
	rulesFile     = "sluice-rules.yaml"
	rulesTestFile = "sluice-rules.test.yaml"
	dashboardFile = "grafana-dashboard.json"
)

// pendingMetrics are metrics the rules and dashboard may name before sluice
// exports them (none today). Once sluice exports one,
// TestMonitoringMetricNames asks for its removal from this list, so an
// exemption cannot outlive its reason.
var pendingMetrics []string

// TestPrometheusRules runs `promtool check rules` on the rules file and
// `promtool test rules` on its unit tests, which feed synthetic series and
// expect each alert to fire, or not, with its labels and annotations.
func TestPrometheusRules(t *testing.T) {
	tool := sluicetest.RequireProgram(t, "prometheus", "promtool")
	for _, args := range [][]string{{"check", "rules", rulesFile}, {"test", "rules", rulesTestFile}} {
		cmd := exec.Command(tool, args...)
		cmd.Dir = monitoringDir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// TestPrometheusRulesCovered checks that the rules file alerts on what
// docs/operations.md says to watch, and that every alert has a unit test.
func TestPrometheusRulesCovered(t *testing.T) {
	exprs := ruleExprs(t)
	want := map[string]string{ // what must be watched -> a metric that shows it
		"store errors":       "sluice_store_errors_total",
		"breaker open":       "sluice_fallback_active",
		"fallback active":    "sluice_fallback_decisions_total",
		"max_keys overflow":  "sluice_store_key_overflow_total",
		"reload failures":    "sluice_config_last_reload_successful",
		"5xx answers":        `code=~"5.."`,
		"upstream failures":  "sluice_upstream_duration_seconds_bucket",
		"store latency":      "sluice_store_duration_seconds_bucket",
		"rate-limited share": `code="429"`,
		"panics":             "sluice_panics_total",
		"refused conns":      "sluice_connections_refused_total",
	}
	all := strings.Join(slices.Collect(maps.Values(exprs)), "\n")
	for what, s := range want {
		if !strings.Contains(all, s) {
			t.Errorf("no alert watches %s (%s)", what, s)
		}
	}
	tests, err := os.ReadFile(filepath.Join(monitoringDir, rulesTestFile))
	if err != nil {
		t.Fatal(err)
	}
	for alert := range exprs {
		if alert == "SluiceHighDenialRatio" || alert == "SluiceStoreSlow" || alert == "SluiceUpstreamSlow" {
			continue // thresholds on ratios and quantiles, checked by promtool's parser only
		}
		if !strings.Contains(string(tests), "alertname: "+alert+"\n") {
			t.Errorf("alert %s has no test in %s", alert, rulesTestFile)
		}
	}
}

// ruleExprs returns each alert's expression from the rules file.
func ruleExprs(t *testing.T) map[string]string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(monitoringDir, rulesFile))
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Groups []struct {
			Name  string `json:"name"`
			Rules []struct {
				Alert       string            `json:"alert"`
				Expr        string            `json:"expr"`
				For         string            `json:"for"`
				Labels      map[string]string `json:"labels"`
				Annotations map[string]string `json:"annotations"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := yaml.UnmarshalStrict(data, &f); err != nil {
		t.Fatalf("%s: %v", rulesFile, err)
	}
	exprs := map[string]string{}
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" || r.Labels["severity"] == "" || r.Annotations["summary"] == "" {
				t.Errorf("rule %q: want an alert name, a severity label and a summary", r.Alert)
			}
			exprs[r.Alert] = r.Expr
		}
	}
	return exprs
}

// dashboard is the part of Grafana's dashboard model the test reads.
type dashboard struct {
	UID        string  `json:"uid"`
	Title      string  `json:"title"`
	Panels     []panel `json:"panels"`
	Templating struct {
		List []struct {
			Name       string `json:"name"`
			Type       string `json:"type"`
			Definition string `json:"definition"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID         int    `json:"id"`
	Type       string `json:"type"`
	Title      string `json:"title"`
	Datasource *struct {
		Type string `json:"type"`
		UID  string `json:"uid"`
	} `json:"datasource"`
	GridPos struct{ H, W, X, Y int } `json:"gridPos"`
	Targets []struct {
		Expr  string `json:"expr"`
		RefID string `json:"refId"`
	} `json:"targets"`
}

func loadDashboard(t *testing.T) *dashboard {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(monitoringDir, dashboardFile))
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	return &d
}

// TestGrafanaDashboard checks the dashboard JSON: it parses, panel ids are
// unique, every graph queries the ${datasource} variable with a PromQL
// expression per target (refIds unique within the panel), and panels fit
// the 24-column grid without overlapping.
func TestGrafanaDashboard(t *testing.T) {
	d := loadDashboard(t)
	if d.UID == "" || d.Title == "" || len(d.Panels) == 0 {
		t.Fatalf("the dashboard has uid %q, title %q and %d panels", d.UID, d.Title, len(d.Panels))
	}
	ids := map[int]string{}
	type cell struct{ x, y int }
	used := map[cell]string{}
	for _, p := range d.Panels {
		if prev, ok := ids[p.ID]; ok || p.ID == 0 {
			t.Errorf("panel %q has id %d, also used by %q (ids must be unique and non-zero)", p.Title, p.ID, prev)
		}
		ids[p.ID] = p.Title
		g := p.GridPos
		if g.W <= 0 || g.H <= 0 || g.X < 0 || g.X+g.W > 24 {
			t.Errorf("panel %q: gridPos %+v outside the 24-column grid", p.Title, g)
		}
		for x := g.X; x < g.X+g.W; x++ {
			for y := g.Y; y < g.Y+g.H; y++ {
				if other, ok := used[cell{x, y}]; ok {
					t.Errorf("panels %q and %q overlap at (%d, %d)", other, p.Title, x, y)
				}
				used[cell{x, y}] = p.Title
			}
		}
		if p.Type == "row" {
			continue
		}
		if p.Datasource == nil || p.Datasource.UID != "${datasource}" || len(p.Targets) == 0 {
			t.Errorf("panel %q does not query the ${datasource} variable", p.Title)
		}
		refs := map[string]bool{}
		for _, tg := range p.Targets {
			if tg.Expr == "" || tg.RefID == "" || refs[tg.RefID] {
				t.Errorf("panel %q: a target without an expression or with a repeated refId %q", p.Title, tg.RefID)
			}
			refs[tg.RefID] = true
		}
	}
}

// dashboardExprs returns the dashboard's PromQL with Grafana's variables
// replaced by values Prometheus accepts, keyed by where each comes from.
func dashboardExprs(t *testing.T) map[string]string {
	t.Helper()
	d := loadDashboard(t)
	vars := strings.NewReplacer("$__rate_interval", "5m", "$instance", ".*", "$route", ".*")
	out := map[string]string{}
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			out[fmt.Sprintf("panel %d (%s) %s", p.ID, p.Title, tg.RefID)] = vars.Replace(tg.Expr)
		}
	}
	for _, v := range d.Templating.List {
		if v.Type == "query" {
			out["variable "+v.Name] = vars.Replace(v.Definition)
		}
	}
	return out
}

// TestGrafanaDashboardPromQL has promtool parse every dashboard query, as
// recording rules in a scratch rules file.
func TestGrafanaDashboardPromQL(t *testing.T) {
	tool := sluicetest.RequireProgram(t, "prometheus", "promtool")
	var b strings.Builder
	b.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	n := 0
	for where, e := range dashboardExprs(t) {
		if strings.HasPrefix(where, "variable ") {
			continue // label_values() is Grafana's, not PromQL
		}
		n++
		q, _ := json.Marshal(e)
		fmt.Fprintf(&b, "      - record: dashboard:query_%d\n        expr: %s\n", n, q)
	}
	file := filepath.Join(t.TempDir(), "dashboard-rules.yaml")
	if err := os.WriteFile(file, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(tool, "check", "rules", file).CombinedOutput(); err != nil {
		t.Errorf("promtool check rules on the dashboard's queries: %v\n%s\n%s", err, out, b.String())
	}
}

// recorder is a Registerer that notes the name of every metric registered
// through it, before passing the collector on.
type recorder struct {
	prometheus.Registerer
	names map[string]bool
}

var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

func (r *recorder) Register(c prometheus.Collector) error {
	ch := make(chan *prometheus.Desc)
	go func() { c.Describe(ch); close(ch) }()
	for d := range ch {
		if m := fqName.FindStringSubmatch(d.String()); m != nil {
			r.names[m[1]] = true
		}
	}
	return r.Registerer.Register(c)
}

// exported returns the names of the metrics sluice exports: those the
// metrics package registers (labelled series exist before their first
// sample), and those a running gateway's registry gathers (the Go and
// process collectors, and anything the gateway registers itself).
func exported(t *testing.T) map[string]bool {
	t.Helper()
	reg := metrics.NewRegistry()
	rec := &recorder{Registerer: reg, names: map[string]bool{}}
	if _, err := metrics.New(rec); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse("monitoring.yaml", []byte(`
store: {type: memory}
policies: {p: {algorithm: token_bucket, capacity: 1, rate: 1}}
routes: [{id: r, match: {path: /}, respond: {status: 200}, limits: [{policy: p, key: ip}]}]
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	g, err := gateway.New(cfg, gateway.Deps{Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	families, err := g.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		rec.names[f.GetName()] = true
	}
	return rec.names
}

var metricName = regexp.MustCompile(`\b(?:sluice|go|process)_[a-zA-Z0-9_]+`)

// TestMonitoringMetricNames checks that every metric the rules, their
// tests and the dashboard name is one sluice exports (a histogram's
// _bucket, _sum and _count included), so a renamed metric cannot leave an
// alert that never fires or a graph that stays empty.
func TestMonitoringMetricNames(t *testing.T) {
	known := exported(t)
	if !known["sluice_requests_total"] || !known["go_goroutines"] {
		t.Fatalf("the exported names look wrong: %v", known)
	}
	sources := map[string]string{}
	for alert, e := range ruleExprs(t) {
		sources["alert "+alert] = e
	}
	for where, e := range dashboardExprs(t) {
		sources[where] = e
	}
	tests, err := os.ReadFile(filepath.Join(monitoringDir, rulesTestFile))
	if err != nil {
		t.Fatal(err)
	}
	sources[rulesTestFile] = string(tests)

	pendingUsed := map[string]bool{}
	for where, e := range sources {
		for _, name := range metricName.FindAllString(e, -1) {
			base := name
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				if b, ok := strings.CutSuffix(name, suffix); ok && known[b] {
					base = b
				}
			}
			switch {
			case known[base]:
			case slices.Contains(pendingMetrics, base):
				pendingUsed[base] = true
			default:
				t.Errorf("%s uses %s, which sluice does not export", where, name)
			}
		}
	}
	for _, name := range pendingMetrics {
		if known[name] {
			t.Errorf("sluice now exports %s: remove it from pendingMetrics", name)
		}
		if !pendingUsed[name] {
			t.Errorf("pendingMetrics lists %s, which nothing uses", name)
		}
	}
}
