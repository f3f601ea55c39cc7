package redis

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/sluice-gw/sluice/internal/testdiff"
	"github.com/sluice-gw/sluice/ratelimit"
	"github.com/sluice-gw/sluice/ratelimit/kit"
)

// keyInOtherSlot returns a key whose tag hashes to a slot other than key's.
func keyInOtherSlot(key string) string {
	for i := 0; ; i++ {
		k := fmt.Sprintf("%s-other-%d", key, i)
		if slot(tag(k)) != slot(tag(key)) {
			return k
		}
	}
}

// rawState returns DUMP of every key of r, to compare byte for byte, and
// each key's PTTL in ms.
func rawState(t *testing.T, c rueidis.Client, s *Store, r ratelimit.Request) (dumps []string, ttls []int64) {
	t.Helper()
	for _, k := range appendKeys(nil, s.prefix, tag(r.Key), specOf(r.Policy)) {
		dump, err := c.Do(context.Background(), c.B().Dump().Key(k).Build()).ToString()
		if rueidis.IsRedisNil(err) {
			dump, err = "(none)", nil
		}
		if err != nil {
			t.Fatal(err)
		}
		ttl, err := c.Do(context.Background(), c.B().Pttl().Key(k).Build()).AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		dumps = append(dumps, fmt.Sprintf("%s %q", k, dump))
		ttls = append(ttls, ttl)
	}
	return dumps, ttls
}

// sameState fails the test unless r's keys hold what before held, with a
// TTL that has not been extended.
func sameState(t *testing.T, c rueidis.Client, s *Store, r ratelimit.Request, before []string, ttls []int64) {
	t.Helper()
	after, ttlsAfter := rawState(t, c, s, r)
	if d := testdiff.Diff(before, after); d != "" {
		t.Errorf("%q: keys changed by a denied request (-before +after):\n%s", r.Key, d)
	}
	for i := range ttls {
		if ttlsAfter[i] > ttls[i] {
			t.Errorf("%q: key %d's PTTL grew from %dms to %dms across a denied request", r.Key, i, ttls[i], ttlsAfter[i])
		}
	}
}

// TestDeniedWritesNothing: on standalone, a request that one limit denies
// leaves every key of every limit byte for byte as it was (DUMP), TTL
// included, whether the denying limit is alone or another limit admits.
func TestDeniedWritesNothing(t *testing.T) {
	c := standaloneRedis(t)
	clock := kit.NewManualClock(time.Unix(1_764_000_000, 0))
	s := newTestStore(t, c, clock)
	for _, p := range policies(t) {
		t.Run(p.Name(), func(t *testing.T) {
			a := ratelimit.Request{Key: "a", Policy: p}
			deny := ratelimit.Request{Key: "deny", Policy: p, Cost: p.Max()}
			evaluate(t, s, deny)
			clock.Advance(10 * time.Millisecond)
			if ok, _ := evaluate(t, s, a); !ok {
				t.Fatal("setup: first request on a denied")
			}
			clock.Advance(20 * time.Millisecond)
			beforeA, ttlA := rawState(t, c, s, a)
			beforeDeny, ttlDeny := rawState(t, c, s, deny)
			ok, out := evaluate(t, s, a, deny)
			if ok || !out[0].Allowed || out[1].Allowed {
				t.Fatalf("Evaluate(a, deny) = %v %+v, want denied by the second limit only", ok, out)
			}
			if ok, _ := evaluate(t, s, deny); ok {
				t.Fatal("Evaluate(deny) admitted")
			}
			sameState(t, c, s, a, beforeA, ttlA)
			sameState(t, c, s, deny, beforeDeny, ttlDeny)
		})
	}
}

