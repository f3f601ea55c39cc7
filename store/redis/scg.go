package redis

import (
	"context"
	"errors"
	"fmt"

	"github.com/sluice-gw/sluice/ratelimit"
)

// Limits of policies with compat scg or scg-4.1 ([ratelimit.CompatSCG],
// [ratelimit.CompatSCG41]) keep Spring Cloud Gateway's own keys, so that SCG
// instances read and write the same budget: Request.Key,
// "request_rate_limiter.{<route id>.<id>}" or "request_rate_limiter.{<id>}"
// (httplimit builds it from the key resolver's value), followed by ".tokens"
// and ".timestamp".
// They get neither the store's prefix nor a hashed tag. Their step is
// scg_token_bucket.lua's, algorithm code 8, whose max_delay argument carries
// the whole tokens added per second.
var scgSpec = spec{"8", []string{".tokens", ".timestamp"}}

// errSCGSlots reports a request whose limits include a compat scg limit and
// keys in more than one Redis Cluster hash slot.
var errSCGSlots = errors.New("redis store: a request with a compat scg limit must keep all its limits in one Redis Cluster hash slot")

// errSCGSplit reports a key value that puts SCG's two keys in different
// Redis Cluster hash slots: one starting with '}', which leaves the hash tag
// empty, so that Redis hashes each whole key. SCG's own script fails on
// such a value too.
var errSCGSplit = errors.New("redis store: the key value puts Spring Cloud Gateway's two keys in different Redis Cluster hash slots")

// checkSCGSlots returns an error unless a Cluster can run reqs in one
// script call: each compat scg limit's two keys in one slot, and every
// limit in the same slot.
func checkSCGSlots(reqs []ratelimit.Request) error {
	for i := range reqs {
		if k := reqs[i].Key; isSCG(reqs[i].Policy) && keySlot(k+scgSpec.suffixes[0]) != keySlot(k+scgSpec.suffixes[1]) {
			return errSCGSplit
		}
	}
	if len(reqs) > 1 && len(slotGroups(reqs)) > 1 {
		return fmt.Errorf("%w (%d limits)", errSCGSlots, len(reqs))
	}
	return nil
}

// isSCG reports whether r's policy follows SCG's layout.
func isSCG(p *ratelimit.Policy) bool { return p.Compat().SCG() }

// hasSCG reports whether any of reqs has a compat scg policy.
func hasSCG(reqs []ratelimit.Request) bool {
	for i := range reqs {
		if isSCG(reqs[i].Policy) {
			return true
		}
	}
	return false
}

// limitKeys returns the Redis keys of one limit.
func limitKeys(prefix string, r ratelimit.Request) []string {
	if isSCG(r.Policy) {
		return []string{r.Key + scgSpec.suffixes[0], r.Key + scgSpec.suffixes[1]}
	}
	return appendKeys(nil, prefix, tag(r.Key), specOf(r.Policy))
}

// reqSlot returns the Redis Cluster hash slot of r's keys.
func reqSlot(r ratelimit.Request) uint16 {
	if isSCG(r.Policy) {
		return keySlot(r.Key + scgSpec.suffixes[0])
	}
	return slot(tag(r.Key))
}

// evaluateSCG decides a request with a compat scg limit: one mode 'e' run
// of main.lua, never combined with other requests (batch.go) nor split by
// slot.
func (s *Store) evaluateSCG(ctx context.Context, reqs []ratelimit.Request, out []ratelimit.Decision) (bool, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	c, err := s.client(ctx)
	if err != nil {
		return false, err
	}
	if c.cluster {
		if err := checkSCGSlots(reqs); err != nil {
			return false, err
		}
	}
	cl := s.newCall(modeEvaluate, s.now(), reqs, nil)
	overall, reps, err := s.run(ctx, c, cl, len(reqs), nil)
	if err != nil {
		return false, err
	}
	for i := range reqs {
		out[i] = reps[i].decision(reqs[i].Policy)
	}
	return overall, nil
}
