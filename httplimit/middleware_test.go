package httplimit

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluice-gw/sluice/internal/testdiff"
	"github.com/sluice-gw/sluice/ratelimit"
	"github.com/sluice-gw/sluice/ratelimit/kit"
)

// t0 is a whole second, so Reset arithmetic is easy to read.
var t0 = time.Unix(1_764_100_000, 0)

var (
	perUser = ratelimit.MustPolicy(ratelimit.PolicyConfig{Name: "per-user", Algorithm: ratelimit.TokenBucket, Capacity: 10, Rate: 1})
	hourly  = ratelimit.MustPolicy(ratelimit.PolicyConfig{Name: "hourly", Algorithm: ratelimit.FixedWindow, Limit: 100, Window: time.Hour})
	vip     = ratelimit.MustPolicy(ratelimit.PolicyConfig{Name: "vip", Algorithm: ratelimit.TokenBucket, Capacity: 100, Rate: 10})
	free    = ratelimit.MustPolicy(ratelimit.PolicyConfig{Name: "free-tier", Algorithm: ratelimit.SlidingWindow, Limit: 100, Window: time.Minute})
	pro     = ratelimit.MustPolicy(ratelimit.PolicyConfig{Name: "pro-tier", Algorithm: ratelimit.SlidingWindow, Limit: 1000, Window: time.Minute})
)

func mustKey(t testing.TB, specs ...string) Key {
	t.Helper()
	k, err := ParseKeys(specs)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// fixture is a middleware over a test store on a manual clock, wrapping a
// handler that counts its calls.
type fixture struct {
	clock    *kit.ManualClock
	store    *testStore
	m        *Middleware
	h        http.Handler
	upstream atomic.Int64
	events   []Event
}

func newFixture(t testing.TB, o Options) *fixture {
	t.Helper()
	f := &fixture{clock: kit.NewManualClock(t0)}
	f.store = newTestStore(t, f.clock)
	if o.Route == "" {
		o.Route = "api"
	}
	o.Store, o.Clock = f.store, f.clock
	if o.Observe == nil {
		o.Observe = func(_ Request, ev *Event) {
			e := *ev
			e.Verdicts = append([]Verdict(nil), ev.Verdicts...)
			for i := range e.Verdicts {
				e.Verdicts[i].Key = append([]string(nil), e.Verdicts[i].Key...)
			}
			f.events = append(f.events, e)
		}
	}
	m, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	f.m = m
	f.h = m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.upstream.Add(1)
		w.WriteHeader(http.StatusOK)
	}))
	return f
}

// do sends a GET with the given headers ("Name: value" strings).
func (f *fixture) do(target string, headers ...string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodGet, "http://sluice.test"+target, nil)
	for _, h := range headers {
		k, v, _ := strings.Cut(h, ":")
		r.Header.Add(k, strings.TrimSpace(v))
	}
	w := httptest.NewRecorder()
	f.h.ServeHTTP(w, r)
	return w
}

func (f *fixture) lastEvent(t *testing.T) Event {
	t.Helper()
	if len(f.events) == 0 {
		t.Fatal("Observe was never called")
	}
	return f.events[len(f.events)-1]
}

// rlHeaders returns the rate-limit headers of w, for comparison.
func rlHeaders(w *httptest.ResponseRecorder) map[string]string {
	m := map[string]string{}
	for _, k := range []string{HeaderLimit, HeaderRemaining, HeaderReset, HeaderRateLimitPolicy, HeaderRateLimit, "Retry-After"} {
		if v := w.Header().Values(k); len(v) > 0 {
			m[k] = strings.Join(v, " | ")
		}
	}
	return m
}

func unix(d time.Duration) string { return strconv.FormatInt(t0.Add(d).Unix(), 10) }

