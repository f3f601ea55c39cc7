package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/sluice-gw/sluice/internal/redistest"
)

// freePort returns a loopback port nothing listens on at the moment.
func freePort(t *testing.T) string {
	t.Helper()
	p, err := redistest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return strconv.Itoa(p)
}

// TestQuickstartAsDocumented runs examples/quickstart.yaml the way the
// README's quickstart does (`sluice --config`, no subcommand) and replays
// its curl session: five requests to /hello admitted and the sixth a 429
// problem+json naming per-ip, the headers shown, /api/orders forwarded for
// alice and 403 without X-User-Id, and the metrics lines shown. Only the
// ports change, so that the test never collides with a gateway already
// running on 8080.
func TestQuickstartAsDocumented(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../../examples/quickstart.yaml")
	if err != nil {
		t.Fatal(err)
	}
	yaml := string(raw)
	for _, addr := range []string{"127.0.0.1:8080", "127.0.0.1:9090"} {
		if !strings.Contains(yaml, addr) {
			t.Fatalf("the quickstart no longer uses %s: update this test and the README together", addr)
		}
		yaml = strings.ReplaceAll(yaml, addr, "127.0.0.1:"+freePort(t))
	}
	path := filepath.Join(t.TempDir(), "quickstart.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startArgs(t, path, "--config", path)

	first := get(t, p.base+"/hello")
	if first.code != 200 || first.body != "hello from sluice\n" {
		t.Fatalf("first /hello: %d %q, want 200 \"hello from sluice\\n\"", first.code, first.body)
	}
	for name, want := range map[string]string{
		"Ratelimit-Policy":      `"per-ip";q=5;w=5`,
		"Ratelimit":             `"per-ip";r=4;t=0`,
		"X-Ratelimit-Limit":     "5",
		"X-Ratelimit-Remaining": "4",
	} {
		if got := first.header.Get(name); got != want {
			t.Errorf("first /hello %s = %q, want %q", name, got, want)
		}
	}
	if first.header.Get("X-Ratelimit-Reset") == "" {
		t.Error("first /hello has no X-Ratelimit-Reset")
	}
	// The README's loop: requests 2 to 5 are admitted, the sixth is a 429.
	for i := 2; i <= 5; i++ {
		if c := get(t, p.base+"/hello").code; c != 200 {
			t.Fatalf("/hello request %d: %d, want 200 (a burst of 5)", i, c)
		}
	}
	r := get(t, p.base+"/hello")
	if r.code == 200 {
		// A token refilled meanwhile (1 a second): only on a very slow run.
		r = get(t, p.base+"/hello")
	}
	if r.code != 429 || !strings.HasPrefix(r.header.Get("Content-Type"), "application/problem+json") {
		t.Fatalf("/hello after the burst: %d %s %q, want a 429 problem+json", r.code, r.header.Get("Content-Type"), r.body)
	}
	var problem struct {
		Type     string   `json:"type"`
		Status   int      `json:"status"`
		Violated []string `json:"violated-policies"`
		Retry    int      `json:"retry_after"`
	}
	if err := json.Unmarshal([]byte(r.body), &problem); err != nil {
		t.Fatalf("429 body %q: %v", r.body, err)
	}
	if problem.Status != 429 || len(problem.Violated) != 1 || problem.Violated[0] != "per-ip" ||
		problem.Type != "https://iana.org/assignments/http-problem-types#quota-exceeded" || problem.Retry < 1 {
		t.Errorf("429 body %+v, want the README's quota-exceeded problem naming per-ip", problem)
	}
	if got := r.header.Get("Retry-After"); got == "" {
		t.Error("429 without Retry-After")
	}

	if r := get(t, p.base+"/api/orders", "X-User-Id", "alice"); r.code != 200 || r.body != "hello from the upstream\n" {
		t.Errorf("/api/orders as alice: %d %q, want 200 \"hello from the upstream\\n\"", r.code, r.body)
	}
	if r := get(t, p.base+"/api/orders"); r.code != 403 || !strings.Contains(r.body, "header:X-User-Id") {
		t.Errorf("/api/orders without X-User-Id: %d %q, want 403 naming header:X-User-Id", r.code, r.body)
	}
	for _, sample := range []string{
		`sluice_decisions_total{policy="global",result="allowed",route="api"}`,
		`sluice_decisions_total{policy="per-user",result="allowed",route="api"}`,
		`sluice_decisions_total{policy="per-ip",result="allowed",route="hello"}`,
		`sluice_decisions_total{policy="per-ip",result="denied",route="hello"}`,
	} {
		if p.metric(sample) == "" {
			t.Errorf("/metrics has no %s", sample)
		}
	}
	if got := p.metric(`sluice_decisions_total{policy="global",result="allowed",route="api"}`); got != "1" {
		t.Errorf("global allowed on api = %q, want 1", got)
	}
	checkREADMEMetricsGrep(t, get(t, p.admin+"/metrics").body)
}

// checkREADMEMetricsGrep runs the README's `curl …/metrics | grep PATTERN`
// line on metrics and checks that it prints the lines the README shows
// (values aside: they depend on the session's timing).
func checkREADMEMetricsGrep(t *testing.T, metrics string) {
	t.Helper()
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?m)^\\$ curl -s localhost:9090/metrics \\| grep '?([^'\\s]+)'?\n((?:[^$`].*\n)+)").FindStringSubmatch(string(readme))
	if m == nil {
		t.Fatal("README.md has no `$ curl -s localhost:9090/metrics | grep PATTERN` line followed by its output")
	}
	pattern := regexp.MustCompile(m[1])
	name := func(line string) string { return line[:max(strings.LastIndexByte(line, ' '), 0)] }
	var shown, printed []string
	for _, l := range strings.Split(strings.TrimSuffix(m[2], "\n"), "\n") {
		shown = append(shown, name(l))
	}
	for _, l := range strings.Split(metrics, "\n") {
		if pattern.MatchString(l) {
			printed = append(printed, name(l))
		}
	}
	if strings.Join(shown, "\n") != strings.Join(printed, "\n") {
		t.Errorf("README's grep %q shows\n%s\nbut prints\n%s", m[1], strings.Join(shown, "\n"), strings.Join(printed, "\n"))
	}
}
