package e2e

import (
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"
)

// startExample runs examples/NAME with its listeners on free ports and its
// upstream (http://127.0.0.1:3000) replaced by a test server that answers
// 200.
func startExample(t *testing.T, name string) *proc {
	t.Helper()
	raw, err := os.ReadFile("../../examples/" + name)
	if err != nil {
		t.Fatal(err)
	}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	t.Cleanup(up.Close)
	yaml := string(raw)
	for _, s := range []string{"127.0.0.1:8080", "127.0.0.1:9090", "http://127.0.0.1:3000"} {
		if !strings.Contains(yaml, s) {
			t.Fatalf("examples/%s no longer has %s: update this test", name, s)
		}
	}
	yaml = strings.NewReplacer("127.0.0.1:8080", "127.0.0.1:0", "127.0.0.1:9090", "127.0.0.1:0",
		"http://127.0.0.1:3000", up.URL).Replace(yaml)
	return start(t, yaml)
}

// policyOf returns the policy named by a response's RateLimit-Policy
// header (the first one), e.g. partner for `"partner";q=100;w=1`.
func policyOf(r response) string {
	name, _, _ := strings.Cut(r.header.Get("RateLimit-Policy"), ";")
	return strings.Trim(name, `"`)
}

// TestExampleAPIKeys: examples/api-keys.yaml gives the keys its overrides
// list their policy and every other key the default; no key is a 403.
func TestExampleAPIKeys(t *testing.T) {
	t.Parallel()
	p := startExample(t, "api-keys.yaml")
	for key, want := range map[string]string{"ak_live_acme": "partner", "ak_internal_batch": "internal", "ak_live_someone": "standard"} {
		r := get(t, p.base+"/v1/orders", "X-API-Key", key)
		if r.code != 200 || policyOf(r) != want {
			t.Errorf("key %s: %d, policy %q, want 200 under %s (RateLimit-Policy %q)", key, r.code, policyOf(r), want, r.header.Values("RateLimit-Policy"))
		}
	}
	if r := get(t, p.base+"/v1/orders"); r.code != 403 {
		t.Errorf("no API key: %d, want 403", r.code)
	}
}

// TestExamplePlans: examples/plans.yaml picks the policy from X-Plan, and a
// missing or unknown plan gets the free tier.
func TestExamplePlans(t *testing.T) {
	t.Parallel()
	p := startExample(t, "plans.yaml")
	for plan, want := range map[string]string{"pro": "pro-tier", "free": "free-tier", "": "free-tier", "platinum": "free-tier"} {
		header := []string{"X-API-Key", "k-" + plan}
		if plan != "" {
			header = append(header, "X-Plan", plan)
		}
		r := get(t, p.base+"/v1/search", header...)
		if r.code != 200 || policyOf(r) != want {
			t.Errorf("plan %q: %d, policy %q, want 200 under %s", plan, r.code, policyOf(r), want)
		}
	}
}

// TestExampleShadowRollout: in examples/shadow-rollout.yaml the shadow
// limit (20 per 10 s) denies nothing and shows in no header, while the
// metrics count what it would have denied.
func TestExampleShadowRollout(t *testing.T) {
	t.Parallel()
	p := startExample(t, "shadow-rollout.yaml")
	for i := 1; i <= 25; i++ {
		r := get(t, p.base+"/api/items", "X-User-Id", "u1")
		if r.code != 200 {
			t.Fatalf("request %d: %d, want 200: a shadow limit never denies", i, r.code)
		}
		if hs := strings.Join(r.header.Values("RateLimit-Policy"), ","); strings.Contains(hs, "burst-new") {
			t.Fatalf("request %d: RateLimit-Policy %q names the shadow limit", i, hs)
		}
	}
	got := p.metric(`sluice_decisions_total{policy="burst-new",result="shadow_denied",route="api"}`)
	// 5 when the 25 requests fall in one window; a window boundary crossed
	// on the way lets the sliding counter admit a few more.
	if n, err := strconv.Atoi(got); err != nil || n < 1 || n > 5 {
		t.Errorf("shadow_denied for burst-new = %q, want 1 to 5 of 25 requests against a limit of 20 per 10 s", got)
	}
}
