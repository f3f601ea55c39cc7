package httplimit

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/sluice-gw/sluice/internal/testdiff"
	"github.com/sluice-gw/sluice/ratelimit"
	"github.com/sluice-gw/sluice/ratelimit/kit"
)

// TestUntilMore checks the RateLimit `t` parameter against the algorithms
// themselves: after a burst that leaves nothing, one unit must be admitted
// exactly t later, for every algorithm.
func TestUntilMore(t *testing.T) {
	policies := []ratelimit.PolicyConfig{
		{Algorithm: ratelimit.TokenBucket, Capacity: 4, Rate: 3},
		{Algorithm: ratelimit.LeakyBucket, Capacity: 4, Rate: 3},
		{Algorithm: ratelimit.LeakyBucket, Capacity: 4, Rate: 3, Mode: ratelimit.Shape},
		{Algorithm: ratelimit.GCRA, Burst: 4, Rate: 3},
		{Algorithm: ratelimit.FixedWindow, Limit: 4, Window: 7 * time.Second},
		{Algorithm: ratelimit.SlidingLog, Limit: 4, Window: 7 * time.Second},
		{Algorithm: ratelimit.SlidingWindow, Limit: 4, Window: 7 * time.Second},
	}
	for _, pc := range policies {
		p := ratelimit.MustPolicy(pc)
		t.Run(p.String(), func(t *testing.T) {
			// Spread the burst a little so partial progress matters.
			now := t0.UnixMicro() + 1_234_567
			var s kit.State
			var d ratelimit.Decision
			for i := 0; i < 4; i++ {
				s, d = stepCopy(p, s, now, 1)
				if !d.Allowed {
					t.Fatalf("burst unit %d denied", i)
				}
				now += 1000
			}
			now -= 1000
			for _, c := range []struct {
				d    ratelimit.Decision
				cost int64
			}{{d, 1}, {second(stepCopy(p, s, now, 1)), 1}, {second(stepCopy(p, s, now, 2)), 2}} {
				u := untilMore(c.d).Microseconds()
				if _, at := stepCopy(p, s, now+u, 1); !at.Allowed {
					t.Errorf("t = %dµs (decision %+v, cost %d): one unit still denied then", u, c.d, c.cost)
				}
				if u > 0 {
					if _, before := stepCopy(p, s, now+u-1, 1); before.Allowed {
						t.Errorf("t = %dµs (decision %+v, cost %d): a unit was admitted 1µs earlier", u, c.d, c.cost)
					}
				}
			}
		})
	}
}

func second[A, B any](_ A, b B) B { return b }

// TestUntilMoreSaturated: a bucket so large that its Reset saturates at
// 2^53µs (capacity 10^12 at 0.001/s refills fully in 3·10^7 years) still
// says how long until one more unit, at most one interval, and never 0
// with nothing left. (An audit found t=0 next to r=0.)
func TestUntilMoreSaturated(t *testing.T) {
	for _, alg := range []ratelimit.Algorithm{ratelimit.TokenBucket, ratelimit.LeakyBucket} {
		p := ratelimit.MustPolicy(ratelimit.PolicyConfig{Algorithm: alg, Capacity: 1_000_000_000_000, Rate: 0.001})
		now := t0.UnixMicro()
		s, d := stepCopy(p, kit.State{}, now, p.Max())
		if !d.Allowed || d.Remaining != 0 {
			t.Fatalf("%s: taking the whole capacity: %+v", alg, d)
		}
		u := untilMore(d)
		if u <= 0 || u > time.Duration(kit.ParamsOf(p).IntervalMicros)*time.Microsecond {
			t.Errorf("%s: t = %v with nothing left, want within one interval (%dµs) and above 0", alg, u, kit.ParamsOf(p).IntervalMicros)
		}
		if _, at := stepCopy(p, s, now+u.Microseconds(), 1); !at.Allowed {
			t.Errorf("%s: one unit still denied %v later", alg, u)
		}
	}
}

func TestAppendSFString(t *testing.T) {
	for in, want := range map[string]string{
		"per-user":  `"per-user"`,
		`a"b\c`:     `"a\"b\\c"`,
		"tab\there": `"tab?here"`,
		"café":      `"caf??"`,
		"":          `""`,
	} {
		if got := string(appendSFString(nil, in)); got != want {
			t.Errorf("appendSFString(%q) = %s, want %s", in, got, want)
		}
	}
}

