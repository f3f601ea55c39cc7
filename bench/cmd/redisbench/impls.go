package main

import (
	"context"
	"fmt"
	"time"

	"github.com/go-redis/redis_rate/v10"
	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	"github.com/ulule/limiter/v3"
	ulredis "github.com/ulule/limiter/v3/drivers/store/redis"
)

// The limit every implementation enforces: a token bucket of capacity 100
// refilled at 10 per second, or the nearest each library offers.
const (
	bucketCapacity = 100
	bucketRate     = 10 // per second
)

// decideFunc makes one rate-limit decision for the i-th key of the cell's
// key set. allowed is meaningful only when the target's allowedKnown is true.
type decideFunc func(ctx context.Context, i int) (allowed bool, err error)

// target is one implementation connected to a server.
type target struct {
	// newWorker returns the decide function of one worker goroutine; it may
	// keep per-worker buffers, so it is not shared between goroutines.
	newWorker func() decideFunc
	// allowedKnown reports whether decide's allowed result means anything
	// (false when the harness only replays a script whose reply it does not
	// interpret).
	allowedKnown bool
	close        func()
}

// env is what implementations need to connect, and the cell's key set.
type env struct {
	addr        string
	goredisPool int           // go-redis PoolSize; zero keeps the library default (10 per GOMAXPROCS)
	flushDelay  time.Duration // rueidis-script's MaxFlushDelay
	call        *scriptCall   // sluice's token-bucket script call, captured once
	keys        []string
	replay      [][]string // call's Redis keys for each of keys, built on first use
}

// setKeys sets the key set of the next cells.
func (e *env) setKeys(keys []string) {
	e.keys, e.replay = keys, nil
}

// replayKeys returns, for each key, the Redis keys sluice's store would pass
// its script, computed once per key set so that the script-only targets
// measure the client and not the hashing.
func (e *env) replayKeys() [][]string {
	if e.replay == nil {
		e.replay = make([][]string, len(e.keys))
		for i, k := range e.keys {
			e.replay[i] = e.call.withKey(sluiceTag(k))
		}
	}
	return e.replay
}

// impl is one implementation under test.
type impl struct {
	name string
	// desc is the report's one-line description: client, algorithm, parameters.
	desc       string
	needsProbe bool // needs env.call
	open       func(ctx context.Context, e *env) (*target, error)
}

// impls lists every implementation in report order.
var impls = []impl{
	{
		name:       "sluice",
		desc:       "sluice `store/redis` (rueidis, auto-pipelining): `Evaluate` of one token_bucket request, capacity 100, rate 10/s",
		needsProbe: true,
		open:       openSluice,
	},
	{
		name:       "rueidis-script",
		desc:       "the same script call as sluice, sent with rueidis directly (EVALSHA, auto-pipelining), no store code around it",
		needsProbe: true,
		open:       openRueidisScript,
	},
	{
		name:       "goredis-script",
		desc:       "the same script call as sluice, sent with go-redis v9 `EvalSha` (pooled connections, no pipelining)",
		needsProbe: true,
		open:       openGoredisScript,
	},
	{
		name: "redis_rate",
		desc: "`go-redis/redis_rate/v10` (GCRA) on go-redis v9: `Allow` with Limit{Rate: 10, Burst: 100, Period: 1s}",
		open: openRedisRate,
	},
	{
		name: "ulule",
		desc: "`ulule/limiter/v3` Redis store (fixed window, INCRBY+PEXPIRE script) on go-redis v9: Rate{Limit: 100, Period: 10s}",
		open: openUlule,
	},
}

// findImpl returns the implementation called name.
func findImpl(name string) (impl, bool) {
	for _, im := range impls {
		if im.name == name {
			return im, true
		}
	}
	return impl{}, false
}

func newGoredis(e *env) *goredis.Client {
	return goredis.NewClient(&goredis.Options{Addr: e.addr, PoolSize: e.goredisPool})
}

func openRedisRate(ctx context.Context, e *env) (*target, error) {
	rdb := newGoredis(e)
	lim := redis_rate.NewLimiter(rdb)
	limit := redis_rate.Limit{Rate: bucketRate, Burst: bucketCapacity, Period: time.Second}
	return &target{
		newWorker: func() decideFunc {
			return func(ctx context.Context, i int) (bool, error) {
				res, err := lim.Allow(ctx, e.keys[i], limit)
				if err != nil {
					return false, err
				}
				return res.Allowed > 0, nil
			}
		},
		allowedKnown: true,
		close:        func() { rdb.Close() },
	}, nil
}

func openUlule(ctx context.Context, e *env) (*target, error) {
	rdb := newGoredis(e)
	store, err := ulredis.NewStoreWithOptions(rdb, limiter.StoreOptions{Prefix: "ulule"})
	if err != nil {
		rdb.Close()
		return nil, fmt.Errorf("ulule store: %w", err)
	}
	// Fixed window of 10 s holding 100: the same long-run rate (10/s) and the
	// same largest burst (100) as the token bucket.
	lim := limiter.New(store, limiter.Rate{Period: bucketCapacity / bucketRate * time.Second, Limit: bucketCapacity})
	return &target{
		newWorker: func() decideFunc {
			return func(ctx context.Context, i int) (bool, error) {
				res, err := lim.Get(ctx, e.keys[i])
				if err != nil {
					return false, err
				}
				return !res.Reached, nil
			}
		},
		allowedKnown: true,
		close:        func() { rdb.Close() },
	}, nil
}

func openGoredisScript(ctx context.Context, e *env) (*target, error) {
	rdb := newGoredis(e)
	call, keys := e.call, e.replayKeys()
	// EVALSHA, and EVAL on NOSCRIPT: what a go-redis store would send.
	script := goredis.NewScript(call.source)
	return &target{
		newWorker: func() decideFunc {
			args := make([]any, len(call.args))
			for i, a := range call.args {
				args[i] = a
			}
			return func(ctx context.Context, i int) (bool, error) {
				return false, script.Run(ctx, rdb, keys[i], args...).Err()
			}
		},
		close: func() { rdb.Close() },
	}, nil
}

func openRueidisScript(ctx context.Context, e *env) (*target, error) {
	c, err := rueidis.NewClient(rueidis.ClientOption{
		InitAddress: []string{e.addr}, DisableCache: true, DisableRetry: true, MaxFlushDelay: e.flushDelay,
	})
	if err != nil {
		return nil, fmt.Errorf("rueidis client: %w", err)
	}
	call, keys := e.call, e.replayKeys()
	script := rueidis.NewLuaScript(call.source)
	return &target{
		newWorker: func() decideFunc {
			return func(ctx context.Context, i int) (bool, error) {
				return false, script.Exec(ctx, c, keys[i], call.args).Error()
			}
		},
		close: c.Close,
	}, nil
}
