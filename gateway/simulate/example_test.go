package simulate_test

import (
	"fmt"
	"log"
	"time"

	"github.com/sluice-gw/sluice/gateway/simulate"
	"github.com/sluice-gw/sluice/ratelimit"
)

// A token bucket of capacity 5 refilled at 1 token a second, offered 3
// requests a second for 4 seconds: it passes its burst, then the refill
// rate. Report.WriteText and Report.WriteChart print the same report as
// `sluice simulate` does.
func Example() {
	p, err := ratelimit.NewPolicy(ratelimit.PolicyConfig{Algorithm: ratelimit.TokenBucket, Capacity: 5, Rate: 1})
	if err != nil {
		log.Fatal(err)
	}
	sim := simulate.Simulation{
		Pattern: simulate.Pattern{Kind: simulate.Steady, RPS: 3, Duration: 4 * time.Second},
		Specs:   []simulate.Spec{{Label: simulate.Label(p), Policy: p}},
	}
	rep, err := sim.Run()
	if err != nil {
		log.Fatal(err)
	}
	s := rep.Summaries[0]
	fmt.Printf("%s: %d requests, %d admitted, %d denied\n", s.Label, s.Requests, s.Admitted, s.Denied)
	for _, b := range rep.Timelines[0] {
		fmt.Printf("%v: %d admitted\n", b.Start, b.Admitted)
	}
	// Output:
	// token_bucket: 12 requests, 8 admitted, 4 denied
	// 0s: 3 admitted
	// 1s: 3 admitted
	// 2s: 1 admitted
	// 3s: 1 admitted
}
