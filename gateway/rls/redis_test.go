package rls_test

import (
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sluice-gw/sluice/gateway"
	"github.com/sluice-gw/sluice/internal/redistest"
)

// TestThreeInstancesOneRedis: N concurrent calls spread over three sluice
// instances sharing one Redis admit exactly the limit L.
func TestThreeInstancesOneRedis(t *testing.T) {
	redistest.Require(t)
	rs := redistest.NewServer(t, redistest.ServerOptions{})
	const limit, calls = 20, 90
	yaml := `
rls:
  listen: "127.0.0.1:0"
  domains:
    - domain: api
      descriptors:
        - key: tenant
          rate_limit: {unit: hour, requests_per_unit: 20}
store: {type: redis, prefix: rlsexact, timeout: 2s, on_error: deny, redis: {addrs: ["` + rs.Addr() + `"]}}
`
	var ins []*instance
	for range 3 {
		ins = append(ins, start(t, yaml, nil, gateway.Deps{}))
	}
	var admitted, denied atomic.Int64
	var wg sync.WaitGroup
	for i := range calls {
		wg.Go(func() {
			r, err := ins[i%3].ask("api", 0, desc("tenant", "t1"))
			switch {
			case err != nil:
				t.Errorf("call %d: %v", i, err)
			case r.OverallCode == ok:
				admitted.Add(1)
			default:
				denied.Add(1)
			}
		})
	}
	wg.Wait()
	if admitted.Load() != limit || denied.Load() != calls-limit {
		t.Errorf("%d concurrent calls over 3 instances: %d admitted, %d denied; want exactly %d admitted", calls, admitted.Load(), denied.Load(), limit)
	}
}

// TestCompatPolicyOwnKeys: a descriptor naming a compat scg policy is
// decided in sluice's own keys, under the store's prefix, as
// docs/migrating-from-scg.md says; a Redis user limited to that prefix
// (docs/operations.md) may use them.
func TestCompatPolicyOwnKeys(t *testing.T) {
	redistest.Require(t)
	rs := redistest.NewServer(t, redistest.ServerOptions{})
	yaml := `
rls:
  listen: "127.0.0.1:0"
  domains:
    - domain: api
      descriptors:
        - {key: tenant, policy: scg}
policies:
  scg: {algorithm: token_bucket, capacity: 2, rate: 1, compat: scg}
store: {type: redis, prefix: rlscompat, timeout: 2s, on_error: deny, redis: {addrs: ["` + rs.Addr() + `"]}}
`
	in := start(t, yaml, nil, gateway.Deps{})
	for i, want := range []bool{true, true, false} {
		r, err := in.ask("api", 0, desc("tenant", "t1"))
		if err != nil {
			t.Fatal(err)
		}
		if got := r.OverallCode == ok; got != want {
			t.Errorf("call %d: admitted %v, want %v", i, got, want)
		}
	}
	keys, err := rs.Do("KEYS", "*")
	if err != nil {
		t.Fatal(err)
	}
	list, _ := keys.([]any)
	if len(list) == 0 {
		t.Fatal("no keys written")
	}
	for _, k := range list {
		if s, _ := k.(string); !strings.HasPrefix(s, "rlscompat:") {
			t.Errorf("key %q outside the store's prefix", s)
		}
	}
}
