package fallback

import (
	"context"
	"testing"
	"time"

	"github.com/sluice-gw/sluice/ratelimit"
)

func (f *fakeStore) Release(ctx context.Context, reqs []ratelimit.Request) error {
	if err := f.enter(ctx); err != nil {
		return err
	}
	defer f.leave()
	return f.inner.Release(ctx, reqs)
}

func (f *fakeStore) Renew(ctx context.Context, reqs []ratelimit.Request) (int, error) {
	if err := f.enter(ctx); err != nil {
		return 0, err
	}
	defer f.leave()
	return f.inner.Renew(ctx, reqs)
}

// TestLeasesThroughOutage checks on_error local for concurrency limits:
// while the primary is down the Local store keeps this instance's in-flight
// count (the leases the primary granted included), and a release the
// primary missed reaches it once it is back, freeing that lease only.
func TestLeasesThroughOutage(t *testing.T) {
	primary := newFake(t, nil)
	s, err := New(Options{Primary: primary, Local: newMemory(t, nil), ConsecutiveFailures: 1})
	if err != nil {
		t.Fatal(err)
	}
	p := ratelimit.MustPolicy(ratelimit.PolicyConfig{Name: "cc", Algorithm: ratelimit.Concurrency, Limit: 2, LeaseTTL: time.Minute})
	lease := func(id string) []ratelimit.Request {
		return []ratelimit.Request{{Key: "k", Policy: p, Lease: id}}
	}
	ctx := context.Background()
	take := func(id string) bool {
		t.Helper()
		ok, err := s.Evaluate(ctx, lease(id), make([]ratelimit.Decision, 1))
		if err != nil {
			t.Fatalf("Evaluate(%s): %v", id, err)
		}
		return ok
	}
	primaryRemaining := func() int64 {
		out := make([]ratelimit.Decision, 1)
		if err := primary.inner.Peek(ctx, lease("probe"), out); err != nil {
			t.Fatal(err)
		}
		return out[0].Remaining
	}
	if !take("a") || !take("b") {
		t.Fatal("the first two leases were denied with the primary up")
	}
	if take("c") {
		t.Fatal("a third lease was admitted with the primary up")
	}
	primary.set(failing)
	if take("c") {
		t.Error("primary down: a third lease was admitted; the Local store must count the two in flight")
	}
	if err := s.Release(ctx, lease("a")); err != nil {
		t.Fatalf("Release(a) with the primary down: %v", err)
	}
	if !take("c") {
		t.Error("primary down: lease c denied after a's release; the Local store must free a's slot")
	}
	if got := primaryRemaining(); got != 0 {
		t.Fatalf("primary: remaining %d while it was unreachable, want 0", got)
	}
	primary.set(up)
	// The release of a is retried in the background; it frees a, and b
	// stays held.
	deadline := time.Now().Add(20 * time.Second)
	for primaryRemaining() != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("primary: remaining %d 20s after it came back, want 1 (a's release retried)", primaryRemaining())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := s.Release(ctx, lease("a")); err != nil {
		t.Fatal(err)
	}
	if got := primaryRemaining(); got != 1 {
		t.Errorf("primary: remaining %d after releasing a again, want 1 (b is still held)", got)
	}
}

