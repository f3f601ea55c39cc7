package redis

// This file implements the micro-batching described in the package
// documentation ("Micro-batching"): batchSlots calls in flight, the newest
// waiting batch, and the script's batch mode.

import (
	"context"
	"fmt"
	"hash/maphash"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluice-gw/sluice/ratelimit"
)

// main.lua's batch modes (ARGV[1]): modeBatchDistinct for a batch whose
// keys are all distinct, which the script reads with one MGET up front.
const (
	modeBatch         = "b"
	modeBatchDistinct = "B"
)

// distinctMax bounds the keys a batch may have to be sent as
// modeBatchDistinct: the script unpacks KEYS onto the Lua stack for MGET.
const distinctMax = 256

// distinct reports whether keys are all different, using a table on the
// stack: it may answer false for distinct keys whose hashes collide in it
// (a batch of them is then sent as modeBatch, which is as correct), never
// true for a repeated key.
func distinct(keys []string) bool {
	if len(keys) > distinctMax {
		return false
	}
	var seen [2 * distinctMax]uint64 // open addressing; 0 is empty
	for _, k := range keys {
		h := maphash.String(distinctSeed, k) | 1
		i := h % uint64(len(seen))
		for seen[i] != 0 {
			if seen[i] == h {
				return false
			}
			i = (i + 1) % uint64(len(seen))
		}
		seen[i] = h
	}
	return true
}

var distinctSeed = maphash.MakeSeed()

const (
	// batchSlots is the number of script calls a Store keeps in flight
	// before further Evaluate calls are combined into batches. Two lets
	// the next batch travel while Redis runs one; more only splits the same
	// requests into smaller batches.
	batchSlots = 2
	// batchMaxLimits bounds the limits one batch call evaluates (a request
	// with more limits than that is a batch of its own), which bounds how
	// long one script holds Redis.
	batchMaxLimits = 64
	// batchMaxWait bounds how long a batch waits for a slot (at most an
	// eighth of the store's Timeout): then it is sent in a slot of its own,
	// beyond batchSlots. When Redis is busy, calls end well within it and
	// batches form; when every call is slow for another reason (a slow
	// network, a loaded Redis host), waiting for one to end would add a
	// whole round trip to each batched request and push it towards the
	// Timeout, so the store pipelines more calls instead.
	batchMaxWait = 2 * time.Millisecond
)

// batcher combines one Store's concurrent Evaluate calls.
type batcher struct {
	// slots is the most script calls in flight; 0 turns batching off
	// (every call is its own). always (tests only) sends every request in
	// a batch (mode 'b'), even one that finds a slot free. Both are read
	// under mu.
	slots  int
	always bool
	// maxWait bounds a batch's wait for a slot (batchMaxWait, at most an
	// eighth of the store's Timeout; tests may change it).
	maxWait time.Duration

	mu       sync.Mutex
	inflight int      // script calls in flight (slots taken, batchSlots or more)
	queue    []*batch // batches waiting for a slot, oldest first
}

// batch is a group of requests sent as one script call.
type batch struct {
	now     string
	members []*member
	limits  int
	// ctx bounds the wait of every member and the script call: the store's
	// Timeout from when the batch was opened (so at most a member's own
	// Timeout). Its cancel runs after done is closed.
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{} // closed when every member's result is set
	// wait sends the batch in a slot of its own once it has waited
	// batchMaxWait; stopped when it leaves the queue.
	wait *time.Timer
}

// member is one Evaluate call waiting in a batch. The sender writes the
// result fields before closing the batch's done channel; the caller reads
// them only after.
type member struct {
	ctx  context.Context // the caller's
	cl   call            // cl.args[0:2] are mode and now; the rest are the limits'
	n    int             // limits
	sent bool            // included in the script call

	overall bool
	reps    []limitReply
	few     [2]limitReply // reps of a member of one or two limits
	err     error
}

// batcher returns s's batcher.
func (s *Store) batcher() *batcher { return &s.batch }

// evaluateCombined decides reqs in a script call of their own if a slot
// is free, else in a batch. ctx is the caller's: this bounds the wait by
// the store's Timeout.
func (s *Store) evaluateCombined(ctx context.Context, c *conn, reqs []ratelimit.Request, out []ratelimit.Decision) (bool, error) {
	cl := s.newCall(modeEvaluate, s.now(), reqs, nil)
	b := s.batcher()
	b.mu.Lock()
	if b.slots <= 0 || b.inflight < b.slots && !b.always {
		b.inflight++
		b.mu.Unlock()
		return s.evaluateAlone(ctx, c, cl, reqs, out, b)
	}
	m := &member{ctx: ctx, cl: cl, n: len(reqs)}
	bt := b.join(s, m)
	var start *batch
	if b.inflight < b.slots { // always, and no call in flight to send it
		b.inflight++
		start = b.next()
	}
	b.mu.Unlock()
	if start != nil {
		go b.sendLoop(s, start)
	}

	var err error
	select {
	case <-bt.done:
	case <-bt.ctx.Done():
		err = bt.ctx.Err()
	case <-ctx.Done():
		err = ctx.Err()
	}
	if err != nil {
		select {
		case <-bt.done: // decided after all: use the answer
		default:
			return false, fmt.Errorf("redis store: run script: %w", err)
		}
	}
	if !m.sent {
		if err = ctx.Err(); err == nil {
			err = bt.ctx.Err()
		}
		return false, fmt.Errorf("redis store: run script: %w", err)
	}
	if m.err != nil {
		return false, m.err
	}
	for i := range reqs {
		out[i] = m.reps[i].decision(reqs[i].Policy)
	}
	return m.overall, nil
}

