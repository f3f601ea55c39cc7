package ratelimittest_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/sluice-gw/sluice/ratelimit"
	"github.com/sluice-gw/sluice/ratelimit/kit"
	"github.com/sluice-gw/sluice/ratelimit/ratelimittest"
)

// refStore is the simplest correct Store: one map under one mutex over
// kit.StepAt, with keys expiring after their TTL. It lets the suite run
// without any real store, and is the base of the broken stores below.
type refStore struct {
	clock ratelimit.Clock
	mu    sync.Mutex
	m     map[string]refEntry
	bug   string // see brokenStores
}

type refEntry struct {
	s       kit.State
	expires int64 // µs
}

var _ ratelimit.Store = (*refStore)(nil)

func newRefStore(clock ratelimit.Clock) *refStore {
	return &refStore{clock: clock, m: map[string]refEntry{}}
}

func (r *refStore) now() int64 {
	if r.bug == "system_clock" {
		return time.Now().UnixMicro()
	}
	return r.clock.Now().UnixMicro()
}

func (r *refStore) load(key string, now int64) kit.State {
	e, ok := r.m[key]
	if !ok || (now >= e.expires && r.bug != "no_expiry") {
		return kit.State{}
	}
	return e.s
}

func (r *refStore) Evaluate(_ context.Context, reqs []ratelimit.Request, out []ratelimit.Decision) (bool, error) {
	if err := kit.CheckRequests(reqs, out); err != nil {
		return false, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	if r.bug == "caller_clock_skew" {
		now += 1000 // a gateway clock 1ms ahead of the store's
	}
	next := make([]kit.State, len(reqs))
	admitted := true
	for i, q := range reqs {
		next[i], out[i] = stepCopy(q.Policy, r.load(q.Key, now), now, kit.Cost(q))
		if !out[i].Allowed && !q.Shadow {
			admitted = false
		}
	}
	for i, q := range reqs {
		switch {
		case admitted && out[i].Allowed, r.bug == "consume_on_denial" && out[i].Allowed:
			ttl := kit.TTL(out[i]).Microseconds()
			if r.bug == "short_ttl" {
				ttl = min(ttl, q.Policy.Period().Microseconds())
			}
			r.m[q.Key] = refEntry{s: next[i], expires: now + ttl}
		case out[i].Allowed && r.bug != "report_after":
			out[i] = kit.PeekAt(q.Policy, r.load(q.Key, now), now, kit.Cost(q))
		}
	}
	if r.bug == "shadow_denies" {
		for i, q := range reqs {
			if q.Shadow && !out[i].Allowed {
				admitted = false
			}
		}
	}
	return admitted, nil
}

func (r *refStore) Peek(_ context.Context, reqs []ratelimit.Request, out []ratelimit.Decision) error {
	if err := kit.CheckRequests(reqs, out); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	for i, q := range reqs {
		if r.bug == "peek_is_step" {
			_, out[i] = stepCopy(q.Policy, r.load(q.Key, now), now, kit.Cost(q))
			continue
		}
		out[i] = kit.PeekAt(q.Policy, r.load(q.Key, now), now, kit.Cost(q))
	}
	return nil
}

func (r *refStore) Reset(_ context.Context, reqs []ratelimit.Request) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, q := range reqs {
		if r.bug != "reset_noop" {
			delete(r.m, q.Key)
		}
	}
	return nil
}

func TestReferenceStore(t *testing.T) {
	ratelimittest.Run(t, func(t *testing.T, clock ratelimit.Clock) ratelimit.Store {
		return newRefStore(clock)
	})
}

// brokenStores maps each bug refStore can simulate to whether the suite must
// still pass: it fails on every real bug, and passes on a store that never
// expires keys (expiry only frees memory; an expired state equals no state).
var brokenStores = map[string]bool{
	"no_expiry":         true,
	"consume_on_denial": false, // a limit that admits consumes although another denied
	"short_ttl":         false, // state dropped before it is equivalent to no state
	"report_after":      false, // on a denied request, reports what the admitting limit would have left after it
	"shadow_denies":     false,
	"peek_is_step":      false, // Peek reports remaining after the peeked cost
	"reset_noop":        false,
	"caller_clock_skew": false, // decides on a clock 1ms off the store's
	"system_clock":      false, // ignores the clock it was given
}

// TestBrokenStore runs the suite against refStore with the bug named in
// $RATELIMITTEST_BUG; TestSuiteCatchesBrokenStores runs it in a subprocess.
func TestBrokenStore(t *testing.T) {
	bug := os.Getenv("RATELIMITTEST_BUG")
	if bug == "" {
		t.Skip("run by TestSuiteCatchesBrokenStores")
	}
	ratelimittest.RunWith(t, func(t *testing.T, clock ratelimit.Clock) ratelimit.Store {
		s := newRefStore(clock)
		s.bug = bug
		return s
	}, ratelimittest.Options{PropertyChecks: 20})
}

// TestSuiteCatchesBrokenStores shows that the suite can fail: each broken
// store must fail it, and the harmless variation must pass.
func TestSuiteCatchesBrokenStores(t *testing.T) {
	if os.Getenv("RATELIMITTEST_BUG") != "" {
		t.Skip("inside a broken-store run")
	}
	for bug, wantPass := range brokenStores {
		t.Run(bug, func(t *testing.T) {
			t.Parallel()
			cmd := exec.Command(os.Args[0], "-test.run=^TestBrokenStore$", "-test.count=1", "-rapid.nofailfile")
			cmd.Dir = t.TempDir()
			cmd.Env = append(os.Environ(), "RATELIMITTEST_BUG="+bug)
			out, err := cmd.CombinedOutput()
			if passed := err == nil; passed != wantPass {
				if len(out) > 3000 {
					out = out[len(out)-3000:]
				}
				t.Errorf("suite against a store with bug %q: passed = %v, want %v\n%s", bug, passed, wantPass, out)
			} else if !wantPass && !bytes.Contains(out, []byte("--- FAIL")) {
				t.Errorf("suite against a store with bug %q exited with %v but reported no failing test:\n%s", bug, err, out)
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
