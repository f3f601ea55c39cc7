package redis

import (
	"slices"
	"testing"
	"time"

	"github.com/sluice-gw/sluice/ratelimit"
)

// TestShortReply: shortReply inverts core.lua's short integer
// -1 - (remaining·2^33 + reset) over its whole range.
func TestShortReply(t *testing.T) {
	for _, c := range []struct{ remaining, reset int64 }{
		{0, 0}, {0, 1}, {1, 0}, {99, 100000}, {1<<20 - 1, 1<<33 - 1}, {12345, 1 << 32},
	} {
		v := -1 - (c.remaining<<33 + c.reset)
		got := shortReply(v)
		if !got.allowed || got.remaining != c.remaining || got.reset != c.reset || got.retry != 0 || got.delay != 0 || got.next != 0 {
			t.Errorf("shortReply(%d) = %+v, want allowed, remaining %d, reset %d", v, got, c.remaining, c.reset)
		}
	}
}

// TestLoneArgs: loneArgs sends the 5-argument form exactly for a mode 'e'
// request with one limit in police mode without max_delay that is not a
// sliding log, and leaves every other call's arguments as they are.
func TestLoneArgs(t *testing.T) {
	s := &Store{prefix: "p"}
	tb := ratelimit.MustPolicy(ratelimit.PolicyConfig{Name: "tb", Algorithm: ratelimit.TokenBucket, Capacity: 100, Rate: 10})
	sl := ratelimit.MustPolicy(ratelimit.PolicyConfig{Name: "sl", Algorithm: ratelimit.SlidingLog, Limit: 5, Window: time.Second})
	shape := ratelimit.MustPolicy(ratelimit.PolicyConfig{Name: "lb", Algorithm: ratelimit.LeakyBucket, Capacity: 5, Rate: 1, Mode: ratelimit.Shape})
	args := s.newCall(modeEvaluate, "", []ratelimit.Request{{Key: "a", Policy: tb, Cost: 3, Shadow: true}}, nil).args
	if got, want := loneArgs(args), []string{"1", "", "64", "186a0", "3"}; !slices.Equal(got, want) {
		t.Errorf("token bucket: %q, want %q", got, want)
	}
	for name, cl := range map[string]call{
		"sliding log": s.newCall(modeEvaluate, "", []ratelimit.Request{{Key: "a", Policy: sl}}, nil),
		"shape":       s.newCall(modeEvaluate, "", []ratelimit.Request{{Key: "a", Policy: shape}}, nil),
		"peek":        s.newCall(modePeek, "", []ratelimit.Request{{Key: "a", Policy: tb}}, nil),
		"two limits":  s.newCall(modeEvaluate, "", []ratelimit.Request{{Key: "a", Policy: tb}, {Key: "b", Policy: tb}}, nil),
	} {
		if got := loneArgs(cl.args); !slices.Equal(got, cl.args) {
			t.Errorf("%s: %q, want the arguments unchanged %q", name, got, cl.args)
		}
	}
}
