package core

import (
	"fmt"
	"hash/maphash"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/sluice-gw/sluice/httplimit"
	"github.com/sluice-gw/sluice/ratelimit"
	"github.com/sluice-gw/sluice/store/memory"
)

// answer is one upstream answer fed to a LatencySignal: at (since the fake
// clock's origin) for client, after latency.
type answer struct {
	at      time.Duration
	client  uint64
	latency time.Duration
}

// clients returns one answer of the given latency at at for each of the
// clients first, first+1, … first+n-1.
func clients(at time.Duration, first uint64, n int, latency time.Duration) []answer {
	var out []answer
	for i := range n {
		out = append(out, answer{at, first + uint64(i), latency})
	}
	return out
}

func concat(parts ...[]answer) []answer {
	var out []answer
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// TestLatencySignal: the signal is the 90th percentile (nearest rank) over
// the clients answered in the last 10 s of each client's latency in the
// newest second it was answered in (its largest then); a client counts
// once however many requests it sends.
func TestLatencySignal(t *testing.T) {
	const fast, slow = 2 * time.Millisecond, time.Second
	start := 20 * time.Second // away from the clock's origin
	for _, tc := range []struct {
		name    string
		answers []answer
		at      time.Duration // when the signal is read
		want    time.Duration
	}{
		{"no answer", nil, start, 0},
		{"one answer", []answer{{start, 1, 300 * time.Millisecond}}, start, 300 * time.Millisecond},
		{"the largest of a second", []answer{{start, 1, fast}, {start + 100*time.Millisecond, 1, slow}, {start + 200*time.Millisecond, 1, fast}}, start + 300*time.Millisecond, slow},
		{"a client's newest second: slow, then fast", []answer{{start, 1, slow}, {start + time.Second, 1, fast}}, start + time.Second, fast},
		{"a client's newest second: fast, then slow", []answer{{start, 1, fast}, {start + 3*time.Second, 1, slow}}, start + 3*time.Second, slow},
		{"within the window", []answer{{start, 1, slow}}, start + 9*time.Second + 900*time.Millisecond, slow},
		{"past the window", []answer{{start, 1, slow}}, start + 10*time.Second, 0},
		{"5 of 50 clients slow", concat(clients(start, 1, 45, fast), clients(start, 100, 5, slow)), start, fast},
		{"6 of 50 clients slow", concat(clients(start, 1, 44, fast), clients(start, 100, 6, slow)), start, slow},
		{"1 of 51 clients slow, every second", func() []answer {
			var out []answer
			for s := range 10 {
				at := start + time.Duration(s)*time.Second
				for range 4 {
					out = append(out, answer{at, 999, slow})
				}
				out = append(out, clients(at, 1, 50, fast)...)
			}
			return out
		}(), start + 9*time.Second, fast},
		{"one client's many slow answers count once", concat(clients(start, 1, 9, fast), func() []answer {
			var out []answer
			for i := range 1000 {
				out = append(out, answer{start + time.Duration(i)*time.Millisecond, 999, slow})
			}
			return out
		}()), start + time.Second, fast},
		{"every client slow", concat(clients(start, 1, 50, fast), clients(start+2*time.Second, 1, 50, slow)), start + 2*time.Second, slow},
		{"a flood of keys first holds no bucket", concat(clients(start, 1<<40, 150, slow), clients(start, 1, 4850, fast)), start, fast},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var now time.Duration
			a := &LatencySignal{now: func() time.Duration { return now }}
			for _, an := range tc.answers {
				now = an.at
				// The ids of real clients are seeded hashes; these are
				// mixed the same way, so that their order says nothing.
				a.observe(nonZero(clientOfAddrBytes(an.client)), an.latency)
			}
			now = tc.at
			if got := a.get(); got != tc.want {
				t.Errorf("get() at %v after %d answers = %v, want %v", tc.at, len(tc.answers), got, tc.want)
			}
			for i := range a.buckets {
				if n := len(a.buckets[i].keys); n > latencyBucketKeys {
					t.Errorf("bucket %d holds %d clients, want at most %d", i, n, latencyBucketKeys)
				}
			}
		})
	}
}

