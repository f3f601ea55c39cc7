package redis

import (
	"context"
	"strconv"

	"github.com/sluice-gw/sluice/ratelimit"
	"github.com/sluice-gw/sluice/ratelimit/kit"
)

// evaluateSlots evaluates a request whose limits sit in several Cluster hash
// slots by commit-then-refund: one script run per slot, concurrently, each
// committing its own limits if they all admit; if any slot denies (or
// fails), the slots that committed are refunded. See the package
// documentation for the guarantees.
func (s *Store) evaluateSlots(ctx context.Context, c *conn, reqs []ratelimit.Request, out []ratelimit.Decision, groups [][]int, now string) (bool, error) {
	calls := make([]call, len(groups))
	for g, idx := range groups {
		calls[g] = s.newCall(modeViews, now, reqs, idx)
	}
	results := s.runAll(ctx, c, calls, len(reqs))
	overall := true
	var firstErr error
	for _, r := range results {
		switch {
		case r.err != nil:
			if firstErr == nil {
				firstErr = r.err
			}
		case !r.overall:
			overall = false
		}
	}
	if firstErr == nil && overall {
		for g, r := range results {
			for j, i := range calls[g].idx {
				out[i] = r.reps[j].decision(reqs[i].Policy)
			}
		}
		return true, nil
	}
	var refunds []call
	for g, r := range results {
		if r.err == nil && r.overall {
			if rc, ok := s.refundCall(reqs, calls[g], r.reps); ok {
				refunds = append(refunds, rc)
			}
		}
	}
	if firstErr != nil {
		// The call's time may be spent (a timeout): refund in the
		// background with a fresh budget. Each refund is sent once.
		s.refundLater(c, refunds)
		return false, firstErr
	}
	// A refund that fails is not re-sent (it may have run): the budget it
	// held stays taken until it refills or expires, so the error can only
	// cause extra denials, never extra admissions, and is not reported:
	// the request is denied either way.
	s.refund(ctx, c, refunds)
	for g, r := range results {
		for j, i := range calls[g].idx {
			rep := r.reps[j]
			if rep.consumed {
				// The view of a limit that admitted a cost ≥ 1 has at
				// least one unit left, so its Next is zero.
				rep.remaining, rep.reset, rep.next = rep.viewRemaining, rep.viewReset, 0
			}
			out[i] = rep.decision(reqs[i].Policy)
		}
	}
	return false, nil
}

// refundCall builds the refund.lua run for the limits of one committed call.
func (s *Store) refundCall(reqs []ratelimit.Request, cl call, reps []limitReply) (call, bool) {
	rc := call{args: []string{s.now()}}
	for j, i := range cl.idx {
		if !reps[j].consumed {
			continue
		}
		r := &reqs[i]
		sp := specOf(r.Policy)
		rc.keys = appendKeys(rc.keys, s.prefix, tag(r.Key), sp)
		extra := strconv.FormatInt(reps[j].extra, 10)
		if r.Policy.IsConcurrency() {
			extra = r.Lease // refund.lua gives the lease back by its id
		}
		rc.args = append(rc.args, sp.code,
			strconv.FormatInt(r.Policy.Max(), 10),
			strconv.FormatInt(per(kit.ParamsOf(r.Policy)), 10),
			strconv.FormatInt(kit.Cost(*r), 10),
			extra)
	}
	return rc, len(rc.keys) > 0
}

// refund runs the refund calls concurrently, once each.
func (s *Store) refund(ctx context.Context, c *conn, calls []call) {
	done := make(chan struct{}, len(calls))
	for _, rc := range calls {
		go func() {
			refundScript.Exec(ctx, c.c, rc.keys, rc.args)
			done <- struct{}{}
		}()
	}
	for range calls {
		<-done
	}
}

// refundLater runs refund in the background with a fresh Timeout. Close
// waits for it.
func (s *Store) refundLater(c *conn, calls []call) {
	if len(calls) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.wg.Go(func() {
		ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
		defer cancel()
		s.refund(ctx, c, calls)
	})
}
