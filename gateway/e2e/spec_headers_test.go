package e2e

import (
	"regexp"
	"strconv"
	"testing"
	"time"
)

// TestSpecMultiLimitHeaders checks the headers of docs/semantics.md §5 on a route with three
// limits and a shadow one: RateLimit-Policy and RateLimit list every
// non-shadow limit, in order, in draft-ietf-httpapi-ratelimit-headers-10
// syntax; the X-RateLimit-* trio describes the lowest remaining (first in
// order on a tie) and, on a denial by two limits, the one with the longest
// retry_after, which Retry-After matches.
func TestSpecMultiLimitHeaders(t *testing.T) {
	t.Parallel()
	up := newUpstream(t)
	p := start(t, `store: {type: memory}`+header+`
policies:
  wide:   {algorithm: token_bucket, capacity: 10, rate: 0.01}    # w = ceil(10/0.01) = 1000
  hourly: {algorithm: sliding_log,  limit: 3,     window: 1h}    # w = 3600
  burst:  {algorithm: token_bucket, capacity: 3,  rate: 0.25}    # w = 12; one token per 4 s
  frac:   {algorithm: fixed_window, limit: 50,    window: 1500ms} # w rounds up to 2
  ghost:  {algorithm: fixed_window, limit: 1,     window: 1h}
routes:
  - id: multi
    match: {path: /multi}
    upstream: `+up.URL+`
    limits:
      - {policy: wide,   key: header:X-User-Id}
      - {policy: ghost,  key: header:X-User-Id, shadow: true}
      - {policy: hourly, key: header:X-User-Id}
      - {policy: burst,  key: header:X-User-Id}
      - {policy: frac,   key: const:all}
`)
	const wantPolicy = `"wide";q=10;w=1000, "hourly";q=3;w=3600, "burst";q=3;w=12, "frac";q=50;w=2`
	user := []string{"X-User-Id", "h1"}
	near := func(t *testing.T, name, value string, want time.Time, slack time.Duration) {
		t.Helper()
		n, err := strconv.ParseInt(value, 10, 64)
		if err != nil {
			t.Errorf("%s = %q, want Unix seconds", name, value)
			return
		}
		if got := time.Unix(n, 0); got.Before(want.Add(-slack)) || got.After(want.Add(slack)) {
			t.Errorf("%s = %d (%v), want about %v", name, n, got.UTC(), want.UTC())
		}
	}
	// Three admitted requests: wide 9,8,7; hourly and burst 2,1,0.
	for i := range 3 {
		sent := time.Now()
		r := get(t, p.base+"/multi", user...)
		if r.code != 200 {
			t.Fatalf("request %d: %d %s", i+1, r.code, r.body)
		}
		if got := r.header.Values("RateLimit-Policy"); len(got) != 1 || got[0] != wantPolicy {
			t.Errorf("request %d: RateLimit-Policy = %q, want %q", i+1, got, wantPolicy)
		}
		left := 2 - i
		want := regexp.MustCompile(`^"wide";r=` + strconv.Itoa(9-i) + `;t=0, "hourly";r=` + strconv.Itoa(left) + `;t=(\d+), "burst";r=` +
			strconv.Itoa(left) + `;t=(\d+), "frac";r=\d+;t=0$`)
		got := r.header.Values("RateLimit")
		m := want.FindStringSubmatch(r.header.Get("RateLimit"))
		if len(got) != 1 || m == nil {
			t.Errorf("request %d: RateLimit = %q, want to match %s", i+1, got, want)
		} else if left > 0 && (m[1] != "0" || m[2] != "0") {
			t.Errorf("request %d: RateLimit = %q, want t=0 while quota is left", i+1, got)
		} else if left == 0 {
			// Nothing left: hourly frees a unit when the first entry
			// leaves (about an hour), burst in at most 4 s.
			if h, _ := strconv.Atoi(m[1]); h < 3500 || h > 3600 {
				t.Errorf("request 3: hourly t=%d, want about 3600", h)
			}
			if b, _ := strconv.Atoi(m[2]); b < 1 || b > 4 {
				t.Errorf("request 3: burst t=%d, want 1 to 4", b)
			}
		}
		// The trio: hourly and burst tie on the lowest remaining; hourly
		// comes first. Its Reset is about an hour away (burst's seconds).
		if r.header.Get("X-RateLimit-Limit") != "3" || r.header.Get("X-RateLimit-Remaining") != strconv.Itoa(left) {
			t.Errorf("request %d: X-RateLimit-Limit %q, -Remaining %q; want 3 and %d (hourly)", i+1,
				r.header.Get("X-RateLimit-Limit"), r.header.Get("X-RateLimit-Remaining"), left)
		}
		near(t, "X-RateLimit-Reset", r.header.Get("X-RateLimit-Reset"), sent.Add(time.Hour), time.Minute)
		if r.header.Get("Retry-After") != "" {
			t.Errorf("request %d: an admitted request carries Retry-After %q", i+1, r.header.Get("Retry-After"))
		}
	}
	// The fourth is denied by hourly (retry about 3600 s) and burst (at most
	// 4 s); wide would admit and reports its remaining unchanged.
	sent := time.Now()
	r := get(t, p.base+"/multi", user...)
	check429(t, r, "hourly", "burst")
	ra, _ := strconv.Atoi(r.header.Get("Retry-After"))
	if ra < 3500 || ra > 3600 {
		t.Errorf("Retry-After = %d, want about 3600 (the longest retry_after, hourly's)", ra)
	}
	if r.header.Get("X-RateLimit-Limit") != "3" || r.header.Get("X-RateLimit-Remaining") != "0" {
		t.Errorf("denial: X-RateLimit-Limit %q, -Remaining %q; want hourly's 3 and 0", r.header.Get("X-RateLimit-Limit"), r.header.Get("X-RateLimit-Remaining"))
	}
	near(t, "X-RateLimit-Reset on the denial", r.header.Get("X-RateLimit-Reset"), sent.Add(time.Hour), time.Minute)
	if got := r.header.Get("RateLimit-Policy"); got != wantPolicy {
		t.Errorf("denial: RateLimit-Policy = %q, want %q", got, wantPolicy)
	}
	want := regexp.MustCompile(`^"wide";r=7;t=0, "hourly";r=0;t=` + strconv.Itoa(ra) + `, "burst";r=0;t=[1-4], "frac";r=\d+;t=0$`)
	if got := r.header.Get("RateLimit"); !want.MatchString(got) {
		t.Errorf("denial: RateLimit = %q, want to match %s (hourly's t = Retry-After)", got, want)
	}
}
