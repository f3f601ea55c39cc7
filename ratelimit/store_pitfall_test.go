package ratelimit_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/sluice-gw/sluice/ratelimit"

	"github.com/sluice-gw/sluice/ratelimit/kit"
	"github.com/sluice-gw/sluice/store/memory"
)

// TestPitfall1_TimeFromStore checks docs/semantics.md §1.1: when each gateway instance
// decides with its own clock, instances whose clocks disagree refill one
// shared budget at different rates (a clock running ahead mints tokens).
// The Store API therefore takes no time at all; the store reads its own
// clock (Redis TIME in the Redis store, where store/redis tests the same).
func TestPitfall1_TimeFromStore(t *testing.T) {
	// No method of Store or Limiter accepts a time, a duration or a raw
	// integer that could carry one (a cost is inside Request, AllowN's n is
	// a cost).
	timeType, durType := reflect.TypeFor[time.Time](), reflect.TypeFor[time.Duration]()
	for _, typ := range []reflect.Type{reflect.TypeFor[ratelimit.Store](), reflect.TypeFor[ratelimit.LeaseStore](), reflect.TypeFor[*ratelimit.Limiter]()} {
		for i := range typ.NumMethod() {
			m := typ.Method(i)
			for j := range m.Type.NumIn() {
				in := m.Type.In(j)
				if in == timeType || in == durType || (in.Kind() == reflect.Int64 && m.Name != "AllowN") {
					t.Errorf("%v.%s takes a %v: callers must not pass the time", typ, m.Name, in)
				}
			}
		}
	}
	for _, f := range []string{"Key", "Policy", "Cost", "Shadow", "Lease"} {
		if _, ok := reflect.TypeFor[ratelimit.Request]().FieldByName(f); !ok {
			t.Fatalf("Request has no field %s", f)
		}
	}
	if n := reflect.TypeFor[ratelimit.Request]().NumField(); n != 5 {
		t.Errorf("Request has %d fields, want Key, Policy, Cost, Shadow, Lease only (no time)", n)
	}

	// Two gateways share one store. Gateway A's clock runs an hour ahead of
	// the store's, gateway B's an hour behind; neither can pass it, and the
	// store decides both on its own clock.
	storeClock := kit.NewManualClock(time.Unix(1_764_000_000, 0))
	store, err := memory.New(memory.Options{Clock: storeClock})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	p := ratelimit.MustPolicy(ratelimit.PolicyConfig{Name: "per-user", Algorithm: ratelimit.TokenBucket, Capacity: 2, Rate: 1})
	gatewayA, _ := ratelimit.NewLimiter(p, store)
	gatewayB, _ := ratelimit.NewLimiter(p, store)
	ctx := context.Background()
	allow := func(l *ratelimit.Limiter) ratelimit.Decision {
		t.Helper()
		d, err := l.Allow(ctx, "u1")
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	if a, b := allow(gatewayA), allow(gatewayB); !a.Allowed || !b.Allowed || b.Remaining != 0 {
		t.Fatalf("first two requests (one per gateway) = %+v, %+v; want both allowed, one budget", a, b)
	}
	// Gateway A believes an hour has passed; the store does not.
	if d := allow(gatewayA); d.Allowed || d.RetryAfter != time.Second {
		t.Errorf("gateway A, store clock unmoved = %+v; want denied, retry-after 1s by the store's clock", d)
	}
	storeClock.Advance(time.Second)
	if a, b := allow(gatewayA), allow(gatewayB); !a.Allowed || b.Allowed {
		t.Errorf("1s later by the store's clock: A %+v, B %+v; want exactly one more admitted", a, b)
	}
}