func TestHeaders(t *testing.T) {
	tests := []struct {
		name   string
		limits []Limit
		sends  int // requests before the one checked, same client
		want   map[string]string
		status int
	}{
		{
			name:   "single limit first request",
			limits: []Limit{{Policy: perUser, Key: mustKey(t, "header:X-User-Id")}},
			status: 200,
			want: map[string]string{
				HeaderLimit: "10", HeaderRemaining: "9", HeaderReset: unix(time.Second),
				HeaderRateLimitPolicy: `"per-user";q=10;w=10`, HeaderRateLimit: `"per-user";r=9;t=0`,
			},
		},
		{
			name:   "single limit last unit: t until one more token",
			limits: []Limit{{Policy: perUser, Key: mustKey(t, "header:X-User-Id")}},
			sends:  9,
			status: 200,
			want: map[string]string{
				HeaderLimit: "10", HeaderRemaining: "0", HeaderReset: unix(10 * time.Second),
				HeaderRateLimitPolicy: `"per-user";q=10;w=10`, HeaderRateLimit: `"per-user";r=0;t=1`,
			},
		},
		{
			name:   "single limit denied",
			limits: []Limit{{Policy: perUser, Key: mustKey(t, "header:X-User-Id")}},
			sends:  10,
			status: 429,
			want: map[string]string{
				HeaderLimit: "10", HeaderRemaining: "0", HeaderReset: unix(10 * time.Second),
				HeaderRateLimitPolicy: `"per-user";q=10;w=10`, HeaderRateLimit: `"per-user";r=0;t=1`,
				"Retry-After": "1",
			},
		},
		{
			name: "two limits: trio of the lowest remaining, IETF lists both",
			limits: []Limit{
				{Policy: hourly, Key: mustKey(t, "const:global")},
				{Policy: perUser, Key: mustKey(t, "header:X-User-Id")},
			},
			sends:  2,
			status: 200,
			want: map[string]string{
				HeaderLimit: "10", HeaderRemaining: "7", HeaderReset: unix(3 * time.Second),
				HeaderRateLimitPolicy: `"hourly";q=100;w=3600, "per-user";q=10;w=10`,
				HeaderRateLimit:       `"hourly";r=97;t=0, "per-user";r=7;t=0`,
			},
		},
		{
			name: "denied by both: the longest retry_after sets trio and Retry-After",
			limits: []Limit{
				{Policy: perUser, Key: mustKey(t, "header:X-User-Id")},
				{Policy: ratelimit.MustPolicy(ratelimit.PolicyConfig{Name: "per-minute", Algorithm: ratelimit.FixedWindow, Limit: 5, Window: time.Minute}), Key: mustKey(t, "header:X-User-Id")},
			},
			sends:  10, // 5 admitted, then per-minute denies; the bucket keeps 5
			status: 429,
			want: map[string]string{
				// t0 is 1764100000 = 40 s into its minute: 20 s to the window's end.
				HeaderLimit: "5", HeaderRemaining: "0", HeaderReset: unix(20 * time.Second),
				HeaderRateLimitPolicy: `"per-user";q=10;w=10, "per-minute";q=5;w=60`,
				HeaderRateLimit:       `"per-user";r=5;t=0, "per-minute";r=0;t=20`,
				"Retry-After":         "20",
			},
		},
		{
			name: "shadow limit appears in no header",
			limits: []Limit{
				{Policy: perUser, Key: mustKey(t, "header:X-User-Id")},
				{Policy: hourly, Key: mustKey(t, "const:global"), Shadow: true},
			},
			status: 200,
			want: map[string]string{
				HeaderLimit: "10", HeaderRemaining: "9", HeaderReset: unix(time.Second),
				HeaderRateLimitPolicy: `"per-user";q=10;w=10`, HeaderRateLimit: `"per-user";r=9;t=0`,
			},
		},
		{
			name:   "only shadow limits: no headers at all",
			limits: []Limit{{Policy: perUser, Key: mustKey(t, "header:X-User-Id"), Shadow: true}},
			status: 200,
			want:   map[string]string{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, Options{Limits: tt.limits})
			for range tt.sends {
				f.do("/", "X-User-Id: u1")
			}
			w := f.do("/", "X-User-Id: u1")
			if w.Code != tt.status {
				t.Fatalf("status = %d, want %d", w.Code, tt.status)
			}
			if diff := testdiff.Diff(tt.want, rlHeaders(w)); diff != "" {
				t.Errorf("headers (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTooManyRequestsBody(t *testing.T) {
	f := newFixture(t, Options{Limits: []Limit{{Policy: perUser, Key: mustKey(t, "header:X-User-Id"), Cost: 4}}})
	for _, want := range []int{200, 200, 429} {
		if w := f.do("/", "X-User-Id: u1"); w.Code != want {
			t.Fatalf("status = %d, want %d", w.Code, want)
		}
	}
	if got := f.upstream.Load(); got != 2 {
		t.Errorf("upstream called %d times, want 2 (never on a 429)", got)
	}
	w := f.do("/", "X-User-Id: u1")
	// 2 tokens left, cost 4: 2 more needed at 1/s.
	want := `{"type":"https://iana.org/assignments/http-problem-types#quota-exceeded","title":"Too Many Requests","status":429,"detail":"Rate limit exceeded. Please retry after 2 seconds.","violated-policies":["per-user"],"error":"Too Many Requests","message":"Rate limit exceeded. Please retry after 2 seconds.","retry_after":2}`
	if got := w.Body.String(); got != want {
		t.Errorf("body =\n%s\nwant\n%s", got, want)
	}
	if got := w.Header().Get("Content-Type"); got != "application/problem+json" {
		t.Errorf("Content-Type = %q, want application/problem+json", got)
	}
	if got := w.Header().Get("Retry-After"); got != "2" {
		t.Errorf("Retry-After = %q, want 2", got)
	}
	// r is what is left (2), t is 0 because some is left even if not enough.
	if got := w.Header().Get(HeaderRateLimit); got != `"per-user";r=2;t=0` {
		t.Errorf("RateLimit = %q", got)
	}
}

func TestRetryAfterRoundsUp(t *testing.T) {
	slow := ratelimit.MustPolicy(ratelimit.PolicyConfig{Name: "slow", Algorithm: ratelimit.TokenBucket, Capacity: 1, Rate: 0.4}) // 2.5 s per token
	f := newFixture(t, Options{Limits: []Limit{{Policy: slow, Key: mustKey(t, "ip")}}})
	f.do("/")
	f.clock.Advance(2 * time.Second) // 0.5 s to go
	w := f.do("/")
	if w.Code != 429 || w.Header().Get("Retry-After") != "1" {
		t.Fatalf("after 2s: %d Retry-After %q, want 429 and 1 (0.5 s rounded up)", w.Code, w.Header().Get("Retry-After"))
	}
	f.clock.Advance(499 * time.Millisecond)
	if w := f.do("/"); w.Code != 429 || w.Header().Get("Retry-After") != "1" {
		t.Fatalf("1 ms before: %d Retry-After %q, want 429 and at least 1", w.Code, w.Header().Get("Retry-After"))
	}
	f.clock.Advance(time.Millisecond)
	if w := f.do("/"); w.Code != 200 {
		t.Fatalf("at 2.5s: %d, want 200", w.Code)
	}
}

// TestAllOrNothing: a request denied by one limit consumes from none, so the
// per-user bucket still holds what the global window refused.
func TestAllOrNothing(t *testing.T) {
	bucket := ratelimit.MustPolicy(ratelimit.PolicyConfig{Name: "bucket", Algorithm: ratelimit.TokenBucket, Capacity: 5, Rate: 0.001})
	window := ratelimit.MustPolicy(ratelimit.PolicyConfig{Name: "global", Algorithm: ratelimit.FixedWindow, Limit: 3, Window: 10 * time.Second})
	f := newFixture(t, Options{Limits: []Limit{
		{Policy: bucket, Key: mustKey(t, "header:X-User-Id")},
		{Policy: window, Key: mustKey(t, "const:all")},
	}})
	burst := func() (admitted int) {
		for range 10 {
			if f.do("/", "X-User-Id: u1").Code == 200 {
				admitted++
			}
		}
		return admitted
	}
	if got := burst(); got != 3 {
		t.Errorf("first window admitted %d, want 3 (global window)", got)
	}
	f.clock.Advance(10 * time.Second)
	if got := burst(); got != 2 {
		t.Errorf("second window admitted %d, want 2 (bucket 5 − 3)", got)
	}
	if got := f.upstream.Load(); got != 5 {
		t.Errorf("upstream saw %d, want 5", got)
	}
	// The last request: the empty bucket denies, the window (1 left) would
	// admit and reports so, though nothing was consumed.
	ev := f.lastEvent(t)
	got := []ratelimit.Verdict{ev.Verdicts[0].Result, ev.Verdicts[1].Result}
	if diff := testdiff.Diff([]ratelimit.Verdict{ratelimit.Denied, ratelimit.Allowed}, got); diff != "" {
		t.Errorf("last verdicts (-want +got):\n%s", diff)
	}
}

func TestOnEmptyKey(t *testing.T) {
	one := ratelimit.MustPolicy(ratelimit.PolicyConfig{Name: "one", Algorithm: ratelimit.FixedWindow, Limit: 2, Window: time.Hour})

	t.Run("deny", func(t *testing.T) {
		f := newFixture(t, Options{Limits: []Limit{{Policy: one, Key: mustKey(t, "header:X-User-Id")}}})
		for _, h := range []string{"X-Other: 1", "X-User-Id:    "} {
			w := f.do("/", h)
			if w.Code != 403 {
				t.Fatalf("%q: status %d, want 403", h, w.Code)
			}
			want := `{"type":"about:blank","title":"Forbidden","status":403,"detail":"The request has no value for rate-limit key header:X-User-Id.","error":"Forbidden","message":"The request has no value for rate-limit key header:X-User-Id."}`
			if got := w.Body.String(); got != want {
				t.Errorf("body = %s\nwant %s", got, want)
			}
			if diff := testdiff.Diff(map[string]string{}, rlHeaders(w)); diff != "" {
				t.Errorf("a 403 carries rate-limit headers:\n%s", diff)
			}
		}
		if f.upstream.Load() != 0 || f.store.calls != 0 {
			t.Errorf("upstream %d, store %d calls; want neither called", f.upstream.Load(), f.store.calls)
		}
		if ev := f.lastEvent(t); ev.Outcome != OutcomeForbidden || ev.ForbiddenLimit != "0" {
			t.Errorf("event = %+v, want forbidden by limit 0", ev)
		}
	})

	t.Run("list key with one empty part is empty", func(t *testing.T) {
		f := newFixture(t, Options{Limits: []Limit{{Policy: one, Key: mustKey(t, "header:X-User-Id", "query:tenant")}}})
		if w := f.do("/?tenant=", "X-User-Id: u1"); w.Code != 403 {
			t.Errorf("status %d, want 403", w.Code)
		}
		if w := f.do("/?tenant=t1", "X-User-Id: u1"); w.Code != 200 {
			t.Errorf("status %d, want 200", w.Code)
		}
	})

	t.Run("anonymous shares one budget no value reaches", func(t *testing.T) {
		f := newFixture(t, Options{Limits: []Limit{{Policy: one, Key: mustKey(t, "header:X-User-Id"), OnEmptyKey: EmptyKeyAnonymous}}})
		var codes []int
		for _, h := range []string{"", "X-User-Id: ", "X-User-Id: -", "X-User-Id: 0:", "X-Other: x"} {
			codes = append(codes, f.do("/", h).Code)
		}
		// Three anonymous requests share 2; "-" and "0:" are real keys with their own budgets.
		if diff := testdiff.Diff([]int{200, 200, 200, 200, 429}, codes); diff != "" {
			t.Errorf("codes (-want +got):\n%s", diff)
		}
		ev := f.lastEvent(t)
		if !ev.Verdicts[0].Anonymous || ev.Verdicts[0].Key != nil {
			t.Errorf("verdict = %+v, want anonymous with nil key", ev.Verdicts[0])
		}
	})

	t.Run("skip leaves the limit out", func(t *testing.T) {
		f := newFixture(t, Options{Limits: []Limit{
			{Policy: one, Key: mustKey(t, "header:X-User-Id"), OnEmptyKey: EmptyKeySkip},
			{Policy: hourly, Key: mustKey(t, "const:global")},
		}})
		for range 3 {
			if w := f.do("/"); w.Code != 200 {
				t.Fatalf("status %d, want 200", w.Code)
			}
		}
		w := f.do("/")
		if got := w.Header().Get(HeaderRateLimit); got != `"hourly";r=96;t=0` {
			t.Errorf("RateLimit = %q, want only hourly", got)
		}
		if n := len(f.lastEvent(t).Verdicts); n != 1 {
			t.Errorf("%d verdicts, want 1", n)
		}
	})

	t.Run("skip of every limit passes through", func(t *testing.T) {
		f := newFixture(t, Options{Limits: []Limit{{Policy: one, Key: mustKey(t, "header:X-User-Id"), OnEmptyKey: EmptyKeySkip}}})
		for range 3 {
			if w := f.do("/"); w.Code != 200 || len(rlHeaders(w)) != 0 {
				t.Fatalf("status %d headers %v, want 200 and none", w.Code, rlHeaders(w))
			}
		}
		if f.store.calls != 0 {
			t.Errorf("store called %d times, want 0", f.store.calls)
		}
	})
}

func TestPolicyChoice(t *testing.T) {
	dynamic := ratelimit.MustPolicy(ratelimit.PolicyConfig{Name: "dynamic", Algorithm: ratelimit.TokenBucket, Capacity: 50, Rate: 5})
	tiny := ratelimit.MustPolicy(ratelimit.PolicyConfig{Name: "tiny", Algorithm: ratelimit.TokenBucket, Capacity: 1, Rate: 1})
	lim := Limit{
		Policy:    perUser,
		Key:       mustKey(t, "header:X-User-Id"),
		Cost:      2,
		Overrides: map[string]*ratelimit.Policy{"demo1234": vip, "u-dyn": vip},
		Plans:     &Plans{From: must(ParseKey("header:X-Plan")), Policies: map[string]*ratelimit.Policy{"free": free, "pro": pro}},
	}
	hook := func(_ context.Context, route string, key []string) *ratelimit.Policy {
		if route != "api" {
			t.Errorf("hook route = %q, want api", route)
		}
		switch key[0] {
		case "u-dyn":
			return dynamic
		case "u-tiny":
			return tiny // below the cost: ignored
		}
		return nil
	}
	tests := []struct {
		user, plan string
		want       string // RateLimit header
	}{
		{"u1", "", `"per-user";r=8;t=0`},
		{"u1", "gold", `"per-user";r=6;t=0`}, // unknown plan: default, same budget
		{"u2", "pro", `"pro-tier";r=998;t=0`},
		{"u3", " free ", `"free-tier";r=98;t=0`},
		{"demo1234", "pro", `"vip";r=98;t=0`},     // override before plan
		{"u-dyn", "pro", `"dynamic";r=48;t=0`},    // hook before override
		{"u-tiny", "", `"per-user";r=8;t=0`},      // hook policy too small for the cost
		{"u1", "pro", `"pro-tier";r=998;t=0`},     // a fresh budget under the new policy
		{"u1", "", `"per-user";r=4;t=0`},          // back to the old policy's state
		{"u-dyn", "", `"dynamic";r=46;t=0`},       // same budget as before
		{"demo1234", "", `"vip";r=96;t=0`},        // same budget as before
		{"u2", "pro", `"pro-tier";r=996;t=0`},     // same budget as before
		{"u3", "free", `"free-tier";r=96;t=0`},    // plan value trimmed
		{"u-tiny", "pro", `"pro-tier";r=998;t=0`}, // ignored hook, then plan
	}
	f := newFixture(t, Options{Limits: []Limit{lim}, Override: hook})
	for _, tt := range tests {
		h := []string{"X-User-Id: " + tt.user}
		if tt.plan != "" {
			h = append(h, "X-Plan: "+tt.plan)
		}
		w := f.do("/", h...)
		if got := w.Header().Get(HeaderRateLimit); w.Code != 200 || got != tt.want {
			t.Errorf("user %s plan %q: %d %s, want 200 %s", tt.user, tt.plan, w.Code, got, tt.want)
		}
	}
	if got := f.m.PolicyFor(context.Background(), 0, []string{"demo1234"}); got != vip {
		t.Errorf("PolicyFor(demo1234) = %v, want vip", got)
	}
	if got := f.m.PolicyFor(context.Background(), 0, []string{"u-dyn"}); got != dynamic {
		t.Errorf("PolicyFor(u-dyn) = %v, want dynamic", got)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func TestShadow(t *testing.T) {
	strict := ratelimit.MustPolicy(ratelimit.PolicyConfig{Name: "strict", Algorithm: ratelimit.FixedWindow, Limit: 1, Window: time.Hour})
	f := newFixture(t, Options{Limits: []Limit{
		{Policy: perUser, Key: mustKey(t, "header:X-User-Id")},
		{ID: "trial", Policy: strict, Key: mustKey(t, "header:X-User-Id"), Shadow: true},
	}})
	var results []ratelimit.Verdict
	for range 3 {
		w := f.do("/", "X-User-Id: u1")
		if w.Code != 200 {
			t.Fatalf("status %d, want 200: shadow limits never deny", w.Code)
		}
		if strings.Contains(w.Header().Get(HeaderRateLimitPolicy), "strict") {
			t.Errorf("shadow policy in header: %s", w.Header().Get(HeaderRateLimitPolicy))
		}
		ev := f.lastEvent(t)
		if v := ev.Verdicts[1]; v.LimitID != "trial" || !v.Shadow {
			t.Fatalf("verdict %+v, want shadow limit trial", v)
		}
		results = append(results, ev.Verdicts[1].Result)
	}
	want := []ratelimit.Verdict{ratelimit.Allowed, ratelimit.ShadowDenied, ratelimit.ShadowDenied}
	if diff := testdiff.Diff(want, results); diff != "" {
		t.Errorf("shadow results (-want +got):\n%s", diff)
	}
	if got := f.do("/", "X-User-Id: u1").Header().Get(HeaderRemaining); got != "6" {
		t.Errorf("X-RateLimit-Remaining = %s, want 6", got)
	}
}

func TestStoreError(t *testing.T) {
	errDown := errors.New("store down")
	t.Run("default is 503", func(t *testing.T) {
		f := newFixture(t, Options{Limits: []Limit{{Policy: perUser, Key: mustKey(t, "ip")}}})
		f.store.err = errDown
		w := f.do("/")
		want := `{"type":"about:blank","title":"Service Unavailable","status":503,"detail":"Rate limit store unavailable.","error":"Service Unavailable","message":"Rate limit store unavailable."}`
		if w.Code != 503 || w.Body.String() != want || w.Header().Get("Retry-After") != "1" {
			t.Errorf("got %d Retry-After %q %s\nwant 503 Retry-After 1 %s", w.Code, w.Header().Get("Retry-After"), w.Body, want)
		}
		if f.upstream.Load() != 0 {
			t.Error("upstream called on a store error")
		}
		if ev := f.lastEvent(t); ev.Outcome != OutcomeStoreError || !errors.Is(ev.Err, errDown) {
			t.Errorf("event %+v, want store_error with the error", ev)
		}
	})
	t.Run("hook proceeds", func(t *testing.T) {
		var seen error
		f := newFixture(t, Options{
			Limits:       []Limit{{Policy: perUser, Key: mustKey(t, "ip")}},
			OnStoreError: func(_ Request, err error) *Problem { seen = err; return nil },
		})
		f.store.err = errDown
		if w := f.do("/"); w.Code != 200 || f.upstream.Load() != 1 || !errors.Is(seen, errDown) {
			t.Errorf("got %d, upstream %d, hook saw %v; want 200, 1, the error", w.Code, f.upstream.Load(), seen)
		}
	})
	t.Run("hook answers", func(t *testing.T) {
		f := newFixture(t, Options{
			Limits: []Limit{{Policy: perUser, Key: mustKey(t, "ip")}},
			OnStoreError: func(Request, error) *Problem {
				return &Problem{Status: http.StatusBadGateway, Detail: "no store", RetryAfter: 7}
			},
		})
		f.store.err = errDown
		w := f.do("/")
		if w.Code != 502 || f.upstream.Load() != 0 || w.Header().Get("Retry-After") != "7" {
			t.Fatalf("got %d, upstream %d, Retry-After %q; want 502, 0, 7", w.Code, f.upstream.Load(), w.Header().Get("Retry-After"))
		}
		var p map[string]any
		if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil || p["detail"] != "no store" || p["status"] != 502.0 {
			t.Errorf("body %s (%v), want the hook's problem", w.Body, err)
		}
		if ct := w.Header().Get("Content-Type"); ct != "application/problem+json" {
			t.Errorf("Content-Type %q", ct)
		}
	})
}

// shaped holds each request for level/rate: 200 ms per queued unit.
var shaped = ratelimit.MustPolicy(ratelimit.PolicyConfig{Name: "shaped", Algorithm: ratelimit.LeakyBucket, Capacity: 3, Rate: 5, Mode: ratelimit.Shape})

func TestShapeHoldsRequest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// The store's clock stays still: decisions are made at one instant,
		// while the hold runs on synctest's fake time.
		f := newFixture(t, Options{Limits: []Limit{{Policy: shaped, Key: mustKey(t, "const:q")}}})
		start := time.Now()
		var waited []time.Duration
		var codes []int
		for range 4 {
			w := f.do("/")
			codes = append(codes, w.Code)
			waited = append(waited, time.Since(start))
			start = time.Now()
		}
		if diff := testdiff.Diff([]int{200, 200, 200, 429}, codes); diff != "" {
			t.Errorf("codes (-want +got):\n%s", diff)
		}
		want := []time.Duration{0, 200 * time.Millisecond, 400 * time.Millisecond, 0}
		if diff := testdiff.Diff(want, waited); diff != "" {
			t.Errorf("holds (-want +got):\n%s", diff)
		}
		if d := f.events[2].Delay; d != 400*time.Millisecond {
			t.Errorf("event delay %v, want 400ms", d)
		}
		if f.upstream.Load() != 3 {
			t.Errorf("upstream %d, want 3", f.upstream.Load())
		}
	})
}

func TestShapeClientGoesAway(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, Options{Limits: []Limit{{Policy: shaped, Key: mustKey(t, "const:q")}}})
		f.do("/") // queue one unit: the next waits 200 ms
		ctx, cancel := context.WithCancel(context.Background())
		r := httptest.NewRequestWithContext(ctx, http.MethodGet, "/", nil)
		w := httptest.NewRecorder()
		done := make(chan struct{})
		go func() {
			f.h.ServeHTTP(w, r)
			close(done)
		}()
		time.Sleep(100 * time.Millisecond) // fake time: the handler is mid-hold
		synctest.Wait()
		select {
		case <-done:
			t.Fatal("handler returned before its hold ended")
		default:
		}
		cancel()
		<-done
		if f.upstream.Load() != 1 {
			t.Errorf("upstream %d, want 1: an abandoned request is not forwarded", f.upstream.Load())
		}
		if ev := f.lastEvent(t); ev.Outcome != OutcomeAbandoned {
			t.Errorf("outcome %s, want abandoned", ev.Outcome)
		}
	})
}

