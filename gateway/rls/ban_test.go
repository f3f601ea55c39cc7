package rls_test

import (
	"testing"
	"time"

	"github.com/sluice-gw/sluice/gateway"
	"github.com/sluice-gw/sluice/ratelimit/kit"
)

// TestBan: requests_per_unit 0, envoyproxy/ratelimit's
// ban, puts every descriptor that reaches it over the limit until its
// window ends, denies the whole call (the other limits consume nothing),
// and never denies in shadow mode.
func TestBan(t *testing.T) {
	clock := kit.NewManualClock(time.Unix(15330*86400+18, 0))
	in := start(t, erlYAML, erlFiles, gateway.Deps{Clock: clock})

	r := in.call(t, "ban", desc("ip", "198.51.100.7"), desc("ip", "192.0.2.1"))
	if r.OverallCode != over {
		t.Fatalf("ban and per-ip = %v, want OVER_LIMIT", r.OverallCode)
	}
	b := r.Statuses[0]
	if b.Code != over || b.CurrentLimit == nil || b.CurrentLimit.RequestsPerUnit != 0 || b.LimitRemaining != 0 {
		t.Errorf("ban's status = %v, want OVER_LIMIT, 0 per MINUTE, 0 remaining", b)
	}
	if got := b.DurationUntilReset.AsDuration(); got != 42*time.Second {
		t.Errorf("ban's duration_until_reset 18s into the minute = %v, want 42s", got)
	}
	if got := header(r, "Retry-After"); got != "42" {
		t.Errorf("Retry-After = %q, want 42", got)
	}
	if s := r.Statuses[1]; s.Code != ok || s.LimitRemaining != 10 {
		t.Errorf("per-ip beside the ban = %v, want OK with 10 left (not consumed)", s)
	}
	if r := in.call(t, "ban", desc("ip", "192.0.2.1")); r.Statuses[0].LimitRemaining != 9 {
		t.Errorf("per-ip alone after = %d left, want 9", r.Statuses[0].LimitRemaining)
	}
	if r := in.call(t, "ban", hits(desc("ip", "198.51.100.7"), 0)); r.OverallCode != over {
		t.Errorf("a check (hits_addend 0) of the ban = %v, want OVER_LIMIT", r.OverallCode)
	}
	if r := in.call(t, "ban", desc("ip", "198.51.100.8")); r.OverallCode != ok || r.Statuses[0].Code != ok {
		t.Errorf("a ban in shadow mode = %v/%v, want OK", r.OverallCode, r.Statuses[0].Code)
	}
	if r := in.call(t, "ban", desc("ip", "203.0.113.66"), desc("pass", "vip")); r.OverallCode != ok || r.Statuses[0].CurrentLimit != nil {
		t.Errorf("a ban replaced by a pass = %v %v, want OK without a limit", r.OverallCode, r.Statuses[0])
	}
}
