package config

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// A pool built in Go takes the defaults of one read from a file, and its
// rules hold there too.
func TestPoolGoConfig(t *testing.T) {
	c := &Config{Routes: []Route{{ID: "a", Match: Match{Path: "/a/**"}, StripPrefix: 1,
		Pool: &Pool{Targets: []string{"http://10.0.0.1:8080", "http://10.0.0.2:8080"}, HealthCheck: &HealthCheck{Path: "/healthz"}}}}}
	ApplyDefaults(c)
	if err := c.Validate(); err != nil {
		t.Fatalf("Validate = %v, want nil", err)
	}
	p := c.Routes[0].Pool
	want := Pool{Targets: p.Targets, Balance: BalanceRoundRobin, Retries: new(1),
		Passive:     PassiveHealth{Failures: new(3), EjectFor: 30 * time.Second},
		HealthCheck: &HealthCheck{Path: "/healthz", Interval: 5 * time.Second, Timeout: time.Second, HealthyThreshold: 2, UnhealthyThreshold: 3}}
	if diff := cmp.Diff(want, *p); diff != "" {
		t.Errorf("defaulted pool (-want +got):\n%s", diff)
	}
	if c.Routes[0].Timeout != DefaultRouteTimeout {
		t.Errorf("a pool route's timeout = %v, want the default %v", c.Routes[0].Timeout, DefaultRouteTimeout)
	}
	urls := c.Routes[0].TargetURLs()
	if len(urls) != 2 || urls[1].Host != "10.0.0.2:8080" {
		t.Errorf("TargetURLs = %v", urls)
	}

	bad := &Config{Routes: []Route{
		{ID: "a", Match: Match{Path: "/a"}, Pool: &Pool{Targets: []string{"http://x:1"}, Retries: new(-1), Balance: BalanceHash}},
		{ID: "b", Match: Match{Path: "/b"}, Pool: &Pool{Targets: []string{"http://x:1"}, HealthCheck: &HealthCheck{Path: "/h", Interval: time.Second, Timeout: time.Second}}},
		{ID: "c", Match: Match{Path: "/c"}, Respond: &Respond{Status: 200}, Timeout: time.Second},
	}}
	ApplyDefaults(bad)
	var errs Errors
	if err := bad.Validate(); !errors.As(err, &errs) {
		t.Fatalf("Validate = %v, want Errors", err)
	}
	var got []string
	for _, e := range errs {
		got = append(got, e.Path+": "+e.Message)
	}
	wantErrs := []string{
		"routes[0].pool.hash_key: hash_key is required with balance: hash",
		"routes[0].pool.retries: must be from 0 (no retry) to 5, got -1",
		"routes[1].pool.health_check.timeout: timeout 1s must be below interval 1s",
		"routes[2].timeout: timeout applies only to routes with an upstream",
	}
	if len(got) != len(wantErrs) {
		t.Fatalf("errors:\n%s\nwant %d", strings.Join(got, "\n"), len(wantErrs))
	}
	for i, w := range wantErrs {
		if !strings.HasPrefix(got[i], w) {
			t.Errorf("error %d = %q, want it to start with %q", i, got[i], w)
		}
	}
}

// The effective configuration of a pool reads back as the same pool.
func TestPoolEffectiveRoundTrip(t *testing.T) {
	c := mustParse(t, `
routes:
  - id: a
    match: {path: /a/**}
    pool:
      targets: [https://a:8443, https://b:8443]
      balance: hash
      hash_key: cookie:session
      retries: 0
      passive: {failures: 0, eject_for: 1m}
      health_check: {path: /healthz, interval: 10s, timeout: 2s, healthy_threshold: 1, unhealthy_threshold: 5}
`, nil)
	again := mustParse(t, c.Effective(), nil)
	if diff := cmp.Diff(c.Routes[0].Pool, again.Routes[0].Pool); diff != "" {
		t.Errorf("pool after Effective and Parse (-before +after):\n%s", diff)
	}
	part, err := again.Routes[0].Pool.HashPart()
	if err != nil || part.String() != "cookie:session" {
		t.Errorf("HashPart = %v, %v; want cookie:session", part, err)
	}
}

// More than 64 targets are refused.
func TestPoolTooManyTargets(t *testing.T) {
	var targets []string
	for i := range MaxPoolTargets + 1 {
		targets = append(targets, fmt.Sprintf("http://10.0.0.1:%d", 8000+i))
	}
	c := &Config{Routes: []Route{{ID: "a", Match: Match{Path: "/a"}, Pool: &Pool{Targets: targets}}}}
	ApplyDefaults(c)
	err := c.Validate()
	if err == nil || !strings.Contains(err.Error(), "at most 64 targets, got 65") {
		t.Errorf("Validate of 65 targets = %v, want at most 64", err)
	}
}