// clientOfAddrBytes mixes a test's client number as a client's id is.
func clientOfAddrBytes(n uint64) uint64 {
	return maphash.String(clientSeed, fmt.Sprint(n))
}

// TestLatencySignalRecompute: the signal read is worked out again at most
// every latencyRecompute, and then from the buckets as they are.
func TestLatencySignalRecompute(t *testing.T) {
	var now time.Duration = 5 * time.Second
	a := &LatencySignal{now: func() time.Duration { return now }}
	a.observe(1, time.Second)
	if got := a.get(); got != time.Second {
		t.Fatalf("get() = %v, want 1s", got)
	}
	now += latencyRecompute / 2
	a.observe(1, 3*time.Second)
	if got := a.get(); got != time.Second {
		t.Errorf("get() %v after the last computation = %v, want 1s (not yet worked out again)", latencyRecompute/2, got)
	}
	now += latencyRecompute / 2
	if got := a.get(); got != 3*time.Second {
		t.Errorf("get() %v after the last computation = %v, want 3s", latencyRecompute, got)
	}
}

// TestLatencyProbe: with no answer for probeInterval, one request shed for
// latency goes through to measure the upstream, then none until the next
// interval.
func TestLatencyProbe(t *testing.T) {
	var now time.Duration = 5 * time.Second
	a := &LatencySignal{now: func() time.Duration { return now }}
	a.observe(1, time.Second)
	steps := []struct {
		after time.Duration
		want  bool
	}{{0, false}, {probeInterval - time.Millisecond, false}, {time.Millisecond, true}, {0, false}, {probeInterval / 2, false}, {probeInterval / 2, true}}
	for i, s := range steps {
		now += s.after
		if got := a.probe(); got != s.want {
			t.Errorf("step %d: probe() at %v = %v, want %v", i, now, got, s.want)
		}
	}
}

// TestClientOfKeys: a request's client is its rate-limit keys together;
// anonymous keys name nobody.
func TestClientOfKeys(t *testing.T) {
	ev := func(keys ...[]string) *httplimit.Event {
		e := &httplimit.Event{}
		for i, k := range keys {
			e.Verdicts = append(e.Verdicts, httplimit.Verdict{LimitID: fmt.Sprint(i), Key: k, Anonymous: k == nil})
		}
		return e
	}
	a, b := clientOfKeys(ev([]string{"alice"})), clientOfKeys(ev([]string{"bob"}))
	if a == 0 || b == 0 || a == b {
		t.Errorf("clients of alice and bob = %x, %x, want two different non-zero ids", a, b)
	}
	if again := clientOfKeys(ev([]string{"alice"})); again != a {
		t.Errorf("client of alice again = %x, want %x", again, a)
	}
	if ab := clientOfKeys(ev([]string{"alice"}, []string{"bob"})); ab == a || ab == b {
		t.Errorf("client of (alice, bob) = %x, the same as one key's", ab)
	}
	if parts := clientOfKeys(ev([]string{"al", "ice"})); parts == a {
		t.Error(`client of key parts ("al", "ice") = the client of "alice"`)
	}
	if none := clientOfKeys(ev(nil)); none != 0 {
		t.Errorf("client of an anonymous key = %x, want 0", none)
	}
}

// TestLatencyNewcomer: a request about to be shed for latency goes through
// when its client has no answer in the window and the newest bucket would
// hold it, at most latencyNewcomers a second.
func TestLatencyNewcomer(t *testing.T) {
	var now time.Duration = 30 * time.Second
	a := &LatencySignal{now: func() time.Duration { return now }}
	a.observe(7, time.Second)
	if a.newcomer(7) {
		t.Error("newcomer(7) = true for a client answered this second")
	}
	now += 9 * time.Second
	if a.newcomer(7) {
		t.Error("newcomer(7) = true for a client answered 9s ago")
	}
	now += time.Second
	if !a.newcomer(7) {
		t.Error("newcomer(7) = false for a client answered 10s ago, out of the window")
	}
	for c := uint64(100); c < 100+latencyNewcomers-1; c++ {
		if !a.newcomer(c) {
			t.Fatalf("newcomer(%d) = false, the %dth this second; want true up to %d", c, c-98, latencyNewcomers)
		}
	}
	if a.newcomer(1000) {
		t.Errorf("newcomer(1000) = true past %d this second", latencyNewcomers)
	}
	now += time.Second
	if !a.newcomer(1000) {
		t.Error("newcomer(1000) = false in the next second")
	}
	// A full bucket: only clients it would hold are let through.
	for c := uint64(1); c <= latencyBucketKeys; c++ {
		a.observe(c<<32, time.Second)
	}
	if a.newcomer(latencyBucketKeys<<32 + 1) {
		t.Error("newcomer of an id above a full bucket's = true, want false")
	}
	if !a.newcomer(5) {
		t.Error("newcomer of an id below a full bucket's = false, want true")
	}
}

