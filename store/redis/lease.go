package redis

import (
	"context"

	"strconv"

	"github.com/redis/rueidis"

	"github.com/sluice-gw/sluice/ratelimit"
)

var _ ratelimit.LeaseStore = (*Store)(nil)

// Release gives back each request's lease: one ZREM of its id from the
// key's sorted set (lua/concurrency.lua), which does nothing for a lease
// that is not held, so a release is safe to send again. Each command names
// one key, so on Cluster each goes to the node serving it.
func (s *Store) Release(ctx context.Context, reqs []ratelimit.Request) error {
	reqs = ratelimit.LeasesOf(reqs)
	if len(reqs) == 0 {
		return nil
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	c, err := s.client(ctx)
	if err != nil {
		return err
	}
	cmds := make(rueidis.Commands, len(reqs))
	for i, r := range reqs {
		cmds[i] = c.c.B().Zrem().Key(s.leaseKey(r)).Member(r.Lease).Build()
	}
	for _, res := range c.c.DoMulti(ctx, cmds...) {
		if err := res.Error(); err != nil {
			return wrap("release", err)
		}
	}
	return nil
}

// Renew extends each request's lease that is still held to its policy's
// lease TTL from Redis' TIME (lua/renew.lua; one run per lease, since on
// Cluster the keys may sit in different slots).
func (s *Store) Renew(ctx context.Context, reqs []ratelimit.Request) error {
	reqs = ratelimit.LeasesOf(reqs)
	if len(reqs) == 0 {
		return nil
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	c, err := s.client(ctx)
	if err != nil {
		return err
	}
	now := s.now()
	for _, r := range reqs {
		args := []string{now, r.Lease, strconv.FormatInt(r.Policy.LeaseTTL().Microseconds(), 10)}
		if err := renewScript.Exec(ctx, c.c, []string{s.leaseKey(r)}, args).Error(); err != nil {
			return wrap("renew", err)
		}
	}
	return nil
}

// leaseKey is the Redis key of r's leases.
func (s *Store) leaseKey(r ratelimit.Request) string {
	return appendKeys(nil, s.prefix, tag(r.Key), specOf(r.Policy))[0]
}