// TestClusterRefund: on Cluster, a request whose limits sit in two slots
// and that the second limit denies leaves the first limit as it was: Peek
// answers as for a store that never saw the request, now and later, and
// later requests get the Go step function's answers.
func TestClusterRefund(t *testing.T) {
	c := clusterRedis(t)
	clock := kit.NewManualClock(time.Unix(1_764_000_000, 123_457_000))
	s := newTestStore(t, c, clock)
	gate := ratelimit.MustPolicy(ratelimit.PolicyConfig{Name: "gate", Algorithm: ratelimit.FixedWindow, Limit: 1, Window: ratelimit.MaxWindow})
	for _, p := range policies(t) {
		t.Run(p.Name(), func(t *testing.T) {
			a := ratelimit.Request{Key: "a-" + p.Name(), Policy: p}
			g := ratelimit.Request{Key: keyInOtherSlot(a.Key), Policy: gate}
			var state kit.State
			step := func() {
				t.Helper()
				now := clock.Now().UnixMicro()
				next, want := stepCopy(p, state, now, 1)
				if want.Allowed {
					state = next
				}
				if _, got := evaluate(t, s, a); got[0] != want {
					t.Fatalf("Evaluate(a) = %+v, want %+v", got[0], want)
				}
			}
			check := func(when string) {
				t.Helper()
				want := kit.PeekAt(p, state, clock.Now().UnixMicro(), 1)
				if got := peek(t, s, a); got[0] != want {
					t.Errorf("%s: Peek(a) = %+v, want %+v", when, got[0], want)
				}
			}
			step()
			clock.Advance(100 * time.Millisecond)
			step()
			if ok, _ := evaluate(t, s, g); !ok {
				t.Fatal("setup: gate denied its first request")
			}
			clock.Advance(70 * time.Millisecond)
			check("before")
			want := kit.PeekAt(p, state, clock.Now().UnixMicro(), 1)
			ok, out := evaluate(t, s, a, g)
			if ok || out[1].Allowed {
				t.Fatalf("Evaluate(a, gate) = %v %+v, want denied by the gate", ok, out)
			}
			if out[0] != want {
				t.Errorf("Evaluate(a, gate): a's decision = %+v, want its unchanged view %+v", out[0], want)
			}
			check("right after the refund")
			for range 4 {
				clock.Advance(260 * time.Millisecond)
				check("later")
				step()
			}
		})
	}
}

// TestClusterAdmitsAcrossSlots: when every slot admits, every limit
// consumes.
func TestClusterAdmitsAcrossSlots(t *testing.T) {
	c := clusterRedis(t)
	clock := kit.NewManualClock(time.Unix(1_764_000_000, 0))
	s := newTestStore(t, c, clock)
	ps := policies(t)
	reqs := make([]ratelimit.Request, len(ps))
	slots := map[uint16]bool{}
	for i, p := range ps {
		reqs[i] = ratelimit.Request{Key: "k" + p.Name(), Policy: p}
		slots[slot(tag(reqs[i].Key))] = true
	}
	if len(slots) < 2 {
		t.Fatalf("setup: keys in %d slots, want several", len(slots))
	}
	ok, out := evaluate(t, s, reqs...)
	if !ok {
		t.Fatalf("Evaluate = denied, %+v", out)
	}
	after := peek(t, s, reqs...)
	for i := range reqs {
		if out[i].Remaining != reqs[i].Policy.Max()-1 || after[i].Remaining != out[i].Remaining {
			t.Errorf("%s: remaining %d, then Peek %d; want %d", ps[i].Name(), out[i].Remaining, after[i].Remaining, ps[i].Max()-1)
		}
	}
}

// TestClusterRefundAfterError: when one slot's script fails (here: its key
// holds a list), Evaluate returns the error and the limits another slot
// committed are refunded (in the background).
func TestClusterRefundAfterError(t *testing.T) {
	c := clusterRedis(t)
	clock := kit.NewManualClock(time.Unix(1_764_000_000, 0))
	s := newTestStore(t, c, clock)
	tb := ratelimit.MustPolicy(ratelimit.PolicyConfig{Algorithm: ratelimit.TokenBucket, Capacity: 5, Rate: 1})
	a := ratelimit.Request{Key: "a", Policy: tb}
	broken := ratelimit.Request{Key: keyInOtherSlot("a"), Policy: tb}
	bk := appendKeys(nil, s.prefix, tag(broken.Key), specOf(tb))[0]
	if err := c.Do(context.Background(), c.B().Rpush().Key(bk).Element("x").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	out := make([]ratelimit.Decision, 2)
	_, err := s.Evaluate(context.Background(), []ratelimit.Request{a, broken}, out)
	if err == nil {
		t.Fatal("Evaluate on a key holding a list: no error")
	}
	if k := ErrorKind(err); k != "script" {
		t.Errorf("ErrorKind(%v) = %q, want script", err, k)
	}
	// The refund runs in the background; Close waits for it.
	s.Close()
	s2 := newTestStore(t, c, clock)
	s2.prefix = s.prefix
	if got := peek(t, s2, a)[0]; got.Remaining != 5 {
		t.Errorf("after the failed request, a has %d remaining, want 5 (refunded)", got.Remaining)
	}
	if _, err := s.Evaluate(context.Background(), []ratelimit.Request{a}, out); !errors.Is(err, ErrClosed) {
		t.Errorf("Evaluate after Close = %v, want ErrClosed", err)
	}
}
