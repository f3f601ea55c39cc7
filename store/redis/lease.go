package redis

import (
	"cmp"
	"context"
	"slices"
	"strconv"
	"strings"

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

// renewChunk is the most leases one renew.lua run renews: a hundred, each
// on a key of its own, keep a run under half a millisecond inside Redis
// (TestRenewChunkTime), so renewing thousands of leases never holds Redis
// for long.
const renewChunk = 100

// Renew extends each request's lease to its policy's lease TTL from Redis'
// TIME, adding back a lease its key no longer has (lua/renew.lua), and
// returns how many were added back. The leases are sorted by key and sent
// in runs of at most renewChunk, each run's keys in one Cluster hash slot;
// the runs go concurrently, so the client pipelines them (one round trip
// per node). On an error the runs that succeeded stand and the first error
// is returned.
func (s *Store) Renew(ctx context.Context, reqs []ratelimit.Request) (int, error) {
	reqs = ratelimit.LeasesOf(reqs)
	if len(reqs) == 0 {
		return 0, nil
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	c, err := s.client(ctx)
	if err != nil {
		return 0, err
	}
	runs := renewRuns(s, reqs, c.cluster)
	type result struct {
		n   int64
		err error
	}
	results := make(chan result, len(runs))
	for _, run := range runs {
		go func() {
			n, err := renewScript.Exec(ctx, c.c, run.keys, run.args).AsInt64()
			results <- result{n, err}
		}()
	}
	readded, first := 0, error(nil)
	for range runs {
		r := <-results
		readded += int(r.n)
		if r.err != nil && first == nil {
			first = wrap("renew", r.err)
		}
	}
	return readded, first
}

// renewRun is the keys and arguments of one renew.lua run.
type renewRun struct{ keys, args []string }

// renewRuns splits reqs (leases) into renew.lua runs: sorted by slot (when
// cluster) and key, at most renewChunk leases a run, a run never spanning
// two slots.
func renewRuns(s *Store, reqs []ratelimit.Request, cluster bool) []renewRun {
	type lease struct {
		slot     uint16
		key, id  string
		ttlMicro int64
	}
	ls := make([]lease, len(reqs))
	for i, r := range reqs {
		k := s.leaseKey(r)
		ls[i] = lease{key: k, id: r.Lease, ttlMicro: r.Policy.LeaseTTL().Microseconds()}
		if cluster {
			ls[i].slot = keySlot(k)
		}
	}
	slices.SortFunc(ls, func(a, b lease) int {
		return cmp.Or(cmp.Compare(a.slot, b.slot), strings.Compare(a.key, b.key))
	})
	now := s.now()
	var runs []renewRun
	for i, l := range ls {
		if i == 0 || l.slot != ls[i-1].slot || len(runs[len(runs)-1].keys) == renewChunk {
			runs = append(runs, renewRun{args: []string{now}})
		}
		run := &runs[len(runs)-1]
		run.keys = append(run.keys, l.key)
		run.args = append(run.args, l.id, strconv.FormatInt(l.ttlMicro, 10))
	}
	return runs
}

// leaseKey is the Redis key of r's leases.
func (s *Store) leaseKey(r ratelimit.Request) string {
	return appendKeys(nil, s.prefix, tag(r.Key), specOf(r.Policy))[0]
}
