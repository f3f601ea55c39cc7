package redis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/sluice-gw/sluice/internal/redistest"
	"github.com/sluice-gw/sluice/internal/testdiff"
	"github.com/sluice-gw/sluice/ratelimit"
	"github.com/sluice-gw/sluice/ratelimit/kit"
	"github.com/sluice-gw/sluice/ratelimit/ratelimittest"
)

// setBatching sets s's batching before its first Evaluate: at most slots
// script calls in flight (0: batching off), and with always every request
// goes through a batch (mode 'b'), even when a slot is free.
func setBatching(s *Store, slots int, always bool) {
	b := s.batcher()
	b.mu.Lock()
	b.slots, b.always = slots, always
	b.mu.Unlock()
}

// batchResult is one request's outcome in runBatch.
type batchResult struct {
	ok  bool
	out []ratelimit.Decision
	err error
}

// runBatch decides the requests as one batch, in this order, through the
// store's own batch path (one script call in mode 'b'), at the store's now.
func runBatch(t *testing.T, s *Store, reqs [][]ratelimit.Request) []batchResult {
	t.Helper()
	c, err := s.client(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	now := s.now()
	bt := &batch{now: now, done: make(chan struct{})}
	bt.ctx, bt.cancel = context.WithTimeout(context.Background(), s.timeout)
	ms := make([]*member, len(reqs))
	for i, r := range reqs {
		if err := kit.CheckRequests(r, make([]ratelimit.Decision, len(r))); err != nil {
			t.Fatal(err)
		}
		ms[i] = &member{ctx: context.Background(), cl: s.newCall(modeEvaluate, now, r, nil), n: len(r)}
		bt.members = append(bt.members, ms[i])
		bt.limits += ms[i].n
	}
	s.send(c, bt)
	<-bt.done
	res := make([]batchResult, len(reqs))
	for i, m := range ms {
		switch {
		case !m.sent:
			res[i].err = errors.New("left out of the batch")
		case m.err != nil:
			res[i].err = m.err
		default:
			res[i].ok = m.overall
			res[i].out = make([]ratelimit.Decision, len(reqs[i]))
			for j := range reqs[i] {
				res[i].out[j] = m.reps[j].decision(reqs[i][j].Policy)
			}
		}
	}
	return res
}

// TestBatchConformance runs the ratelimittest suite on standalone Redis
// with every request sent in a batch (mode 'b', one script call in flight),
// so sequential requests are batches of one and concurrent ones share
// batches.
func TestBatchConformance(t *testing.T) {
	c := standaloneRedis(t)
	ratelimittest.Run(t, func(t *testing.T, clock ratelimit.Clock) ratelimit.Store {
		s := newTestStore(t, c, clock)
		setBatching(s, 1, true)
		return s
	})
}

// TestBatchConcurrentExact: TestConcurrentExact with one script call in
// flight per store, so that concurrent requests are batched: 4 clients × 64
// goroutines on one key admit exactly the capacity, for every algorithm,
// and each admission sees its own remaining. And batches did form.
func TestBatchConcurrentExact(t *testing.T) {
	srv := redistest.NewServer(t, redistest.ServerOptions{})
	prefix := testPrefix()
	stores := make([]*Store, concClients)
	for i := range stores {
		stores[i] = mustNew(t, Options{Addrs: []string{srv.Addr()}, Prefix: prefix, Timeout: 10 * time.Second})
		setBatching(stores[i], 1, false)
	}
	calls := scriptCalls(t, srv)
	decisions := 0
	for _, p := range noRefillPolicies(concCapacity) {
		t.Run(p.Name(), func(t *testing.T) {
			decisions += hammerOneKey(t, stores, p, "hot-"+p.Name())
		})
	}
	n := scriptCalls(t, srv) - calls
	t.Logf("%d decisions in %d script calls", decisions, n)
	if n*2 > decisions {
		t.Errorf("%d decisions took %d script calls, want at most half as many: batches did not form", decisions, n)
	}
}

// TestBatchesForm: with the default number of calls in flight, many
// concurrent callers share script calls (INFO commandstats counts fewer
// script runs than decisions), every decision is right (distinct keys, all
// admitted with the remaining a lone request sees), and a lone caller is
// never batched: sequential calls are one script call each, in mode 'e'.
func TestBatchesForm(t *testing.T) {
	const goroutines, perG = 128, 10
	srv := redistest.NewServer(t, redistest.ServerOptions{})
	s := mustNew(t, Options{Addrs: []string{srv.Addr()}})
	p := ratelimit.MustPolicy(ratelimit.PolicyConfig{Algorithm: ratelimit.TokenBucket, Capacity: 5, Rate: ratelimit.MinRate})
	evaluate(t, s, ratelimit.Request{Key: "warm-up", Policy: p})

	before := scriptCalls(t, srv)
	for i := range 20 {
		if ok, out := evaluate(t, s, ratelimit.Request{Key: fmt.Sprint("lone-", i), Policy: p}); !ok || out[0].Remaining != 4 {
			t.Fatalf("lone request %d: %v %+v", i, ok, out)
		}
	}
	if n := scriptCalls(t, srv) - before; n != 20 {
		t.Errorf("20 sequential requests: %d script calls, want 20", n)
	}

	before = scriptCalls(t, srv)
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for g := range goroutines {
		wg.Go(func() {
			out := make([]ratelimit.Decision, 1)
			for i := range perG {
				req := []ratelimit.Request{{Key: fmt.Sprint("k-", g, "-", i), Policy: p, Cost: 2}}
				ok, err := s.Evaluate(context.Background(), req, out)
				if err == nil && (!ok || out[0].Remaining != 3) {
					err = fmt.Errorf("fresh key decided %v %+v, want admitted with 3 remaining", ok, out[0])
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	n := scriptCalls(t, srv) - before
	t.Logf("%d concurrent decisions in %d script calls", goroutines*perG, n)
	if n*2 > goroutines*perG {
		t.Errorf("%d concurrent decisions took %d script calls, want at most half as many", goroutines*perG, n)
	}
}

// randomRequest returns a request of 1–3 limits on keys from a small pool
// (so that requests of one batch share keys, and limits of one request do),
// with costs 1–3 and the odd shadow limit.
func randomRequest(rng *rand.Rand, ps []*ratelimit.Policy) []ratelimit.Request {
	r := make([]ratelimit.Request, 1+rng.IntN(3))
	for i := range r {
		r[i] = ratelimit.Request{
			Key:    fmt.Sprint("k", rng.IntN(4)),
			Policy: ps[rng.IntN(len(ps))],
			Cost:   1 + rng.Int64N(3),
			Shadow: rng.IntN(8) == 0,
		}
	}
	return r
}

// TestBatchMatchesUnbatched: random batches of requests (several limits,
// every algorithm, shared keys, shadow limits) decided in one script call
// give exactly the decisions of the same requests decided one by one in
// calls of their own at the same explicit time, and leave the same state
// (Peek of every key and policy at the end).
func TestBatchMatchesUnbatched(t *testing.T) {
	c := standaloneRedis(t)
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 3))
	clock := kit.NewManualClock(time.Unix(1_764_000_000, 0))
	alone := newTestStore(t, c, clock)
	setBatching(alone, 0, false)
	batched := newTestStore(t, c, clock)
	ps := policies(t)
	for round := range 60 {
		reqs := make([][]ratelimit.Request, 1+rng.IntN(16))
		for i := range reqs {
			reqs[i] = randomRequest(rng, ps)
		}
		want := make([]batchResult, len(reqs))
		for i, r := range reqs {
			out := make([]ratelimit.Decision, len(r))
			ok, err := alone.Evaluate(context.Background(), r, out)
			if err != nil {
				t.Fatal(err)
			}
			want[i] = batchResult{ok: ok, out: out}
		}
		got := runBatch(t, batched, reqs)
		for i := range reqs {
			if got[i].err != nil {
				t.Fatalf("round %d, request %d: %v (seed %d)", round, i, got[i].err, seed)
			}
			if got[i].ok != want[i].ok || !testdiff.Equal(got[i].out, want[i].out) {
				t.Fatalf("round %d, request %d of %d %v (seed %d):\nbatched %v %+v\nalone   %v %+v",
					round, i, len(reqs), reqs[i], seed, got[i].ok, got[i].out, want[i].ok, want[i].out)
			}
		}
		clock.Advance(time.Duration(rng.Int64N(int64(1500 * time.Millisecond))))
	}
	for k := range 4 {
		for _, p := range ps {
			r := ratelimit.Request{Key: fmt.Sprint("k", k), Policy: p}
			if d := testdiff.Diff(peek(t, alone, r), peek(t, batched, r)); d != "" {
				t.Errorf("%s on %s: state differs at the end (-alone +batched):\n%s", p.Name(), r.Key, d)
			}
		}
	}
}

// TestBatchOneCall: a batch is one script call, however many requests and
// limits it holds: a request is never split across calls.
func TestBatchOneCall(t *testing.T) {
	srv := redistest.NewServer(t, redistest.ServerOptions{})
	clock := kit.NewManualClock(time.Unix(1_764_000_000, 0))
	s := mustNew(t, Options{Addrs: []string{srv.Addr()}, Clock: clock})
	evaluate(t, s, ratelimit.Request{Key: "warm-up", Policy: tbPolicy})
	reqs := [][]ratelimit.Request{threeLimits("a", false), {{Key: "b", Policy: tbPolicy}}, threeLimits("c", false)}
	before := scriptCalls(t, srv)
	for i, r := range runBatch(t, s, reqs) {
		if r.err != nil || !r.ok {
			t.Fatalf("request %d: %v %v", i, r.ok, r.err)
		}
	}
	if n := scriptCalls(t, srv) - before; n != 1 {
		t.Errorf("a batch of 3 requests (7 limits): %d script calls, want 1", n)
	}
}

// TestBatchDeniedLeavesLimits: in a batch, a request that one of its
// limits denies leaves every one of its limits as it was (keys byte for
// byte, TTLs not extended), while the requests before and after it in the
// same batch commit. For each algorithm as the denying limit.
func TestBatchDeniedLeavesLimits(t *testing.T) {
	c := standaloneRedis(t)
	clock := kit.NewManualClock(time.Unix(1_764_000_000, 0))
	s := newTestStore(t, c, clock)
	sw := ratelimit.MustPolicy(ratelimit.PolicyConfig{Name: "other-sw", Algorithm: ratelimit.SlidingWindow, Limit: 10, Window: time.Minute})
	for _, p := range policies(t) {
		t.Run(p.Name(), func(t *testing.T) {
			a := ratelimit.Request{Key: "a-" + p.Name(), Policy: tbPolicy}
			b := ratelimit.Request{Key: "b-" + p.Name(), Policy: sw, Cost: 3}
			deny := ratelimit.Request{Key: "deny-" + p.Name(), Policy: p, Cost: p.Max()}
			before := ratelimit.Request{Key: "before-" + p.Name(), Policy: p}
			after := ratelimit.Request{Key: "after-" + p.Name(), Policy: sw}
			if ok, out := evaluate(t, s, a, b, deny); !ok {
				t.Fatalf("setup: %+v", out)
			}
			clock.Advance(20 * time.Millisecond)
			var dumps [3][]string
			var ttls [3][]int64
			for i, r := range []ratelimit.Request{a, b, deny} {
				dumps[i], ttls[i] = rawState(t, c, s, r)
			}
			full := peek(t, s, before, after)
			res := runBatch(t, s, [][]ratelimit.Request{{before}, {a, b, deny}, {after}})
			for i, r := range res {
				if r.err != nil {
					t.Fatalf("request %d: %v", i, r.err)
				}
			}
			if r := res[1]; r.ok || !r.out[0].Allowed || !r.out[1].Allowed || r.out[2].Allowed {
				t.Fatalf("multi-limit request = %v %+v, want denied by its last limit only", r.ok, r.out)
			}
			for i, r := range []ratelimit.Request{a, b, deny} {
				sameState(t, c, s, r, dumps[i], ttls[i])
			}
			for i, r := range []batchResult{res[0], res[2]} {
				if !r.ok || r.out[0].Remaining != full[i].Remaining-1 {
					t.Errorf("request %d of the batch: %v %+v, want admitted with %d remaining", 2*i, r.ok, r.out, full[i].Remaining-1)
				}
			}
			if got := peek(t, s, before, after); got[0].Remaining != full[0].Remaining-1 || got[1].Remaining != full[1].Remaining-1 {
				t.Errorf("Peek after the batch: %+v, want one unit consumed from %+v", got, full)
			}
		})
	}
}

// TestBatchErrors: an error raised while deciding one request of a batch
// (a key holding another program's value) fails that request alone, as a
// "script" error, and the others are decided and committed; an OOM answer
// fails each request with ErrUnavailable.
func TestBatchErrors(t *testing.T) {
	srv := redistest.NewServer(t, redistest.ServerOptions{})
	s := mustNew(t, Options{Addrs: []string{srv.Addr()}})
	bad := ratelimit.Request{Key: "bad", Policy: tbPolicy}
	key := appendKeys(nil, s.prefix, tag(bad.Key), specOf(tbPolicy))[0]
	if _, err := srv.Do("SET", key, "not a state"); err != nil {
		t.Fatal(err)
	}
	good1, good2 := ratelimit.Request{Key: "good1", Policy: tbPolicy}, ratelimit.Request{Key: "good2", Policy: tbPolicy}
	res := runBatch(t, s, [][]ratelimit.Request{{good1}, {bad}, {good2}})
	if err := res[1].err; ErrorKind(err) != "script" || errors.Is(err, ErrUnavailable) {
		t.Errorf("request on a foreign value: %v (kind %q), want a script error", err, ErrorKind(err))
	}
	for _, i := range []int{0, 2} {
		if r := res[i]; r.err != nil || !r.ok || r.out[0].Remaining != 9 {
			t.Errorf("request %d next to a failing one: %v %+v %v, want admitted with 9 remaining", i, r.ok, r.out, r.err)
		}
	}
	if got := peek(t, s, good1, good2); got[0].Remaining != 9 || got[1].Remaining != 9 {
		t.Errorf("Peek after the batch: %+v, want both committed (9 remaining)", got)
	}

	if _, err := srv.Do("CONFIG", "SET", "maxmemory", "1"); err != nil {
		t.Fatal(err)
	}
	good1.Key, good2.Key = "other1", "other2"
	for i, r := range runBatch(t, s, [][]ratelimit.Request{{good1}, {good2}}) {
		if !errors.Is(r.err, ErrUnavailable) || ErrorKind(r.err) != "other" {
			t.Errorf("request %d over maxmemory: %v (kind %q), want ErrUnavailable", i, r.err, ErrorKind(r.err))
		}
	}
}

// waitBatcher waits until cond holds for the store's batcher (read under
// its lock), or fails the test after 10 seconds.
func waitBatcher(t *testing.T, s *Store, what string, cond func(*batcher) bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b := s.batcher()
		b.mu.Lock()
		ok := cond(b)
		b.mu.Unlock()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited 10s for %s", what)
		}
		time.Sleep(time.Millisecond) // polling goroutines' progress, bounded
	}
}

// TestBatchTimeoutNoResend: while Redis is stopped, a call of its own and
// a batch of requests queued behind it (one call in flight) all return a
// "timeout" error within about the store's Timeout, and nothing is ever
// re-sent: once Redis runs again, at most those two script calls have run,
// each key was counted at most once, and the batch's requests all or none.
// docs/reliability.md rows B2, B13.
func TestBatchTimeoutNoResend(t *testing.T) {
	const batched = 16
	srv := redistest.NewServer(t, redistest.ServerOptions{})
	s := mustNew(t, Options{Addrs: []string{srv.Addr()}, Timeout: time.Second})
	setBatching(s, 1, false)
	s.batcher().maxWait = time.Hour // the batch waits for the slot (see TestBatchWaitBounded)
	p := ratelimit.MustPolicy(ratelimit.PolicyConfig{Algorithm: ratelimit.FixedWindow, Limit: 10, Window: ratelimit.MaxWindow})
	evaluate(t, s, ratelimit.Request{Key: "warm-up", Policy: p})
	before := scriptCalls(t, srv)
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	stopped := true
	defer func() {
		if stopped {
			srv.Cont()
		}
	}()
	type result struct {
		err     error
		elapsed time.Duration
	}
	results := make([]result, 1+batched)
	decide := func(i int) {
		start := time.Now()
		out := make([]ratelimit.Decision, 1)
		_, err := s.Evaluate(context.Background(), []ratelimit.Request{{Key: fmt.Sprint("k", i), Policy: p}}, out)
		results[i] = result{err, time.Since(start)}
	}
	var wg sync.WaitGroup
	wg.Go(func() { decide(0) }) // takes the one slot
	// The lone call must hold the slot before the others come, and they
	// must all be queued in one batch before its Timeout frees the slot.
	waitBatcher(t, s, "the lone call to take the slot", func(b *batcher) bool { return b.inflight == 1 })
	for i := 1; i <= batched; i++ {
		wg.Go(func() { decide(i) })
	}
	waitBatcher(t, s, "the batch to hold every request", func(b *batcher) bool {
		return len(b.queue) == 1 && len(b.queue[0].members) == batched
	})
	wg.Wait()
	if err := srv.Cont(); err != nil {
		t.Fatal(err)
	}
	stopped = false
	for i, r := range results {
		if ErrorKind(r.err) != "timeout" || !errors.Is(r.err, context.DeadlineExceeded) {
			t.Errorf("request %d on a stopped server: %v (kind %q), want a timeout", i, r.err, ErrorKind(r.err))
		}
		if r.elapsed > 3*time.Second {
			t.Errorf("request %d took %v, want about the 1s timeout", i, r.elapsed)
		}
	}
	// Let Redis run what it received, then count.
	time.Sleep(200 * time.Millisecond)
	runs := scriptCalls(t, srv) - before
	if runs > 2 {
		t.Fatalf("%d script calls ran after the stop, want at most 2 (the lone call and the batch): something was re-sent", runs)
	}
	rem := make([]int64, len(results))
	for i := range results {
		rem[i] = peek(t, s, ratelimit.Request{Key: fmt.Sprint("k", i), Policy: p})[0].Remaining
		if rem[i] != 10 && rem[i] != 9 {
			t.Errorf("key %d: remaining %d, want 10 or 9 (counted at most once)", i, rem[i])
		}
		if i > 1 && rem[i] != rem[1] {
			t.Errorf("batched key %d: remaining %d, key 1 %d: want all or none of the batch counted", i, rem[i], rem[1])
		}
	}
	t.Logf("script calls run after the stop: %d; remaining: lone call %d, batch %d", runs, rem[0], rem[1])
}

// TestBatchWaitBounded: a batch waits for a free slot at most maxWait, then
// goes in a call of its own, so a slow call in flight (here: slots that
// never come free) adds at most maxWait to the requests queued behind it
// instead of a round trip or their whole Timeout.
func TestBatchWaitBounded(t *testing.T) {
	srv := redistest.NewServer(t, redistest.ServerOptions{})
	s := mustNew(t, Options{Addrs: []string{srv.Addr()}, Timeout: 2 * time.Second})
	if want := batchMaxWait; s.batcher().maxWait != want {
		t.Fatalf("maxWait = %v, want %v", s.batcher().maxWait, want)
	}
	p := ratelimit.MustPolicy(ratelimit.PolicyConfig{Algorithm: ratelimit.FixedWindow, Limit: 10, Window: ratelimit.MaxWindow})
	evaluate(t, s, ratelimit.Request{Key: "warm-up", Policy: p}) // connected
	b := s.batcher()
	b.mu.Lock()
	b.inflight += b.slots // every slot taken by calls that never end
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		b.inflight -= b.slots
		b.mu.Unlock()
	}()
	before := scriptCalls(t, srv)
	const n = 8
	var wg sync.WaitGroup
	errs := make([]error, n)
	elapsed := make([]time.Duration, n)
	for i := range n {
		wg.Go(func() {
			start := time.Now()
			out := make([]ratelimit.Decision, 1)
			_, errs[i] = s.Evaluate(context.Background(), []ratelimit.Request{{Key: fmt.Sprint("k", i), Policy: p}}, out)
			elapsed[i] = time.Since(start)
		})
	}
	wg.Wait()
	if calls := scriptCalls(t, srv) - before; calls < 1 || calls > n {
		t.Errorf("%d script calls for %d requests, want 1..%d", calls, n, n)
	}
	for i := range n {
		if errs[i] != nil {
			t.Errorf("request %d: %v, want decided once its batch stopped waiting", i, errs[i])
		}
		if elapsed[i] > time.Second {
			t.Errorf("request %d took %v: its batch waited for a slot towards the 2s timeout", i, elapsed[i])
		}
		if rem := peek(t, s, ratelimit.Request{Key: fmt.Sprint("k", i), Policy: p})[0].Remaining; rem != 9 {
			t.Errorf("key %d: remaining %d, want 9 (counted once)", i, rem)
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.inflight != b.slots || len(b.queue) != 0 {
		t.Errorf("after the expedited batches: %d calls in flight, %d batches waiting; want %d (the held slots) and 0", b.inflight, len(b.queue), b.slots)
	}
}

// TestDistinct: distinct answers true for keys that are all different and
// false as soon as one repeats, whatever its position, and for more keys
// than distinctMax.
func TestDistinct(t *testing.T) {
	keys := make([]string, distinctMax)
	for i := range keys {
		keys[i] = fmt.Sprintf("sluice:{%022d}:tb", i)
	}
	if !distinct(keys) {
		t.Fatalf("%d different keys: not distinct", len(keys))
	}
	for _, at := range []int{1, distinctMax / 2, distinctMax - 1} {
		rep := slices.Clone(keys)
		rep[at] = rep[at-1]
		if distinct(rep) {
			t.Errorf("key %d repeats key %d: distinct", at, at-1)
		}
	}
	if distinct(append(slices.Clone(keys), "sluice:{x}:tb")) {
		t.Errorf("%d keys, above distinctMax: distinct", distinctMax+1)
	}
	if !distinct(nil) {
		t.Error("no keys: not distinct")
	}
}

// TestBatchArgsForms: batchArgs sends a one-limit request of cost 1 that is
// not a sliding log as the one ARGV r<index> (r-<index> when shadow), every
// other request as its count, then index and cost per limit; and chooses
// mode 'B' exactly when no key repeats.
func TestBatchArgsForms(t *testing.T) {
	s := &Store{prefix: "p"}
	tb := ratelimit.MustPolicy(ratelimit.PolicyConfig{Name: "tb", Algorithm: ratelimit.TokenBucket, Capacity: 5, Rate: 1})
	sl := ratelimit.MustPolicy(ratelimit.PolicyConfig{Name: "sl", Algorithm: ratelimit.SlidingLog, Limit: 5, Window: time.Second})
	mk := func(reqs ...ratelimit.Request) *member {
		return &member{cl: s.newCall(modeEvaluate, "", reqs, nil), n: len(reqs)}
	}
	build := func(ms ...*member) (keys, args []string) {
		nkeys := 0
		for _, m := range ms {
			nkeys += len(m.cl.keys)
		}
		return batchArgs(ms, nkeys, "")
	}
	keys, args := build(
		mk(ratelimit.Request{Key: "a", Policy: tb}),
		mk(ratelimit.Request{Key: "b", Policy: tb, Shadow: true}),
		mk(ratelimit.Request{Key: "c", Policy: tb, Cost: 3}),
		mk(ratelimit.Request{Key: "d", Policy: sl}),
		mk(ratelimit.Request{Key: "e", Policy: tb}, ratelimit.Request{Key: "e", Policy: sl, Shadow: true}),
	)
	if len(keys) != 8 {
		t.Fatalf("%d keys, want 8: %q", len(keys), keys)
	}
	if args[0] != modeBatchDistinct || args[2] != "2" {
		t.Fatalf("mode %q, %s policies; want %q, 2", args[0], args[2], modeBatchDistinct)
	}
	refs := args[3+2*5:]
	want := []string{"r1", "r-1", "1", "1", "3", "1", "2", "1", "2", "1", "1", "-2", "1"}
	if diff := testdiff.Diff(want, refs); diff != "" {
		t.Errorf("per-request arguments (-want +got):\n%s", diff)
	}
	_, args = build(mk(ratelimit.Request{Key: "a", Policy: tb}), mk(ratelimit.Request{Key: "a", Policy: tb}))
	if args[0] != modeBatch {
		t.Errorf("a repeated key: mode %q, want %q", args[0], modeBatch)
	}
}

// TestBatchWritesOnce: in a batch whose requests share keys (mode 'b'), the
// keys are read with one MGET and each is written once, and left with the value and the
// TTL that the same requests decided one by one leave: the last write's.
// The token bucket earns a token every 10 s, so each consumption moves its
// reset, and with it the TTL, by 10 s.
func TestBatchWritesOnce(t *testing.T) {
	srv := redistest.NewServer(t, redistest.ServerOptions{})
	clock := kit.NewManualClock(time.Unix(1_764_000_000, 0))
	alone := mustNew(t, Options{Addrs: []string{srv.Addr()}, Clock: clock})
	setBatching(alone, 0, false)
	batched := mustNew(t, Options{Addrs: []string{srv.Addr()}, Clock: clock})
	user := ratelimit.MustPolicy(ratelimit.PolicyConfig{Name: "user", Algorithm: ratelimit.TokenBucket, Capacity: 20, Rate: 0.1})
	global := ratelimit.MustPolicy(ratelimit.PolicyConfig{Name: "global", Algorithm: ratelimit.FixedWindow, Limit: 100, Window: time.Minute})
	gc := ratelimit.MustPolicy(ratelimit.PolicyConfig{Name: "gc", Algorithm: ratelimit.GCRA, Burst: 20, Rate: 0.1})
	var reqs [][]ratelimit.Request
	for i := range 12 {
		u := fmt.Sprint("u", i%3)
		if i%4 == 3 {
			reqs = append(reqs, []ratelimit.Request{{Key: u, Policy: gc}}) // the one-ARGV form
			continue
		}
		reqs = append(reqs, []ratelimit.Request{{Key: u, Policy: user}, {Key: "all", Policy: global}})
	}
	for i, r := range reqs {
		if ok, _ := evaluate(t, alone, r...); !ok {
			t.Fatalf("request %d denied one by one", i)
		}
	}
	sets, gets, mgets := cmdCalls(t, srv, "set"), cmdCalls(t, srv, "get"), cmdCalls(t, srv, "mget")
	for i, r := range runBatch(t, batched, reqs) {
		if r.err != nil || !r.ok {
			t.Fatalf("request %d in the batch: %v %v", i, r.ok, r.err)
		}
	}
	// u0, u1, u2 under user and under gc, and all under global.
	const keys = 7
	if n := cmdCalls(t, srv, "set") - sets; n != keys {
		t.Errorf("the batch wrote %d times, want %d (once per key)", n, keys)
	}
	if g, m := cmdCalls(t, srv, "get")-gets, cmdCalls(t, srv, "mget")-mgets; g != 0 || m != 1 {
		t.Errorf("the batch read with %d GET and %d MGET, want one MGET", g, m)
	}
	seen := map[string]bool{}
	for _, r := range slices.Concat(reqs...) {
		ka := appendKeys(nil, alone.prefix, tag(r.Key), specOf(r.Policy))[0]
		kb := appendKeys(nil, batched.prefix, tag(r.Key), specOf(r.Policy))[0]
		if seen[ka] {
			continue
		}
		seen[ka] = true
		va, err := srv.Do("GET", ka)
		if err != nil {
			t.Fatal(err)
		}
		vb, err := srv.Do("GET", kb)
		if err != nil {
			t.Fatal(err)
		}
		if va != vb {
			t.Errorf("%s on %s: batched state %q, one by one %q", r.Policy.Name(), r.Key, vb, va)
		}
		ta, err := srv.Do("PTTL", ka)
		if err != nil {
			t.Fatal(err)
		}
		tb, err := srv.Do("PTTL", kb)
		if err != nil {
			t.Fatal(err)
		}
		a, _ := strconv.ParseInt(fmt.Sprint(ta), 10, 64)
		b, _ := strconv.ParseInt(fmt.Sprint(tb), 10, 64)
		if d := a - b; d < -5000 || d > 5000 {
			t.Errorf("%s on %s: batched TTL %d ms, one by one %d ms: want the last write's", r.Policy.Name(), r.Key, b, a)
		}
	}
}

// TestBatchWritesRefused: when Redis refuses a batch's writes (over
// maxmemory), every request of a batch with shared keys (mode 'b') gets
// ErrUnavailable, and no key is written.
func TestBatchWritesRefused(t *testing.T) {
	srv := redistest.NewServer(t, redistest.ServerOptions{})
	s := mustNew(t, Options{Addrs: []string{srv.Addr()}})
	evaluate(t, s, ratelimit.Request{Key: "warm-up", Policy: tbPolicy})
	if _, err := srv.Do("CONFIG", "SET", "maxmemory", "1"); err != nil {
		t.Fatal(err)
	}
	reqs := [][]ratelimit.Request{{{Key: "a", Policy: tbPolicy}}, {{Key: "a", Policy: tbPolicy}}, {{Key: "b", Policy: tbPolicy}}}
	for i, r := range runBatch(t, s, reqs) {
		if !errors.Is(r.err, ErrUnavailable) || ErrorKind(r.err) != "other" {
			t.Errorf("request %d over maxmemory: %v (kind %q), want ErrUnavailable", i, r.err, ErrorKind(r.err))
		}
	}
	if _, err := srv.Do("CONFIG", "SET", "maxmemory", "0"); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"a", "b"} {
		if got := peek(t, s, ratelimit.Request{Key: k, Policy: tbPolicy}); got[0].Remaining != 10 {
			t.Errorf("%s after the refused batch: %d remaining, want 10 (nothing written)", k, got[0].Remaining)
		}
	}
}
