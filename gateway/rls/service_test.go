package rls_test

import (
	"context"
	"net"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	commonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluice-gw/sluice/gateway"
	"github.com/sluice-gw/sluice/ratelimit"
)

// ownConfig is an rls section whose descriptors name sluice policies.
const ownConfig = `
policies:
  per-user: {algorithm: token_bucket, capacity: 5, rate: "5/m"}
  per-tenant: {algorithm: fixed_window, limit: 100, window: 10s}
  smooth: {algorithm: leaky_bucket, capacity: 5, rate: "1/s", mode: shape, max_delay: 10s}
rls:
  listen: "127.0.0.1:0"
  max_descriptors: 4
  max_entries: 3
  max_message_bytes: 2048
  domains:
    - domain: api
      descriptors:
        - key: user
          policy: per-user
        - key: tenant
          policy: per-tenant
        - key: queue
          value: jobs
          policy: smooth
`

// TestFields: every field of the answer, through the generated client.
func TestFields(t *testing.T) {
	in := start(t, ownConfig, nil, gateway.Deps{})

	r := in.call(t, "api", desc("user", "u1"), desc("tenant", "t1"))
	if r.OverallCode != ok || len(r.Statuses) != 2 {
		t.Fatalf("answer = %v with %d statuses, want OK with 2", r.OverallCode, len(r.Statuses))
	}
	u, tn := r.Statuses[0], r.Statuses[1]
	if cl := u.CurrentLimit; cl.GetRequestsPerUnit() != 5 || cl.GetUnit() != rlsv3.RateLimitResponse_RateLimit_MINUTE || cl.GetName() != "per-user" {
		t.Errorf("per-user current_limit = %v, want 5 per MINUTE named per-user", cl)
	}
	if cl := tn.CurrentLimit; cl.GetRequestsPerUnit() != 100 || cl.GetUnit() != rlsv3.RateLimitResponse_RateLimit_SECOND || cl.GetUnitMultiplier().GetValue() != 10 {
		t.Errorf("per-tenant current_limit = %v, want 100 per 10 SECOND", cl)
	}
	if u.LimitRemaining != 4 || tn.LimitRemaining != 99 {
		t.Errorf("limit_remaining = %d, %d; want 4, 99", u.LimitRemaining, tn.LimitRemaining)
	}
	if d := tn.DurationUntilReset.AsDuration(); d <= 0 || d > 10*time.Second {
		t.Errorf("per-tenant duration_until_reset = %v, want within its 10s window", d)
	}
	// The headers are the gateway's: the trio of the most constrained limit
	// and both limits in RateLimit and RateLimit-Policy.
	if got := header(r, "X-RateLimit-Limit"); got != "5" {
		t.Errorf("X-RateLimit-Limit = %q, want 5 (per-user is the most constrained)", got)
	}
	if got := header(r, "X-RateLimit-Remaining"); got != "4" {
		t.Errorf("X-RateLimit-Remaining = %q, want 4", got)
	}
	if reset, err := strconv.ParseInt(header(r, "X-RateLimit-Reset"), 10, 64); err != nil || reset < time.Now().Unix() {
		t.Errorf("X-RateLimit-Reset = %q, want a Unix time not in the past", header(r, "X-RateLimit-Reset"))
	}
	if got, want := header(r, "RateLimit-Policy"), `"per-user";q=5;w=60, "per-tenant";q=100;w=10`; got != want {
		t.Errorf("RateLimit-Policy = %q, want %q", got, want)
	}
	if got := header(r, "RateLimit"); !strings.HasPrefix(got, `"per-user";r=4;t=0, "per-tenant";r=99;t=0`) {
		t.Errorf("RateLimit = %q", got)
	}
	if header(r, "Retry-After") != "" {
		t.Errorf("an admitted answer carries Retry-After %q", header(r, "Retry-After"))
	}

	t.Run("hits_addend", func(t *testing.T) {
		// Request-level 3 for both; a descriptor's own value wins.
		resp, err := in.ask("api", 3, desc("user", "u2"), hits(desc("tenant", "t2"), 10))
		if err != nil {
			t.Fatal(err)
		}
		if resp.Statuses[0].LimitRemaining != 2 || resp.Statuses[1].LimitRemaining != 90 {
			t.Errorf("remaining after hits 3 and 10 = %d, %d; want 2, 90", resp.Statuses[0].LimitRemaining, resp.Statuses[1].LimitRemaining)
		}
		// hits_addend 0 only checks.
		resp = in.call(t, "api", hits(desc("user", "u2"), 0))
		if resp.OverallCode != ok || resp.Statuses[0].LimitRemaining != 2 {
			t.Errorf("check-only = %v remaining %d, want OK 2", resp.OverallCode, resp.Statuses[0].LimitRemaining)
		}
		// More than the policy can ever admit is over the limit, consuming nothing.
		resp = in.call(t, "api", hits(desc("user", "u2"), 6))
		if resp.OverallCode != over || resp.Statuses[0].Code != over {
			t.Errorf("hits 6 on a capacity of 5 = %v, want OVER_LIMIT", resp.OverallCode)
		}
	})

	t.Run("all-or-nothing", func(t *testing.T) {
		in.call(t, "api", hits(desc("user", "u3"), 5))
		r := in.call(t, "api", desc("tenant", "t3"), desc("user", "u3"))
		if r.OverallCode != over || r.Statuses[0].Code != ok || r.Statuses[1].Code != over {
			t.Fatalf("answer = %v [%v %v], want OVER_LIMIT [OK OVER_LIMIT]", r.OverallCode, r.Statuses[0].Code, r.Statuses[1].Code)
		}
		if r.Statuses[0].LimitRemaining != 100 {
			t.Errorf("the admitting tenant limit consumed: remaining %d, want 100", r.Statuses[0].LimitRemaining)
		}
		if ra, err := strconv.Atoi(header(r, "Retry-After")); err != nil || ra < 1 || ra > 12 {
			t.Errorf("Retry-After = %q, want the seconds until one more token (1..12)", header(r, "Retry-After"))
		}
		if header(r, "X-RateLimit-Remaining") != "0" {
			t.Errorf("X-RateLimit-Remaining = %q on a denial, want 0", header(r, "X-RateLimit-Remaining"))
		}
	})

	t.Run("unknown domain and descriptors", func(t *testing.T) {
		for _, dom := range []string{"nope", "api"} {
			r := in.call(t, dom, desc("nothing", "here"))
			if r.OverallCode != ok || r.Statuses[0].Code != ok || r.Statuses[0].CurrentLimit != nil || len(r.ResponseHeadersToAdd) != 0 {
				t.Errorf("domain %s, unknown descriptor = %v", dom, r)
			}
		}
		// Deeper than any node: no limit, as envoyproxy/ratelimit answers.
		if r := in.call(t, "api", desc("user", "u9", "extra", "x")); r.Statuses[0].CurrentLimit != nil {
			t.Errorf("user+extra matched %v, want no limit", r.Statuses[0].CurrentLimit)
		}
	})

	t.Run("refused requests", func(t *testing.T) {
		long := strings.Repeat("x", 4096)
		for _, c := range []struct {
			name   string
			domain string
			ds     []*commonv3.RateLimitDescriptor
			code   codes.Code
		}{
			{"empty domain", "", []*commonv3.RateLimitDescriptor{desc("user", "a")}, codes.InvalidArgument},
			{"no descriptors", "api", nil, codes.InvalidArgument},
			{"too many descriptors", "api", []*commonv3.RateLimitDescriptor{desc("a", "1"), desc("a", "2"), desc("a", "3"), desc("a", "4"), desc("a", "5")}, codes.InvalidArgument},
			{"too many entries", "api", []*commonv3.RateLimitDescriptor{desc("a", "1", "b", "2", "c", "3", "d", "4")}, codes.InvalidArgument},
			{"empty descriptor", "api", []*commonv3.RateLimitDescriptor{{}}, codes.InvalidArgument},
			{"message too large", "api", []*commonv3.RateLimitDescriptor{desc("user", long)}, codes.ResourceExhausted},
		} {
			_, err := in.ask(c.domain, 0, c.ds...)
			if status.Code(err) != c.code {
				t.Errorf("%s: error %v, want %v", c.name, err, c.code)
			}
		}
	})

	t.Run("shape holds the answer; the deadline ends the hold", func(t *testing.T) {
		// The first unit goes at once, the second waits about 1s: more than
		// the deadline allows.
		if r := in.call(t, "api", desc("queue", "jobs")); r.OverallCode != ok {
			t.Fatalf("first shaped call = %v, want OK", r.OverallCode)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		_, err := in.client.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "api", Descriptors: []*commonv3.RateLimitDescriptor{desc("queue", "jobs")}})
		if status.Code(err) != codes.DeadlineExceeded {
			t.Errorf("shaped call past its deadline: %v, want DeadlineExceeded", err)
		}
	})
}