// TestLeaseOwingPrimaryDenies: after an outage a key the Local store
// admitted is decided on the Local store first, then on the primary; when
// the primary then denies, the lease the Local store took is given back,
// so the local in-flight count holds only requests that run.
func TestLeaseOwingPrimaryDenies(t *testing.T) {
	primary := newFake(t, nil)
	local := newMemory(t, nil)
	s, err := New(Options{Primary: primary, Local: local, ConsecutiveFailures: 1, OpenTimeout: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	p := ratelimit.MustPolicy(ratelimit.PolicyConfig{Name: "cc", Algorithm: ratelimit.Concurrency, Limit: 1, LeaseTTL: time.Minute})
	lease := func(id string) []ratelimit.Request { return []ratelimit.Request{{Key: "k", Policy: p, Lease: id}} }
	ctx := context.Background()
	out := make([]ratelimit.Decision, 1)
	// Another instance holds the key's only slot on the primary.
	if ok, err := primary.inner.Evaluate(ctx, lease("x"), out); err != nil || !ok {
		t.Fatalf("primary: lease x = %v, %v", ok, err)
	}
	primary.set(failing)
	if ok, err := s.Evaluate(ctx, lease("a"), out); err != nil || !ok {
		t.Fatalf("primary down: lease a = %v, %v; want admitted by the Local store", ok, err)
	}
	if err := s.Release(ctx, lease("a")); err != nil {
		t.Fatal(err)
	}
	primary.set(up)
	deadline := time.Now().Add(10 * time.Second)
	for {
		active := s.Active()
		ok, err := s.Evaluate(ctx, lease("b"), out)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case ok && active:
			// Decided by the Local store, the breaker still open.
			if err := s.Release(ctx, lease("b")); err != nil {
				t.Fatal(err)
			}
		case ok:
			t.Fatal("lease b admitted while x holds the primary's only slot")
		}
		if !ok && !s.Active() {
			break // denied with the breaker closed: by the primary
		}
		if time.Now().After(deadline) {
			t.Fatal("the breaker did not close within 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := local.Peek(ctx, lease("probe"), out); err != nil || out[0].Remaining != 1 {
		t.Errorf("Local store after the primary denied b: remaining %d (%v), want 1 (b's local lease released)", out[0].Remaining, err)
	}
}

// TestLeasesGatedByLocal: when the primary loses the leases of
// requests still in flight (it restarted empty, or they expired while it
// was away), this instance still admits no more than the limit: the Local
// store, which holds every lease the instance holds, is asked first. A
// renewal adds the lost leases back to the primary.
func TestLeasesGatedByLocal(t *testing.T) {
	primary := newFake(t, nil)
	var renewFailures int
	s, err := New(Options{Primary: primary, Local: newMemory(t, nil), OnRenewFailure: func(error) { renewFailures++ }})
	if err != nil {
		t.Fatal(err)
	}
	p := ratelimit.MustPolicy(ratelimit.PolicyConfig{Name: "cc", Algorithm: ratelimit.Concurrency, Limit: 2, LeaseTTL: time.Minute})
	lease := func(id string) []ratelimit.Request { return []ratelimit.Request{{Key: "k", Policy: p, Lease: id}} }
	ctx := context.Background()
	take := func(id string) bool {
		t.Helper()
		ok, err := s.Evaluate(ctx, lease(id), make([]ratelimit.Decision, 1))
		if err != nil {
			t.Fatalf("Evaluate(%s): %v", id, err)
		}
		return ok
	}
	if !take("a") || !take("b") {
		t.Fatal("the first two leases were denied")
	}
	if err := primary.inner.Reset(ctx, lease("a")); err != nil { // the primary loses both
		t.Fatal(err)
	}
	if take("c") {
		t.Fatal("lease c admitted while a and b are in flight (limit 2), the primary having lost them")
	}
	held := append(lease("a"), lease("b")...)
	if n, err := s.Renew(ctx, held); err != nil || n != 2 {
		t.Fatalf("Renew(a, b) = %d, %v; want 2 added back to the primary", n, err)
	}
	out := make([]ratelimit.Decision, 1)
	if err := primary.inner.Peek(ctx, lease("probe"), out); err != nil || out[0].Remaining != 0 {
		t.Errorf("primary after the renewal: remaining %d (%v), want 0 (a and b back)", out[0].Remaining, err)
	}
	primary.set(failing)
	if n, err := s.Renew(ctx, held); err != nil || n != 0 || renewFailures != 1 {
		t.Errorf("Renew with the primary down = %d, %v, %d failures reported; want 0, nil (the Local store holds them), 1", n, err, renewFailures)
	}
	primary.set(up)
	if err := s.Release(ctx, lease("a")); err != nil {
		t.Fatal(err)
	}
	if !take("c") {
		t.Error("lease c denied after a's release")
	}
}
