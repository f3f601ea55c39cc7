package httplimit

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluice-gw/sluice/ratelimit"
	"github.com/sluice-gw/sluice/store/memory"
)

// TestHandlerHoldsLease: through the net/http adapter, a request admitted
// on a concurrency limit holds its slot while the next handler runs, and
// gives it back when the handler returns, also when it panics. A denied
// request is answered 429 with Retry-After and the IETF fields naming the
// policy.
func TestHandlerHoldsLease(t *testing.T) {
	store, err := memory.New(memory.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	p := ratelimit.MustPolicy(ratelimit.PolicyConfig{Name: "one", Algorithm: ratelimit.Concurrency, Limit: 1, LeaseTTL: time.Minute})
	m, err := New(Options{Route: "r", Store: store, Limits: []Limit{{Policy: p, Key: Key{{Source: SourceHeader, Name: "X-User"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	inside := make(chan struct{})
	leave := make(chan struct{})
	h := m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/panic" {
			panic(http.ErrAbortHandler)
		}
		if r.URL.Path == "/hold" {
			inside <- struct{}{}
			<-leave
		}
	}))
	send := func(path string) *httptest.ResponseRecorder {
		req := httptest.NewRequest("GET", path, nil)
		req.Header.Set("X-User", "u")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	done := make(chan int)
	go func() { done <- send("/hold").Code }()
	<-inside
	rec := send("/other")
	if rec.Code != http.StatusTooManyRequests {
		t.Fatalf("request while another holds the slot = %d, want 429", rec.Code)
	}
	if got := rec.Header().Get("Retry-After"); got != "1" {
		t.Errorf("Retry-After = %q, want 1", got)
	}
	if got := rec.Header().Get(HeaderRateLimitPolicy); !strings.Contains(got, `"one";q=1;w=60`) {
		t.Errorf("RateLimit-Policy = %q, want the policy one with q=1, w=60", got)
	}
	close(leave)
	if c := <-done; c != http.StatusOK {
		t.Fatalf("held request = %d, want 200", c)
	}
	if c := send("/other").Code; c != http.StatusOK {
		t.Fatalf("request after the holder returned = %d, want 200: the slot was not given back", c)
	}
	func() {
		defer func() {
			if r := recover(); !errors.Is(r.(error), http.ErrAbortHandler) {
				t.Errorf("recovered %v, want the handler's panic", r)
			}
		}()
		send("/panic")
	}()
	if c := send("/other").Code; c != http.StatusOK {
		t.Errorf("request after a panicking handler = %d, want 200: the slot was not given back", c)
	}
}

// TestConcurrencyNeedsLeaseStore: a concurrency limit on a store that
// cannot hold leases is refused when the middleware is built.
func TestConcurrencyNeedsLeaseStore(t *testing.T) {
	p := ratelimit.MustPolicy(ratelimit.PolicyConfig{Name: "one", Algorithm: ratelimit.Concurrency, Limit: 1})
	_, err := New(Options{Store: rateOnly{}, Limits: []Limit{{Policy: p, Key: Key{{Source: SourceIP}}}}})
	if err == nil || !strings.Contains(err.Error(), "LeaseStore") {
		t.Errorf("New with a concurrency limit on a rate-only store = %v, want an error naming LeaseStore", err)
	}
	_, err = New(Options{Store: rateOnly{}, Limits: []Limit{{Policy: p, Key: Key{{Source: SourceIP}}, Cost: 2}}})
	if err == nil || !strings.Contains(err.Error(), "cost 2 on concurrency policy") {
		t.Errorf("New with cost 2 on a concurrency limit = %v, want a cost error", err)
	}
}

// rateOnly is a Store that is not a LeaseStore.
type rateOnly struct{ ratelimit.Store }

// countingStore is a LeaseStore that counts renewals and releases, and
// the leases each renewal carried. A renewal waits while gate (if set)
// is open, and events records renewal ends and releases in order.
type countingStore struct {
	rateOnly
	mu                sync.Mutex
	renewed, released int
	perRenewal        []int
	gate              chan struct{}
	events            []string
}

func (s *countingStore) Renew(_ context.Context, reqs []ratelimit.Request) (int, error) {
	if s.gate != nil {
		<-s.gate
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.renewed++
	s.perRenewal = append(s.perRenewal, len(reqs))
	s.events = append(s.events, "renewed")
	return 0, nil
}

func (s *countingStore) Release(_ context.Context, reqs []ratelimit.Request) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.released++
	for _, r := range reqs {
		s.events = append(s.events, "released "+r.Lease)
	}
	return nil
}

func (s *countingStore) counts() (renewed, released int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.renewed, s.released
}

// TestLeaseRenewalOneCallPerStore: the leases of a thousand
// requests held on one store are renewed in one Renew call per tick, not
// one call each.
func TestLeaseRenewalOneCallPerStore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := ratelimit.MustPolicy(ratelimit.PolicyConfig{Name: "cc", Algorithm: ratelimit.Concurrency, Limit: 5000, LeaseTTL: 3 * time.Second})
		store := &countingStore{}
		const n = 1000
		held := make([]*Lease, n)
		for i := range held {
			held[i] = HoldLeases(store, []ratelimit.Request{{Key: "k", Policy: p, Lease: strconv.Itoa(i)}})
		}
		time.Sleep(2500 * time.Millisecond)
		synctest.Wait()
		store.mu.Lock()
		got := slices.Clone(store.perRenewal)
		store.mu.Unlock()
		if want := []int{n, n}; !slices.Equal(got, want) {
			if len(got) > 10 {
				t.Errorf("%d Renew calls over two 1s ticks, want 2 (one per tick, %d leases each)", len(got), n)
			} else {
				t.Errorf("leases per Renew call over two 1s ticks = %v, want %v", got, want)
			}
		}
		for _, l := range held {
			l.Release()
		}
		time.Sleep(2 * time.Second) // the renewer ends at its next tick
	})
}

// TestLeaseReleaseAfterRenewal: a renewal adds back a lease the
// store lost, so a Release that comes while the lease's renewal is in
// flight must reach the store after that renewal, or the renewal would
// bring the released lease back for a whole TTL.
func TestLeaseReleaseAfterRenewal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := ratelimit.MustPolicy(ratelimit.PolicyConfig{Name: "cc", Algorithm: ratelimit.Concurrency, Limit: 5, LeaseTTL: 3 * time.Second})
		store := &countingStore{gate: make(chan struct{})}
		l := HoldLeases(store, []ratelimit.Request{{Key: "k", Policy: p, Lease: "a"}})
		time.Sleep(1500 * time.Millisecond) // the renewal at 1s waits on the gate
		synctest.Wait()
		if err := l.Release(); err != nil {
			t.Fatalf("Release during a renewal: %v", err)
		}
		close(store.gate)
		time.Sleep(2 * time.Second)
		synctest.Wait()
		store.mu.Lock()
		got := slices.Clone(store.events)
		store.mu.Unlock()
		if want := []string{"renewed", "released a"}; !slices.Equal(got, want) {
			t.Errorf("store calls = %q, want %q: the release must follow the renewal in flight", got, want)
		}
	})
}

