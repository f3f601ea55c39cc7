package kit

import (
	"errors"

	"github.com/sluice-gw/sluice/ratelimit"
)

var (
	errShortOut  = errors.New("ratelimit: out is shorter than reqs")
	errNilPolicy = errors.New("ratelimit: request with nil policy")
	errNoLease   = errors.New("ratelimit: concurrency request without a lease id")
)

// CheckRequests validates what a Store is given: a non-nil policy and a cost
// within it for every request, and room in out. Stores call it first; it
// returns an error wrapping [ratelimit.ErrInvalidCost] for a cost outside
// 1..Max().
func CheckRequests(reqs []ratelimit.Request, out []ratelimit.Decision) error {
	if len(out) < len(reqs) {
		return errShortOut
	}
	for i := range reqs {
		if reqs[i].Policy == nil {
			return errNilPolicy
		}
		if err := reqs[i].Policy.CheckCost(Cost(reqs[i])); err != nil {
			return err
		}
	}
	return nil
}

// Cost returns r's cost with the default applied: r.Cost, or 1 when it is 0.
func Cost(r ratelimit.Request) int64 {
	if r.Cost == 0 {
		return 1
	}
	return r.Cost
}

// CheckLeases reports an error for a concurrency request without a lease
// id: Evaluate cannot take a lease nobody could release. Peek and Reset
// need no id.
func CheckLeases(reqs []ratelimit.Request) error {
	for i := range reqs {
		if reqs[i].Policy.IsConcurrency() && reqs[i].Lease == "" {
			return errNoLease
		}
	}
	return nil
}