// TestResetOnWholeSecond: on the system clock, a fixed window whose W is a
// whole number of seconds ends on a whole second, and X-RateLimit-Reset is
// that second: the window [Reset−W, Reset) holds the decision. Reading the
// clock after the store call made it one second late every time.
func TestResetOnWholeSecond(t *testing.T) {
	store := newTestStore(t, nil)
	p := ratelimit.MustPolicy(ratelimit.PolicyConfig{Name: "w", Algorithm: ratelimit.FixedWindow, Limit: 1000, Window: 2 * time.Second})
	m, err := New(Options{Route: "api", Store: store, Limits: []Limit{{Policy: p, Key: mustKey(t, "const:all")}}})
	if err != nil {
		t.Fatal(err)
	}
	h := m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	for i := range 20 {
		before := time.Now()
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/api", nil))
		after := time.Now()
		reset, err := strconv.ParseInt(w.Header().Get("X-RateLimit-Reset"), 10, 64)
		if err != nil || w.Code != 200 {
			t.Fatalf("request %d: %d, X-RateLimit-Reset %q", i, w.Code, w.Header().Get("X-RateLimit-Reset"))
		}
		if reset%2 != 0 || reset-2 > after.Unix() || reset <= before.Unix() {
			t.Fatalf("request %d between %v and %v: X-RateLimit-Reset %d, want the end of the 2s window holding the decision",
				i, before.UTC().Format(time.RFC3339Nano), after.UTC().Format(time.RFC3339Nano), reset)
		}
	}
}

func TestUnixCeil(t *testing.T) {
	for _, c := range []struct {
		t    time.Time
		want int64
	}{
		{time.Unix(10, 0), 10},
		{time.Unix(10, 1), 11},
		{time.Unix(10, 999_999_999), 11},
	} {
		if got := unixCeil(c.t); got != c.want {
			t.Errorf("unixCeil(%v) = %d, want %d", c.t, got, c.want)
		}
	}
}

// TestConcurrentRequests: many clients at once on one key get exactly the
// budget, and each admitted response carries consistent headers.
func TestConcurrentRequests(t *testing.T) {
	p := ratelimit.MustPolicy(ratelimit.PolicyConfig{Name: "burst", Algorithm: ratelimit.FixedWindow, Limit: 50, Window: time.Hour})
	f := newFixture(t, Options{Limits: []Limit{{Policy: p, Key: mustKey(t, "const:all")}}, Observe: func(Request, *Event) {}})
	var wg sync.WaitGroup
	codes := make([]int, 200)
	remaining := make([]string, 200)
	for i := range codes {
		wg.Go(func() {
			w := httptest.NewRecorder()
			f.h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/", nil))
			codes[i], remaining[i] = w.Code, w.Header().Get(HeaderRemaining)
		})
	}
	wg.Wait()
	ok, seen := 0, map[string]bool{}
	for i, c := range codes {
		if c == http.StatusOK {
			ok++
			if seen[remaining[i]] {
				t.Errorf("two admitted requests saw remaining %s", remaining[i])
			}
			seen[remaining[i]] = true
		}
	}
	if ok != 50 || f.upstream.Load() != 50 {
		t.Errorf("admitted %d, upstream %d; want 50 and 50", ok, f.upstream.Load())
	}
}

