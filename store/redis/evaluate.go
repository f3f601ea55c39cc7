package redis

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluice-gw/sluice/ratelimit"
	"github.com/sluice-gw/sluice/ratelimit/kit"
)

// call is one script run: the requests it covers (indices into reqs), and
// its KEYS and ARGV.
type call struct {
	idx  []int
	keys []string
	args []string
}

// limitReply is one limit's part of main.lua's reply.
type limitReply struct {
	allowed, consumed        bool
	remaining, reset, retry  int64
	delay, next, extra       int64
	viewRemaining, viewReset int64
}

// Evaluate decides reqs all-or-nothing in one script run (on Cluster: one
// per hash slot the limits occupy, see the package documentation) and
// writes each limit's decision into out. It returns
// [ratelimit.ErrInvalidCost] (wrapped) for a bad request, and on a Redis
// failure an error that [ErrorKind] classifies; out is then undefined.
func (s *Store) Evaluate(ctx context.Context, reqs []ratelimit.Request, out []ratelimit.Decision) (bool, error) {
	if err := kit.CheckRequests(reqs, out); err != nil {
		return false, fmt.Errorf("redis store: %w", err)
	}
	if len(reqs) == 0 {
		return true, nil
	}
	if hasSCG(reqs) {
		return s.evaluateSCG(ctx, reqs, out)
	}
	// Standalone and Sentinel: the call may be combined with concurrent
	// ones (batch.go), which bounds its wait by the Timeout itself. A
	// call with concurrency limits is never combined: a batch shares its
	// policies' arguments between requests, and a lease id is per request.
	leases := ratelimit.HasLeases(reqs)
	if leases {
		if err := kit.CheckLeases(reqs); err != nil {
			return false, fmt.Errorf("redis store: %w", err)
		}
	}
	if c := s.cur.Load(); c != nil && !c.cluster && !leases {
		return s.evaluateCombined(ctx, c, reqs, out)
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	c, err := s.client(ctx)
	if err != nil {
		return false, err
	}
	if !c.cluster && !leases {
		return s.evaluateCombined(ctx, c, reqs, out)
	}
	now := s.now()
	if c.cluster && len(reqs) > 1 {
		if groups := slotGroups(reqs); len(groups) > 1 {
			return s.evaluateSlots(ctx, c, reqs, out, groups, now)
		}
	}
	cl := s.newCall(modeEvaluate, now, reqs, nil)
	var one [1]limitReply
	overall, reps, err := s.run(ctx, c, cl, len(reqs), one[:])
	if err != nil {
		return false, err
	}
	for i := range reqs {
		out[i] = reps[i].decision(reqs[i].Policy)
	}
	return overall, nil
}

// Peek writes each limit's current state into out without consuming
// anything: Allowed tells whether a request of the given Cost would be
// admitted, Remaining and Reset are as they stand now.
func (s *Store) Peek(ctx context.Context, reqs []ratelimit.Request, out []ratelimit.Decision) error {
	if err := kit.CheckRequests(reqs, out); err != nil {
		return fmt.Errorf("redis store: %w", err)
	}
	if len(reqs) == 0 {
		return nil
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	c, err := s.client(ctx)
	if err != nil {
		return err
	}
	if c.cluster && hasSCG(reqs) {
		if err := checkSCGSlots(reqs); err != nil {
			return err
		}
	}
	now := s.now()
	groups := [][]int{nil}
	if c.cluster && len(reqs) > 1 {
		groups = slotGroups(reqs)
	}
	calls := make([]call, len(groups))
	for g, idx := range groups {
		calls[g] = s.newCall(modePeek, now, reqs, idx)
	}
	results := s.runAll(ctx, c, calls, len(reqs))
	for g, r := range results {
		if r.err != nil {
			return r.err
		}
		for j, i := range calls[g].indices(len(reqs)) {
			out[i] = r.reps[j].decision(reqs[i].Policy)
		}
	}
	return nil
}

// Reset deletes each limit's keys, restoring its full budget.
func (s *Store) Reset(ctx context.Context, reqs []ratelimit.Request) error {
	for i := range reqs {
		if reqs[i].Policy == nil {
			return fmt.Errorf("redis store: reset: request %d has no policy", i)
		}
	}
	if len(reqs) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	c, err := s.client(ctx)
	if err != nil {
		return err
	}
	// One DEL per limit: a limit's keys share a slot, different limits may not.
	cmds := make(rueidis.Commands, 0, len(reqs))
	for _, r := range reqs {
		keys := limitKeys(s.prefix, r)
		if isSCG(r.Policy) {
			// SCG's two keys may lie in two Cluster slots (see errSCGSplit).
			for _, k := range keys {
				cmds = append(cmds, c.c.B().Del().Key(k).Build())
			}
			continue
		}
		cmds = append(cmds, c.c.B().Del().Key(keys...).Build())
	}
	for _, res := range c.c.DoMulti(ctx, cmds...) {
		if err := res.Error(); err != nil {
			return wrap("reset", err)
		}
	}
	return nil
}

// bound returns ctx limited to the store's Timeout. A ctx whose own
// deadline comes first is used as it is, which saves the timer.
func (s *Store) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	if d, ok := ctx.Deadline(); ok && time.Until(d) <= s.timeout {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, s.timeout)
}

// slotGroups returns the request indices grouped by hash slot, in order of
// first appearance.
func slotGroups(reqs []ratelimit.Request) [][]int {
	var groups [][]int
	var slots []uint16
next:
	for i, r := range reqs {
		sl := reqSlot(r)
		for g, s := range slots {
			if s == sl {
				groups[g] = append(groups[g], i)
				continue next
			}
		}
		slots = append(slots, sl)
		groups = append(groups, []int{i})
	}
	return groups
}

// indices returns the request indices a call covers.
func (cl *call) indices(n int) []int {
	if cl.idx != nil {
		return cl.idx
	}
	all := make([]int, n)
	for i := range all {
		all[i] = i
	}
	return all
}

// newCall builds the script arguments for reqs[idx] (all of reqs if idx is
// nil). The keys and numeric arguments are formatted into one buffer that
// becomes a single string every KEYS and ARGV entry slices, and KEYS and
// ARGV share one backing array: two allocations per call, whatever the
// number of limits (it runs on every decision).
func (s *Store) newCall(mode, now string, reqs []ratelimit.Request, idx []int) call {
	n := len(reqs)
	if idx != nil {
		n = len(idx)
	}
	req := func(j int) *ratelimit.Request {
		if idx != nil {
			return &reqs[idx[j]]
		}
		return &reqs[j]
	}
	var bufArr [160]byte
	var endsArr [16]int
	buf, ends := bufArr[:0], endsArr[:0]
	nkeys := 0
	for j := range n {
		r := req(j)
		p := r.Policy
		sp := specOf(p)
		if sp == &scgSpec {
			for _, suf := range sp.suffixes {
				buf = append(buf, r.Key...)
				buf = append(buf, suf...)
				ends = append(ends, len(buf))
				nkeys++
			}
		} else {
			// Hash the key from the buffer's free space: no conversion copy.
			mark := len(buf)
			buf = append(buf, r.Key...)
			sum := sha256.Sum256(buf[mark:])
			buf = buf[:mark]
			for _, suf := range sp.suffixes {
				buf = append(buf, s.prefix...)
				buf = append(buf, ":{"...)
				buf = base64.RawURLEncoding.AppendEncode(buf, sum[:tagBytes])
				buf = append(buf, "}:"...)
				buf = append(buf, suf...)
				ends = append(ends, len(buf))
				nkeys++
			}
		}
		q := kit.ParamsOf(p)
		perV := per(q)
		if p.IsConcurrency() {
			perV = p.LeaseTTL().Microseconds()
		}
		maxDelay := q.MaxDelayMicros
		if sp == &scgSpec {
			maxDelay = p.SCGRate() // scg_token_bucket.lua reads the rate there
		}
		// Hexadecimal: the script parses it with strtoul, not strtod.
		for _, v := range [...]int64{q.Max, perV, maxDelay, kit.Cost(*r)} {
			buf = strconv.AppendInt(buf, v, 16)
			ends = append(ends, len(buf))
		}
	}
	str := string(buf)
	start := 0
	next := func() string {
		v := str[start:ends[0]]
		start, ends = ends[0], ends[1:]
		return v
	}
	all := make([]string, nkeys+2+7*n)
	cl := call{idx: idx, keys: all[:0:nkeys], args: all[nkeys:nkeys]}
	cl.args = append(cl.args, mode, now)
	for j := range n {
		r := req(j)
		sp := specOf(r.Policy)
		for range sp.suffixes {
			cl.keys = append(cl.keys, next())
		}
		shape, shadow := "0", "0"
		switch {
		case r.Policy.Mode() == ratelimit.Shape:
			shape = "1"
		case r.Policy.IsConcurrency():
			shape = r.Lease // the script reads the lease id in shape's place
		}
		if r.Shadow {
			shadow = "1"
		}
		maxArg, perArg, maxDelay, cost := next(), next(), next(), next()
		cl.args = append(cl.args, sp.code, maxArg, perArg, shape, maxDelay, cost, shadow)
	}
	return cl
}

// per returns the interval (buckets, gcra) or window (window algorithms) in µs.
func per(q kit.Params) int64 {
	if q.WindowMicros > 0 {
		return q.WindowMicros
	}
	return q.IntervalMicros
}

// run executes main.lua once and decodes its reply for n limits into reps
// (reused when it has room: a caller may pass an array on its stack).
func (s *Store) run(ctx context.Context, c *conn, cl call, total int, reps []limitReply) (bool, []limitReply, error) {
	msg, err := evalScript.Exec(ctx, c.c, cl.keys, loneArgs(cl.args)).ToMessage()
	if err != nil {
		return false, nil, wrap("run script", err)
	}
	n := total
	if cl.idx != nil {
		n = len(cl.idx)
	}
	if cap(reps) >= n {
		reps = reps[:n]
	} else {
		reps = make([]limitReply, n)
	}
	lone := n == 1 && cl.args[0] == modeEvaluate
	if msg.IsInt64() {
		// core.lua's short reply to a lone single-limit request: admitted.
		v, _ := msg.ToInt64()
		if !lone || v >= 0 {
			return false, nil, fmt.Errorf("redis store: run script: %w: integer %d for %d limits", errBadReply, v, n)
		}
		reps[0] = shortReply(v)
		return true, reps, nil
	}
	vals, err := msg.ToArray()
	if err != nil {
		return false, nil, fmt.Errorf("redis store: run script: %w: %w", errBadReply, err)
	}
	var bad error
	at := func(i int) int64 {
		x, err := vals[i].AsInt64()
		if err != nil && bad == nil {
			bad = err
		}
		return x
	}
	var overall bool
	switch {
	case len(vals) == replyHeader+replyPerLimit*n:
		overall = at(0) == 1
		for j := range reps {
			v := replyHeader + replyPerLimit*j
			reps[j] = limitReply{
				allowed: at(v) == 1, remaining: at(v + 1), reset: at(v + 2), retry: at(v + 3), delay: at(v + 4), next: at(v + 5),
				consumed: at(v+6) == 1, extra: at(v + 7), viewRemaining: at(v + 8), viewReset: at(v + 9),
			}
		}
	case lone && len(vals) == lonePerLimit:
		// core.lua's long reply to a lone single-limit request; its overall
		// is the limit's allowed, or true for a shadow limit (args[8]).
		reps[0] = limitReply{allowed: at(0) == 1, remaining: at(1), reset: at(2), retry: at(3), delay: at(4), next: at(5)}
		overall = reps[0].allowed || cl.args[2+6] == "1"
	default:
		return false, nil, fmt.Errorf("redis store: run script: %w: %d values for %d limits", errBadReply, len(vals), n)
	}
	if bad != nil {
		return false, nil, fmt.Errorf("redis store: run script: %w: %w", errBadReply, bad)
	}
	return overall, reps, nil
}

// loneArgs returns the arguments to send for args: the 5-argument form of
// core.lua (code, now, max, per, cost) for a mode 'e' request with one
// limit in police mode without max_delay that is not a sliding log, a
// concurrency limit nor a compat scg limit (its shadow flag only matters to the caller, see run),
// else args itself.
func loneArgs(args []string) []string {
	if len(args) != 2+7 || args[0] != modeEvaluate || args[2] == specs[3].code || args[2] == specs[6].code || args[2] == scgSpec.code || args[5] != "0" || args[6] != "0" {
		return args
	}
	return []string{args[2], args[1], args[3], args[4], args[7]}
}

// lonePerLimit is the length of core.lua's long reply to a lone
// single-limit request: allowed, remaining, reset, retry, delay, next.
const lonePerLimit = 6

// shortReply decodes core.lua's short reply, a negative integer v: an
// admission with nothing held back, v = -1 - (remaining·2^33 + reset).
func shortReply(v int64) limitReply {
	p := -1 - v
	return limitReply{allowed: true, remaining: p >> 33, reset: p & (1<<33 - 1)}
}

// result is the outcome of one call in runAll.
type result struct {
	overall bool
	reps    []limitReply
	err     error
}

// runAll executes the calls concurrently (each is one slot's script run).
func (s *Store) runAll(ctx context.Context, c *conn, calls []call, total int) []result {
	results := make([]result, len(calls))
	if len(calls) == 1 {
		results[0].overall, results[0].reps, results[0].err = s.run(ctx, c, calls[0], total, nil)
		return results
	}
	var wg sync.WaitGroup
	for g := range calls {
		wg.Go(func() {
			results[g].overall, results[g].reps, results[g].err = s.run(ctx, c, calls[g], total, nil)
		})
	}
	wg.Wait()
	return results
}

// decision converts a limit's reply.
func (r *limitReply) decision(p *ratelimit.Policy) ratelimit.Decision {
	return ratelimit.Decision{
		Allowed:    r.allowed,
		Limit:      p.Max(),
		Remaining:  r.remaining,
		Reset:      time.Duration(r.reset) * time.Microsecond,
		RetryAfter: time.Duration(r.retry) * time.Microsecond,
		Delay:      time.Duration(r.delay) * time.Microsecond,
		Next:       time.Duration(r.next) * time.Microsecond,
	}
}
