package httplimit

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/sluice-gw/sluice/ratelimit"
)

// TestUntilMore checks the RateLimit `t` parameter against the algorithms
// themselves: after a burst that leaves nothing, one unit must be admitted
// exactly t later (bucket algorithms, gcra, fixed_window) or at the latest
// then (sliding algorithms, where t is an upper bound).
func TestUntilMore(t *testing.T) {
	policies := []struct {
		cfg   ratelimit.PolicyConfig
		exact bool
	}{
		{ratelimit.PolicyConfig{Algorithm: ratelimit.TokenBucket, Capacity: 4, Rate: 3}, true},
		{ratelimit.PolicyConfig{Algorithm: ratelimit.LeakyBucket, Capacity: 4, Rate: 3}, true},
		{ratelimit.PolicyConfig{Algorithm: ratelimit.LeakyBucket, Capacity: 4, Rate: 3, Mode: ratelimit.Shape}, true},
		{ratelimit.PolicyConfig{Algorithm: ratelimit.GCRA, Burst: 4, Rate: 3}, true},
		{ratelimit.PolicyConfig{Algorithm: ratelimit.FixedWindow, Limit: 4, Window: 7 * time.Second}, true},
		{ratelimit.PolicyConfig{Algorithm: ratelimit.SlidingLog, Limit: 4, Window: 7 * time.Second}, false},
		{ratelimit.PolicyConfig{Algorithm: ratelimit.SlidingWindow, Limit: 4, Window: 7 * time.Second}, false},
	}
	for _, pc := range policies {
		p := ratelimit.MustPolicy(pc.cfg)
		t.Run(p.String(), func(t *testing.T) {
			// Spread the burst a little so partial progress matters.
			now := t0.UnixMicro() + 1_234_567
			var s ratelimit.State
			var d ratelimit.Decision
			for i := 0; i < 4; i++ {
				s, d = ratelimit.StepAt(p, s, now, 1)
				if !d.Allowed {
					t.Fatalf("burst unit %d denied", i)
				}
				now += 1000
			}
			now -= 1000
			for _, c := range []struct {
				d    ratelimit.Decision
				cost int64
			}{{d, 1}, {second(ratelimit.StepAt(p, s, now, 1)), 1}, {second(ratelimit.StepAt(p, s, now, 2)), 2}} {
				u := untilMore(p, c.d, c.cost).Microseconds()
				if _, at := ratelimit.StepAt(p, s, now+u, 1); !at.Allowed {
					t.Errorf("t = %dµs (decision %+v, cost %d): one unit still denied then", u, c.d, c.cost)
				}
				if pc.exact && u > 0 {
					if _, before := ratelimit.StepAt(p, s, now+u-1, 1); before.Allowed {
						t.Errorf("t = %dµs (decision %+v, cost %d): a unit was admitted 1µs earlier", u, c.d, c.cost)
					}
				}
			}
		})
	}
}

func second[A, B any](_ A, b B) B { return b }

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
	f := newFixture(t, Options{Limits: []Limit{{Policy: p, Key: mustKey(t, "const:all")}}, Observe: func(*http.Request, *Event) {}})
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