// TestRateLimitTSliding: with nothing left, a sliding limit's t is when one
// more unit is available, not when the whole limit is back (5 per
// hour, the fifth request must not say t=5385 when one unit is back after 2505s).
func TestRateLimitTSliding(t *testing.T) {
	cases := []struct {
		alg   ratelimit.Algorithm
		at    []time.Duration // after t0, aligned to the hour
		want  string          // RateLimit after the last request
		wantT time.Duration   // one unit is admitted then, not 1s earlier
	}{
		// Five at +1815s: the next window starts in 1785s, and 720s into it
		// the weight 5·(1−720/3600) = 4 leaves room for one.
		{ratelimit.SlidingWindow, []time.Duration{1815 * time.Second}, `"h";r=0;t=2505`, 2505 * time.Second},
		// Entries at +0s..+400s: the oldest leaves the window at +3600s.
		{ratelimit.SlidingLog, []time.Duration{0, 100 * time.Second, 200 * time.Second, 300 * time.Second, 400 * time.Second}, `"h";r=0;t=3200`, 3200 * time.Second},
	}
	for _, c := range cases {
		t.Run(string(c.alg), func(t *testing.T) {
			p := ratelimit.MustPolicy(ratelimit.PolicyConfig{Name: "h", Algorithm: c.alg, Limit: 5, Window: time.Hour})
			f := newFixture(t, Options{Limits: []Limit{{Policy: p, Key: mustKey(t, "const:all")}}})
			start := t0.Truncate(time.Hour).Add(time.Hour)
			var w *httptest.ResponseRecorder
			for i := range 5 {
				f.clock.Set(start.Add(c.at[min(i, len(c.at)-1)]))
				if w = f.do("/api"); w.Code != http.StatusOK {
					t.Fatalf("request %d: %d", i, w.Code)
				}
			}
			if got := w.Header().Get(HeaderRateLimit); got != c.want {
				t.Errorf("RateLimit after the fifth request = %s, want %s", got, c.want)
			}
			last := f.clock.Now()
			f.clock.Set(last.Add(c.wantT - time.Second))
			if w := f.do("/api"); w.Code != http.StatusTooManyRequests {
				t.Errorf("1s before t: %d, want 429", w.Code)
			}
			f.clock.Set(last.Add(c.wantT))
			if w := f.do("/api"); w.Code != http.StatusOK {
				t.Errorf("at t: %d, want 200", w.Code)
			}
		})
	}
}

// uncountedStore admits every request without counting the limits whose
// policy is named in skip, as store/fallback's Allow mode does for all of
// them, and decides the others on the memory store.
type uncountedStore struct {
	*testStore
	skip map[string]bool
}

func (s uncountedStore) Evaluate(ctx context.Context, reqs []ratelimit.Request, out []ratelimit.Decision) (bool, error) {
	var counted []ratelimit.Request
	for _, q := range reqs {
		if !s.skip[q.Policy.Name()] {
			counted = append(counted, q)
		}
	}
	dec := make([]ratelimit.Decision, len(counted))
	ok, err := s.testStore.Evaluate(ctx, counted, dec)
	for i, j := 0, 0; i < len(reqs); i++ {
		if s.skip[reqs[i].Policy.Name()] {
			m := reqs[i].Policy.Max()
			out[i] = ratelimit.Decision{Allowed: true, Limit: m, Remaining: m, Uncounted: true}
			continue
		}
		out[i], j = dec[j], j+1
	}
	return ok, err
}

// TestUncountedNoHeaders: a limit no store counted (Decision.Uncounted)
// appears in no quota header; when only some limits were counted, the
// headers describe those alone; when none was, none is sent.
func TestUncountedNoHeaders(t *testing.T) {
	limits := []Limit{{Policy: perUser, Key: mustKey(t, "const:u")}, {Policy: hourly, Key: mustKey(t, "const:u")}}
	cases := []struct {
		name string
		skip map[string]bool
		want map[string]string
	}{
		{"none counted", map[string]bool{"per-user": true, "hourly": true}, map[string]string{}},
		{"hourly counted", map[string]bool{"per-user": true}, map[string]string{
			HeaderLimit: "100", HeaderRemaining: "99", HeaderReset: strconv.FormatInt(t0.Truncate(time.Hour).Add(time.Hour).Unix(), 10),
			HeaderRateLimitPolicy: `"hourly";q=100;w=3600`, HeaderRateLimit: `"hourly";r=99;t=0`,
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			clock := kit.NewManualClock(t0)
			store := uncountedStore{newTestStore(t, clock), c.skip}
			m, err := New(Options{Route: "api", Store: store, Clock: clock, Limits: limits})
			if err != nil {
				t.Fatal(err)
			}
			w := httptest.NewRecorder()
			m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})).ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/api", nil))
			if w.Code != http.StatusOK {
				t.Fatalf("status %d, want 200", w.Code)
			}
			if diff := testdiff.Diff(c.want, rlHeaders(w)); diff != "" {
				t.Errorf("headers (-want +got):\n%s", diff)
			}
		})
	}
}

// stepCopy runs kit.StepAt on a copy of s and returns the new state and the
// decision, leaving s as it was.
func stepCopy(p *ratelimit.Policy, s kit.State, nowMicros, n int64) (kit.State, ratelimit.Decision) {
	var d ratelimit.Decision
	kit.StepAt(p, &s, nowMicros, n, &d)
	return s, d
}
