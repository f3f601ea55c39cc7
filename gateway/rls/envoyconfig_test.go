package rls_test

import (
	"math"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/sluice-gw/sluice/gateway"
)

const (
	ok   = rlsv3.RateLimitResponse_OK
	over = rlsv3.RateLimitResponse_OVER_LIMIT
)

// envoyFiles are the envoyproxy/ratelimit files of testdata/envoy, loaded
// through envoy_config as they are.
var envoyFiles = map[string]string{"shop.yaml": "testdata/envoy/shop.yaml", "search.yml": "testdata/envoy/search.yml"}

// TestEnvoyConfigFiles: envoyproxy/ratelimit files load unchanged, and
// their descriptors are limited as that service limits them.
func TestEnvoyConfigFiles(t *testing.T) {
	in := start(t, "rls: {listen: \"127.0.0.1:0\", envoy_config: [shop.yaml, search.yml]}\n", envoyFiles, gateway.Deps{})

	t.Run("key-only entry: one budget per value", func(t *testing.T) {
		for i := range 3 {
			r := in.call(t, "shop", desc("customer", "alice"))
			if r.OverallCode != ok {
				t.Fatalf("call %d for alice = %v, want OK", i+1, r.OverallCode)
			}
			s := r.Statuses[0]
			if s.LimitRemaining != uint32(2-i) {
				t.Errorf("call %d limit_remaining = %d, want %d", i+1, s.LimitRemaining, 2-i)
			}
			cl := s.CurrentLimit
			if cl.GetRequestsPerUnit() != 3 || cl.GetUnit() != rlsv3.RateLimitResponse_RateLimit_MINUTE || cl.GetName() != "per-customer" {
				t.Errorf("current_limit = %v, want 3 per MINUTE named per-customer", cl)
			}
			if d := s.DurationUntilReset.AsDuration(); d <= 0 || d > time.Minute {
				t.Errorf("duration_until_reset = %v, want within the minute", d)
			}
		}
		if r := in.call(t, "shop", desc("customer", "alice")); r.OverallCode != over || r.Statuses[0].Code != over {
			t.Errorf("4th call for alice = %v/%v, want OVER_LIMIT", r.OverallCode, r.Statuses[0].Code)
		}
		if r := in.call(t, "shop", desc("customer", "bob")); r.OverallCode != ok {
			t.Errorf("bob after alice's limit = %v, want OK (own budget)", r.OverallCode)
		}
	})

	t.Run("nested descriptor", func(t *testing.T) {
		if r := in.call(t, "shop", desc("customer", "carol", "action", "checkout")); r.OverallCode != ok || r.Statuses[0].CurrentLimit.GetRequestsPerUnit() != 1 {
			t.Fatalf("first checkout = %v %v, want OK under 1/minute", r.OverallCode, r.Statuses[0].CurrentLimit)
		}
		if r := in.call(t, "shop", desc("customer", "carol", "action", "checkout")); r.OverallCode != over {
			t.Errorf("second checkout = %v, want OVER_LIMIT", r.OverallCode)
		}
		if r := in.call(t, "shop", desc("customer", "carol", "action", "browse")); r.OverallCode != ok || r.Statuses[0].CurrentLimit != nil {
			t.Errorf("customer+browse (no node) = %v %v, want OK without a limit", r.OverallCode, r.Statuses[0].CurrentLimit)
		}
	})

	t.Run("unlimited", func(t *testing.T) {
		for range 5 {
			r := in.call(t, "shop", desc("caller", "internal"))
			if r.OverallCode != ok || r.Statuses[0].LimitRemaining != math.MaxUint32 || r.Statuses[0].CurrentLimit != nil {
				t.Fatalf("unlimited = %v remaining %d limit %v", r.OverallCode, r.Statuses[0].LimitRemaining, r.Statuses[0].CurrentLimit)
			}
		}
	})

	t.Run("wildcard value, a budget per value", func(t *testing.T) {
		for range 2 {
			in.call(t, "shop", desc("path", "/static/a.css"))
		}
		if r := in.call(t, "shop", desc("path", "/static/a.css")); r.OverallCode != over {
			t.Errorf("3rd /static/a.css in a minute = %v, want OVER_LIMIT", r.OverallCode)
		}
		if r := in.call(t, "shop", desc("path", "/static/b.js")); r.OverallCode != ok || r.Statuses[0].CurrentLimit == nil {
			t.Errorf("/static/b.js = %v %v, want OK under its own limit", r.OverallCode, r.Statuses[0].CurrentLimit)
		}
		if r := in.call(t, "shop", desc("path", "/other")); r.Statuses[0].CurrentLimit != nil {
			t.Errorf("/other matched %v, want no limit", r.Statuses[0].CurrentLimit)
		}
	})

	t.Run("share_threshold: one budget for the pattern", func(t *testing.T) {
		in.call(t, "shop", desc("path", "/export/a"))
		in.call(t, "shop", desc("path", "/export/b"))
		if r := in.call(t, "shop", desc("path", "/export/c")); r.OverallCode != over {
			t.Errorf("3rd export path = %v, want OVER_LIMIT (shared budget of 2)", r.OverallCode)
		}
	})

	t.Run("replaces", func(t *testing.T) {
		// Both descriptors match; blocked-ip replaces per-ip, so only the
		// 1/day limit counts.
		r := in.call(t, "search", desc("remote_address", "203.0.113.9"), desc("remote_address", "203.0.113.9"))
		if r.OverallCode != over {
			// The same descriptor twice asks the 1/day budget for 2.
			t.Errorf("two blocked-ip descriptors = %v, want OVER_LIMIT", r.OverallCode)
		}
		r = in.call(t, "search", desc("remote_address", "203.0.113.9"), desc("remote_address", "198.51.100.1"))
		if r.OverallCode != ok || r.Statuses[0].CurrentLimit.GetName() != "blocked-ip" {
			t.Fatalf("blocked-ip + other ip = %v %v", r.OverallCode, r.Statuses[0].CurrentLimit)
		}
		if r.Statuses[1].CurrentLimit != nil {
			t.Errorf("per-ip was replaced but reports %v", r.Statuses[1].CurrentLimit)
		}
	})

	t.Run("shadow_mode never denies", func(t *testing.T) {
		for i := range 3 {
			if r := in.call(t, "search", desc("query_kind", "regex")); r.OverallCode != ok || r.Statuses[0].Code != ok {
				t.Fatalf("shadow call %d = %v/%v, want OK", i+1, r.OverallCode, r.Statuses[0].Code)
			}
		}
	})
}