// evaluateAlone runs cl in a script call of its own, in the slot the caller
// took, exactly as without batching.
func (s *Store) evaluateAlone(ctx context.Context, c *conn, cl call, reqs []ratelimit.Request, out []ratelimit.Decision, b *batcher) (bool, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	var one [1]limitReply
	overall, reps, err := s.run(ctx, c, cl, len(reqs), one[:])
	b.release(s)
	if err != nil {
		return false, err
	}
	for i := range reqs {
		out[i] = reps[i].decision(reqs[i].Policy)
	}
	return overall, nil
}

// join adds m to the newest waiting batch if it has the same time and
// room, else to a new batch, and returns the batch. b.mu is held.
func (b *batcher) join(s *Store, m *member) *batch {
	now := m.cl.args[1]
	if n := len(b.queue); n > 0 {
		if bt := b.queue[n-1]; bt.now == now && bt.limits+m.n <= batchMaxLimits {
			bt.members = append(bt.members, m)
			bt.limits += m.n
			return bt
		}
	}
	bt := &batch{now: now, members: make([]*member, 1, 16), limits: m.n, done: make(chan struct{})}
	bt.members[0] = m
	bt.ctx, bt.cancel = context.WithTimeout(context.Background(), s.timeout)
	bt.wait = time.AfterFunc(b.maxWait, func() { b.expedite(s, bt) })
	b.queue = append(b.queue, bt)
	return bt
}

// expedite sends bt in a slot of its own if it is still waiting for one.
func (b *batcher) expedite(s *Store, bt *batch) {
	b.mu.Lock()
	i := slices.Index(b.queue, bt)
	if i >= 0 {
		b.queue = slices.Delete(b.queue, i, i+1)
		b.inflight++
	}
	b.mu.Unlock()
	if i >= 0 {
		b.sendLoop(s, bt) // already on the timer's goroutine
	}
}

// release is called when a script call ends: the slot goes to the oldest
// waiting batch, sent from a new goroutine, or is freed.
func (b *batcher) release(s *Store) {
	b.mu.Lock()
	bt := b.next()
	b.mu.Unlock()
	if bt != nil {
		go b.sendLoop(s, bt)
	}
}

// next pops the oldest waiting batch, or frees a slot and returns nil when
// none waits. b.mu is held.
func (b *batcher) next() *batch {
	if len(b.queue) == 0 {
		b.inflight--
		return nil
	}
	bt := b.queue[0]
	b.queue[0] = nil
	b.queue = b.queue[1:]
	if len(b.queue) == 0 {
		b.queue = b.queue[:0:0] // let the drained array go
	}
	bt.wait.Stop()
	return bt
}

// sendLoop sends bt, then every batch that is waiting when a call ends,
// holding one slot until none waits. Each batch goes through the store's
// current client (a Sentinel store may have replaced it meanwhile); after
// Close every member gets ErrClosed.
func (b *batcher) sendLoop(s *Store, bt *batch) {
	for bt != nil {
		if c := s.cur.Load(); c != nil {
			s.send(c, bt)
		} else {
			for _, m := range bt.members {
				m.sent, m.err = true, ErrClosed
			}
			close(bt.done)
			bt.cancel()
		}
		b.mu.Lock()
		bt = b.next()
		b.mu.Unlock()
	}
}

// send runs bt as one script call and sets every member's result. Members
// whose context has already ended are left out, and so is the whole batch
// once its own time is up.
func (s *Store) send(c *conn, bt *batch) {
	defer bt.cancel() // after done is closed: see evaluateCombined
	defer close(bt.done)
	if bt.ctx.Err() != nil {
		return
	}
	live := bt.members[:0] // no one joins a batch being sent
	nkeys := 0
	for _, m := range bt.members {
		if m.ctx.Err() != nil {
			continue
		}
		m.sent = true
		live = append(live, m)
		nkeys += len(m.cl.keys)
	}
	if len(live) == 0 {
		return
	}
	keys, args := batchArgs(live, nkeys, bt.now)
	vals, err := evalScript.Exec(bt.ctx, c.c, keys, args).ToArray()
	if err != nil {
		err = wrap("run script", err)
		for _, m := range live {
			m.err = err
		}
		return
	}
	if err := decodeBatch(vals, live); err != nil {
		for _, m := range live { // the reply's shape is wrong: trust none of it
			m.err = err
		}
	}
}