// failingStore fails every call as a refused connection does.
type failingStore struct{}

var errRefused = &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}

func (failingStore) Evaluate(context.Context, []ratelimit.Request, []ratelimit.Decision) (bool, error) {
	return false, errRefused
}
func (failingStore) Peek(context.Context, []ratelimit.Request, []ratelimit.Decision) error {
	return errRefused
}
func (failingStore) Reset(context.Context, []ratelimit.Request) error { return errRefused }

// TestOnError: a store failure follows store.on_error as on the gateway's
// routes, counted with the domain's route-like label.
func TestOnError(t *testing.T) {
	for _, c := range []struct {
		mode string
		want rlsv3.RateLimitResponse_Code
	}{{"deny", over}, {"allow", ok}} {
		t.Run(c.mode, func(t *testing.T) {
			in := start(t, ownConfig+"store: {on_error: "+c.mode+"}\n", nil, gateway.Deps{Store: failingStore{}})
			r := in.call(t, "api", desc("user", "u1"))
			if r.OverallCode != c.want || r.Statuses[0].Code != c.want {
				t.Fatalf("on_error %s with the store down = %v/%v, want %v", c.mode, r.OverallCode, r.Statuses[0].Code, c.want)
			}
			if r.Statuses[0].CurrentLimit != nil || header(r, "X-RateLimit-Remaining") != "" {
				t.Errorf("on_error %s reports a budget no store counted: %v", c.mode, r)
			}
			if c.mode == "deny" && header(r, "Retry-After") != "1" {
				t.Errorf("deny: Retry-After %q, want 1 as the gateway's 503", header(r, "Retry-After"))
			}
			_, m := in.adminDo(t, "GET", "/metrics", "")
			if want := `sluice_fallback_decisions_total{mode="` + c.mode + `",route="rls:api"} 1`; !strings.Contains(m, want) {
				t.Errorf("metrics lack %s", want)
			}
		})
	}
}

// TestLocalFallback: under on_error local, each instance decides with
// its own in-memory limiter while the store is down.
func TestLocalFallback(t *testing.T) {
	in := start(t, ownConfig+"store: {type: redis, redis: {addrs: [\"127.0.0.1:1\"]}, on_error: local, timeout: 20ms}\n", nil, gateway.Deps{})
	for i := range 5 {
		if r := in.call(t, "api", desc("user", "local")); r.OverallCode != ok {
			t.Fatalf("call %d with Redis down = %v, want OK from the local limiter", i+1, r.OverallCode)
		}
	}
	if r := in.call(t, "api", desc("user", "local")); r.OverallCode != over {
		t.Errorf("6th call on a capacity of 5 with Redis down = %v, want OVER_LIMIT", r.OverallCode)
	}
	_, m := in.adminDo(t, "GET", "/metrics", "")
	if !strings.Contains(m, `sluice_fallback_decisions_total{mode="local",route="rls:api"} 6`) {
		t.Errorf("metrics lack 6 local fallback decisions for rls:api")
	}
}
