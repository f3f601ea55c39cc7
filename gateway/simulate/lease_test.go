package simulate

import (
	"slices"
	"testing"
	"time"

	"github.com/sluice-gw/sluice/ratelimit"
)

// TestConcurrencyPattern: requests that stay in flight for their hold are
// limited by how many run at once, not by their rate: at 10/s, each running
// 2s, a limit of 5 admits 5 in the first second, none in the second (all
// five still run), 5 again once they end, and never more than 5 at once.
func TestConcurrencyPattern(t *testing.T) {
	p := ratelimit.MustPolicy(ratelimit.PolicyConfig{Name: "cc", Algorithm: ratelimit.Concurrency, Limit: 5, LeaseTTL: time.Second})
	for _, tc := range []struct {
		hold      time.Duration
		perSecond []int64
		most      int64
	}{
		{2 * time.Second, []int64{5, 0, 5, 0, 5}, 5},
		// 250ms holds: at most 3 run at once (100ms apart), all admitted.
		{250 * time.Millisecond, []int64{10, 10, 10, 10, 10}, 3},
		// A hold of 1.5s, longer than the policy's lease TTL (1s): the
		// gateway renews leases, so none expires under a running request: the
		// five of 0-0.4s end at 1.5-1.9s, making room for five more then.
		{1500 * time.Millisecond, []int64{5, 5, 0, 5, 5}, 5},
	} {
		t.Run(tc.hold.String(), func(t *testing.T) {
			rep, err := Simulation{
				Pattern: Pattern{Kind: Steady, RPS: 10, Duration: 5 * time.Second, Hold: tc.hold},
				Specs:   []Spec{{Label: "cc", Policy: p}},
			}.Run()
			if err != nil {
				t.Fatal(err)
			}
			var got []int64
			for _, b := range rep.Timelines[0] {
				got = append(got, b.Admitted)
			}
			if !slices.Equal(got, tc.perSecond) {
				t.Errorf("admitted per second = %v, want %v", got, tc.perSecond)
			}
			s := rep.Summaries[0]
			if s.MaxInFlight != tc.most {
				t.Errorf("max in flight = %d, want %d", s.MaxInFlight, tc.most)
			}
			if s.WronglyAllowed != 0 || s.WronglyDenied != 0 {
				t.Errorf("wrongly allowed %d, wrongly denied %d; want none against the exact in-flight count", s.WronglyAllowed, s.WronglyDenied)
			}
		})
	}
}

func TestPatternHoldNegative(t *testing.T) {
	if _, err := (Pattern{Kind: Steady, RPS: 1, Duration: time.Second, Hold: -time.Second}).Events(); err == nil {
		t.Error("Events() with a negative hold = nil error")
	}
}
