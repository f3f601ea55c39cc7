package keysource

import (
	"context"

	"github.com/sluice-gw/sluice/ratelimit"
)

var policy = ratelimit.MustPolicy(ratelimit.PolicyConfig{Name: "p", Algorithm: ratelimit.TokenBucket, Capacity: 10, Rate: 1})

// nopStore is a Store for a middleware whose KeyOf alone is used.
type nopStore struct{ ratelimit.Store }

func (nopStore) Evaluate(context.Context, []ratelimit.Request, []ratelimit.Decision) (bool, error) {
	return true, nil
}