// TestClientOfLimits: a request names the same client before its limits
// decide (clientOfLimits, for a request about to be shed) as after
// (clientOfKeys, from the verdicts), skipped and anonymous keys left out.
func TestClientOfLimits(t *testing.T) {
	store, err := memory.New(memory.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	p := ratelimit.MustPolicy(ratelimit.PolicyConfig{Name: "p", Algorithm: ratelimit.FixedWindow, Limit: 1 << 30, Window: time.Hour})
	key := func(specs ...string) httplimit.Key {
		k, err := httplimit.ParseKeys(specs)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	var after uint64
	mw, err := httplimit.New(httplimit.Options{Route: "r", Store: store, Limits: []httplimit.Limit{
		{Policy: p, Key: key("header:X-User")},
		{Policy: p, Key: key("header:X-Team", "query:tenant"), OnEmptyKey: httplimit.EmptyKeySkip},
		{Policy: p, Key: key("header:X-Plan"), OnEmptyKey: httplimit.EmptyKeyAnonymous},
	}, Observe: func(_ httplimit.Request, ev *httplimit.Event) { after = clientOfKeys(ev) }})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[uint64]string{}
	for _, tc := range []struct{ target, user, team, plan string }{
		{"/", "alice", "", ""},
		{"/", "bob", "", ""},
		{"/?tenant=acme", "alice", "red", ""},
		{"/?tenant=acme", "alice", "red", "gold"},
		{"/?tenant=acme", "alice", "", "gold"},
	} {
		r := httptest.NewRequest(http.MethodGet, "http://sluice.test"+tc.target, nil)
		for k, v := range map[string]string{"X-User": tc.user, "X-Team": tc.team, "X-Plan": tc.plan} {
			if v != "" {
				r.Header.Set(k, v)
			}
		}
		before := clientOfLimits(mw, mw.Limits(), httplimit.HTTPRequest(r))
		var res httplimit.Result
		mw.Decide(httplimit.HTTPRequest(r), &res)
		name := fmt.Sprintf("%+v", tc)
		if before == 0 || before != after {
			t.Errorf("%s: client before the decision %x, after %x; want the same, not 0", name, before, after)
		}
		if other, dup := seen[before]; dup {
			t.Errorf("%s: the same client as %s", name, other)
		}
		seen[before] = name
	}
}

// TestLatencySignalAllocs: recording an answer, reading the signal (and
// working it out again) and naming a client by its keys allocate nothing
// once the buckets are warm.
func TestLatencySignalAllocs(t *testing.T) {
	var now time.Duration = 5 * time.Second
	a := &LatencySignal{now: func() time.Duration { return now }}
	for s := range latencyBuckets {
		now = time.Duration(5+s) * time.Second
		for c := range uint64(latencyBucketKeys) {
			a.observe(c, time.Millisecond)
		}
		a.get()
	}
	ev := &httplimit.Event{Verdicts: []httplimit.Verdict{{LimitID: "0", Key: []string{"alice"}}, {LimitID: "1", Key: []string{"acme", "eu"}}}}
	var c uint64
	if n := testing.AllocsPerRun(100, func() {
		c++
		now += latencyRecompute
		a.observe(c%latencyBucketKeys, 2*time.Millisecond)
		a.get()
		clientOfKeys(ev)
	}); n != 0 {
		t.Errorf("observe, get and clientOfKeys: %v allocations, want 0", n)
	}
}