// TestLeaseRenewal: a held lease is renewed every third of its TTL until
// it is released, released once however often Release is called, and the
// renewal goroutine ends once nothing is held (the bubble would not end
// otherwise).
func TestLeaseRenewal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := ratelimit.MustPolicy(ratelimit.PolicyConfig{Name: "cc", Algorithm: ratelimit.Concurrency, Limit: 1, LeaseTTL: 3 * time.Second})
		store := &countingStore{}
		l := HoldLeases(store, []ratelimit.Request{{Key: "k", Policy: p, Lease: "a"}})
		time.Sleep(3500 * time.Millisecond)
		synctest.Wait()
		if renewed, _ := store.counts(); renewed != 3 {
			t.Errorf("renewals in 3.5s with a 3s TTL = %d, want 3 (every 1s)", renewed)
		}
		l.Release()
		l.Release()
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if renewed, released := store.counts(); renewed != 3 || released != 1 {
			t.Errorf("after Release: %d renewals, %d releases; want 3 and 1", renewed, released)
		}
	})
}

// TestLeaseRenewedDuringShapeHold: a request held by a shape-mode limit
// keeps its concurrency slot for the whole hold, even one longer than the
// lease TTL.
func TestLeaseRenewedDuringShapeHold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store, err := memory.New(memory.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer store.Close()
		shape := ratelimit.MustPolicy(ratelimit.PolicyConfig{Name: "even", Algorithm: ratelimit.LeakyBucket, Capacity: 10, Rate: 1, Mode: ratelimit.Shape})
		one := ratelimit.MustPolicy(ratelimit.PolicyConfig{Name: "one", Algorithm: ratelimit.Concurrency, Limit: 1, LeaseTTL: 300 * time.Millisecond})
		key := Key{{Source: SourceConst, Name: "all"}}
		m, err := New(Options{Route: "r", Store: store, Limits: []Limit{{ID: "s", Policy: shape, Key: key}, {ID: "c", Policy: one, Key: key}}})
		if err != nil {
			t.Fatal(err)
		}
		decide := func() *Result {
			res := new(Result)
			m.Decide(HTTPRequest(httptest.NewRequest("GET", "/", nil)), res)
			return res
		}
		first := decide() // takes the bucket's first unit, no wait
		if !first.Forward {
			t.Fatalf("first request: status %d", first.Status)
		}
		m.Hold(first).Release()
		done := make(chan *Result)
		go func() { done <- decide() }() // waits about 1s for its turn
		time.Sleep(500 * time.Millisecond)
		if res := decide(); res.Forward || res.Status != http.StatusTooManyRequests {
			t.Errorf("request during another's 1s shape hold (lease TTL 300ms): forward %v, status %d; want 429 for the slot", res.Forward, res.Status)
		}
		res := <-done
		if !res.Forward {
			t.Fatalf("held request: status %d, want forwarded", res.Status)
		}
		m.Hold(res).Release()
		time.Sleep(time.Second) // the renewer ends at its next tick
	})
}