// batchArgs returns the KEYS and ARGV of a mode 'b' or 'B' call for the members
// (nkeys keys in all) at now: the distinct policies (5 values each, as
// found in the members' own mode 'e' arguments), then per member its
// number of limits and, per limit, its policy's index (negative for a
// shadow limit) and its cost; or, for a member with one limit of cost 1
// that is not a sliding log, "r" and that index in one value.
func batchArgs(live []*member, nkeys int, now string) (keys, args []string) {
	nlimits := 0
	for _, m := range live {
		nlimits += m.n
	}
	// At most one policy per limit; usually a few serve the whole batch.
	all := make([]string, nkeys+3+5*nlimits+len(live)+2*nlimits)
	keys = all[:0:nkeys]
	pol := all[nkeys+3 : nkeys+3 : nkeys+3+5*nlimits]
	refs := all[nkeys+3+5*nlimits : nkeys+3+5*nlimits]
	var short []string // "r<index>" by policy index-1, made once per batch
	for _, m := range live {
		keys = append(keys, m.cl.keys...)
		one := m.n == 1
		if one {
			refs = append(refs, "") // the count, or the short form below
		} else {
			refs = append(refs, strconv.Itoa(m.n))
		}
		for a := m.cl.args[2:]; len(a) >= 7; a = a[7:] {
			idx := 0
			for i := 0; i < len(pol); i += 5 {
				if pol[i] == a[0] && pol[i+1] == a[1] && pol[i+2] == a[2] && pol[i+3] == a[3] && pol[i+4] == a[4] {
					idx = i/5 + 1
					break
				}
			}
			if idx == 0 {
				pol = append(pol, a[:5]...)
				idx = len(pol) / 5
			}
			if one && a[5] == "1" && a[0] != specs[3].code { // cost 1, not a sliding log
				for len(short) < idx {
					short = append(short, "")
				}
				if short[idx-1] == "" {
					short[idx-1] = "r" + strconv.Itoa(idx)
				}
				ref := short[idx-1]
				if a[6] == "1" { // shadow
					ref = "r-" + ref[1:]
				}
				refs[len(refs)-1] = ref
				continue
			}
			if one {
				refs[len(refs)-1] = "1"
			}
			if a[6] == "1" { // shadow
				idx = -idx
			}
			refs = append(refs, strconv.Itoa(idx), a[5])
		}
	}
	args = all[nkeys : nkeys+3]
	mode := modeBatch
	if distinct(keys) {
		mode = modeBatchDistinct
	}
	args[0], args[1], args[2] = mode, now, strconv.Itoa(len(pol)/5)
	args = append(args, pol...)
	args = append(args, refs...)
	return keys, args
}

// batchPerLimit is the number of values per limit in a mode 'b' reply:
// allowed, remaining, reset, retry, delay, next.
const batchPerLimit = 6

// decodeBatch sets each member's result from a mode 'b' reply: now, then
// per member its overall and 6 values per limit, for a member of one or
// two limits admitted with nothing held back one short reply per limit
// (negative integers, unlike an overall; see shortReply), or one error.
func decodeBatch(vals []rueidis.RedisMessage, live []*member) error {
	bad := func(err error) error {
		if err == nil {
			err = fmt.Errorf("%d values for %d requests", len(vals), len(live))
		}
		return fmt.Errorf("redis store: run script: %w: %w", errBadReply, err)
	}
	pos := 1
	for _, m := range live {
		if pos >= len(vals) {
			return bad(nil)
		}
		if err := vals[pos].Error(); err != nil {
			m.err = wrap("run script", err)
			pos++
			continue
		}
		overall, err := vals[pos].AsInt64()
		if err != nil {
			return bad(err)
		}
		if overall < 0 { // short answers: one per limit, one or two limits
			if m.n > len(m.few) || pos+m.n > len(vals) {
				return bad(fmt.Errorf("short reply %d for %d limits", overall, m.n))
			}
			for j := range m.n {
				v, err := vals[pos+j].AsInt64()
				if err != nil {
					return bad(err)
				}
				if v >= 0 {
					return bad(fmt.Errorf("short reply %d followed by %d", overall, v))
				}
				m.few[j] = shortReply(v)
			}
			m.overall, m.reps = true, m.few[:m.n]
			pos += m.n
			continue
		}
		end := pos + 1 + batchPerLimit*m.n
		if end > len(vals) {
			return bad(nil)
		}
		var reps []limitReply
		if m.n <= len(m.few) {
			reps = m.few[:m.n]
		} else {
			reps = make([]limitReply, m.n)
		}
		for j := range reps {
			var v [batchPerLimit]int64
			for k := range v {
				if v[k], err = vals[pos+1+batchPerLimit*j+k].AsInt64(); err != nil {
					return bad(err)
				}
			}
			reps[j] = limitReply{allowed: v[0] == 1, remaining: v[1], reset: v[2], retry: v[3], delay: v[4], next: v[5]}
		}
		m.overall, m.reps = overall == 1, reps
		pos = end
	}
	if pos != len(vals) {
		return bad(nil)
	}
	return nil
}
