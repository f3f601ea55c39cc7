package main

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"time"

	"github.com/sluice-gw/sluice/ratelimit"
	"github.com/sluice-gw/sluice/store/redis"
)

// sluicePolicy is the token bucket every sluice decision uses.
var sluicePolicy = ratelimit.MustPolicy(ratelimit.PolicyConfig{
	Name: "bench", Algorithm: ratelimit.TokenBucket, Capacity: bucketCapacity, Rate: bucketRate,
})

// newSluiceStore connects sluice's Redis store to addr. The timeout is
// generous: on two shared cores a tight one would turn CPU contention into
// errors rather than latency.
func newSluiceStore(addr string) (*redis.Store, error) {
	s, err := redis.New(redis.Options{Mode: "standalone", Addrs: []string{addr}, Prefix: "sluice", Timeout: 5 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("sluice store: %w", err)
	}
	return s, nil
}

func openSluice(ctx context.Context, e *env) (*target, error) {
	s, err := newSluiceStore(e.addr)
	if err != nil {
		return nil, err
	}
	return &target{
		newWorker: func() decideFunc {
			reqs := []ratelimit.Request{{Policy: sluicePolicy, Cost: 1}}
			out := make([]ratelimit.Decision, 1)
			return func(ctx context.Context, i int) (bool, error) {
				reqs[0].Key = e.keys[i]
				return s.Evaluate(ctx, reqs, out)
			}
		},
		allowedKnown: true,
		close:        func() { s.Close() },
	}, nil
}

// sluiceTag returns the hash tag sluice's store puts in the Redis keys of a
// request key (store/redis keys.go: the first 16 bytes of SHA-256 in
// unpadded base64url). captureSluiceCall finds the store's call by this tag,
// so a change of layout in the store fails the capture loudly instead of
// replaying other keys.
func sluiceTag(key string) string {
	sum := sha256.Sum256([]byte(key))
	return base64.RawURLEncoding.EncodeToString(sum[:16])
}

// captureSluiceCall makes one decision through sluice's store on probeKey
// while watching MONITOR and returns the script call the store sent, so the
// other clients and redis-benchmark replay exactly what sluice sends.
func captureSluiceCall(ctx context.Context, addr string) (*scriptCall, error) {
	s, err := newSluiceStore(addr)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	return captureScriptCall(ctx, addr, sluiceTag(probeKey), func(ctx context.Context) error {
		reqs := []ratelimit.Request{{Key: probeKey, Policy: sluicePolicy, Cost: 1}}
		out := make([]ratelimit.Decision, 1)
		allowed, err := s.Evaluate(ctx, reqs, out)
		if err == nil && !allowed {
			err = fmt.Errorf("first decision on an empty bucket was a denial: %+v", out[0])
		}
		return err
	})
}