func TestCost(t *testing.T) {
	f := newFixture(t, Options{Limits: []Limit{{Policy: perUser, Key: mustKey(t, "header:X-User-Id"), Cost: 3}}})
	var remaining []string
	for range 4 {
		remaining = append(remaining, f.do("/", "X-User-Id: u1").Header().Get(HeaderRemaining))
	}
	if diff := testdiff.Diff([]string{"7", "4", "1", "1"}, remaining); diff != "" {
		t.Errorf("remaining (-want +got):\n%s", diff)
	}
}

func TestKeySources(t *testing.T) {
	// Each request's key, as the store sees it, for one limit per source.
	tests := []struct {
		spec   []string
		target string
		header string
		want   string // StateKey parts, joined by "|"
	}{
		{[]string{"header:x-user-id"}, "/", "X-User-Id:  u1 ", "u1"},
		{[]string{"query:user"}, "/p?a=1&user=%20u%2B2+&user=u3", "", "u+2"},
		{[]string{"ip"}, "/", "", "192.0.2.1"},
		{[]string{"route"}, "/", "", "api"},
		{[]string{"path"}, "/v1/items?x=1", "", "/v1/items"},
		{[]string{"const:global"}, "/", "", "global"},
		{[]string{"header:X-User-Id", "path"}, "/a", "X-User-Id: u1", "u1|/a"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.spec, ","), func(t *testing.T) {
			f := newFixture(t, Options{Limits: []Limit{{ID: "k", Policy: perUser, Key: mustKey(t, tt.spec...)}}})
			if w := f.do(tt.target, tt.header); w.Code != 200 {
				t.Fatalf("status %d", w.Code)
			}
			want := StateKey("api", "k", "per-user", strings.Split(tt.want, "|"))
			if diff := testdiff.Diff([]string{want}, f.store.keys()); diff != "" {
				t.Errorf("state keys (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRoutesKeepSeparateBudgets(t *testing.T) {
	clock := kit.NewManualClock(t0)
	store := newTestStore(t, clock)
	one := ratelimit.MustPolicy(ratelimit.PolicyConfig{Name: "one", Algorithm: ratelimit.FixedWindow, Limit: 1, Window: time.Hour})
	ok := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	var hs []http.Handler
	for _, route := range []string{"a", "b"} {
		m, err := New(Options{Route: route, Store: store, Clock: clock, Limits: []Limit{{Policy: one, Key: mustKey(t, "const:x")}}})
		if err != nil {
			t.Fatal(err)
		}
		hs = append(hs, m.Handler(ok))
	}
	for i, want := range []int{200, 200, 429, 429} {
		w := httptest.NewRecorder()
		hs[i%2].ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
		if w.Code != want {
			t.Errorf("request %d: %d, want %d", i, w.Code, want)
		}
	}
}

func TestNewValidates(t *testing.T) {
	store := newTestStore(t, kit.NewManualClock(t0))
	k := mustKey(t, "ip")
	tests := []struct {
		name string
		o    Options
		want []string // substrings of the error, one per problem
	}{
		{"no store", Options{}, []string{"store is required"}},
		{"no policy, no key", Options{Store: store, Limits: []Limit{{}}}, []string{"limits[0]: policy is required", "limits[0]: key is required"}},
		{"cost above capacity", Options{Store: store, Limits: []Limit{{Policy: perUser, Key: k, Cost: 11}}}, []string{`cost 11 above the 10 of policy "per-user"`}},
		{"cost above an override", Options{Store: store, Limits: []Limit{{Policy: vip, Key: k, Cost: 11, Overrides: map[string]*ratelimit.Policy{"a": perUser}}}}, []string{`overrides["a"]: cost 11`}},
		{"overrides on a list key", Options{Store: store, Limits: []Limit{{Policy: perUser, Key: mustKey(t, "ip", "path"), Overrides: map[string]*ratelimit.Policy{"a": vip}}}}, []string{"single-part keys"}},
		{"duplicate id", Options{Store: store, Limits: []Limit{{ID: "1", Policy: perUser, Key: k}, {Policy: perUser, Key: k}}}, []string{`limits[1]: id "1" already used by limits[0]`}},
		{"bad part and plan", Options{Store: store, Limits: []Limit{{Policy: perUser, Key: Key{{Source: SourceHeader}}, Plans: &Plans{Policies: map[string]*ratelimit.Policy{"x": nil}}}}}, []string{"key[0]: invalid part", "plans.from", `plans.policies["x"]: policy is nil`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.o)
			if !errors.Is(err, ErrInvalidOptions) {
				t.Fatalf("New = %v, want ErrInvalidOptions", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if got := strings.Count(err.Error(), "\n") + 1; got != len(tt.want) {
				t.Errorf("%d problems reported, want %d: %v", got, len(tt.want), err)
			}
		})
	}
}

func TestWriteProblem(t *testing.T) {
	for _, status := range []int{404, 502, 504, 431} {
		w := httptest.NewRecorder()
		WriteProblem(w, status, "Details here.")
		txt := http.StatusText(status)
		want := `{"type":"about:blank","title":"` + txt + `","status":` + strconv.Itoa(status) + `,"detail":"Details here.","error":"` + txt + `","message":"Details here."}`
		if w.Code != status || w.Body.String() != want || w.Header().Get("Content-Type") != "application/problem+json" {
			t.Errorf("WriteProblem(%d) = %d %s %s, want %s", status, w.Code, w.Header().Get("Content-Type"), w.Body, want)
		}
	}
}

// TestPolicyFieldFormattedOnce: the RateLimit-Policy value formatted when
// the middleware is built serves only requests whose limits all decided
// under their own policies; an override, a skipped limit or a shadow limit
// gets the value of what was decided, and the next plain request the
// formatted one again.
func TestPolicyFieldFormattedOnce(t *testing.T) {
	f := newFixture(t, Options{Limits: []Limit{
		{Policy: hourly, Key: mustKey(t, "const:global")},
		{Policy: perUser, Key: mustKey(t, "header:X-User-Id"), OnEmptyKey: EmptyKeySkip, Overrides: map[string]*ratelimit.Policy{"big": vip}},
		{Policy: free, Key: mustKey(t, "const:global"), Shadow: true},
	}})
	both := `"hourly";q=100;w=3600, "per-user";q=10;w=10`
	for i, tt := range []struct {
		header string
		want   string
	}{
		{"X-User-Id: a", both},
		{"X-User-Id: big", `"hourly";q=100;w=3600, "vip";q=100;w=10`},
		{"X-Other: 1", `"hourly";q=100;w=3600`},
		{"X-User-Id: b", both},
	} {
		w := f.do("/", tt.header)
		if got := w.Header().Get(HeaderRateLimitPolicy); got != tt.want {
			t.Errorf("request %d (%s): RateLimit-Policy %q, want %q", i, tt.header, got, tt.want)
		}
	}
	if want := `"hourly";q=100;w=3600, "per-user";q=10;w=10`; string(f.m.policyField) != want {
		t.Errorf("formatted field %q, want %q", f.m.policyField, want)
	}
}
