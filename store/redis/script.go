package redis

import (
	"context"
	"crypto/sha1"
	"embed"
	"encoding/hex"
	"strings"
	"sync"
	"time"

	"github.com/redis/rueidis"
)

// The scripts are assembled once from the embedded files: core.lua (the
// scalar steps, each mirroring its Go step function, and the lone
// single-limit request), the shared prelude, one file per algorithm, then
// the entry point.
//
//go:embed lua/*.lua
var luaFiles embed.FS

// algorithmFiles lists the algorithm files in the order they are joined.
var algorithmFiles = []string{
	"token_bucket.lua", "leaky_bucket.lua", "fixed_window.lua",
	"sliding_log.lua", "sliding_window.lua", "gcra.lua", "concurrency.lua", "scg_token_bucket.lua",
}

// assemble joins core, the prelude, every algorithm file and main.
func assemble(main string) string {
	var b strings.Builder
	for _, name := range append(append([]string{"core.lua", "prelude.lua"}, algorithmFiles...), main) {
		src, err := luaFiles.ReadFile("lua/" + name)
		if err != nil {
			panic("redis store: embedded script missing: " + name)
		}
		b.Write(src)
		b.WriteByte('\n')
	}
	return b.String()
}

var (
	// evalSource decides (and commits) every limit of one request.
	evalSource = assemble("main.lua")
	// refundSource undoes a commit (Cluster, limits in several slots).
	refundSource = assemble("refund.lua")

	// The scripts are sent as EVALSHA. After a NOSCRIPT (the script did not
	// run) they are loaded once with SCRIPT LOAD, shared by every caller
	// that got the NOSCRIPT meanwhile, and sent as EVALSHA again (see
	// [script.Exec]). Nothing is re-sent after a timeout or any other error,
	// and the client is built with DisableRetry, so a script that may have
	// run is never sent twice.
	evalScript   = newScript(evalSource)
	refundScript = newScript(refundSource)
	// renewScript extends leases (concurrency limits), many per call.
	renewScript = newScript(mustRead("renew.lua"))
)

// mustRead returns an embedded script file.
func mustRead(name string) string {
	src, err := luaFiles.ReadFile("lua/" + name)
	if err != nil {
		panic("redis store: embedded script missing: " + name)
	}
	return string(src)
}

// Script modes (ARGV[1] of main.lua).
const (
	modeEvaluate = "e" // decide and commit
	modeViews    = "v" // decide and commit, also report unchanged views
	modePeek     = "p" // decide only
)

// Reply layout of main.lua: two header integers, then fields per limit.
const (
	replyHeader   = 2
	replyPerLimit = 10
)

// loadTimeout bounds a SCRIPT LOAD when the caller that starts it has less
// time left: the load is shared, so it should not fail because its first
// caller was about to time out.
const loadTimeout = time.Second

// loadKeep is how long a finished load is remembered (to tell the callers
// whose EVALSHA was sent before it that they need not load again). A call
// is bounded by the store's Timeout, far below this.
const loadKeep = 30 * time.Second

// script is a Lua script run by EVALSHA. Unlike rueidis.Lua, which answers
// every NOSCRIPT with an EVAL carrying the whole script (about 25 KB here),
// one per caller, a script loads itself once per connection set: after a
// SCRIPT FLUSH or a restart, every call in flight gets NOSCRIPT at once, and
// one EVAL each would be a burst of large writes and compilations that times
// calls out (docs/reliability.md row B8; docs/semantics.md §6.1).
//
// NOSCRIPT is the only error after which anything is re-sent: it means the
// script did not run. A timeout or any other error is returned as it is.
type script struct {
	src, sha string

	mu    sync.Mutex
	loads map[loadKey]*load
}

// loadKey identifies where a load must happen: the client, and on Cluster
// the hash slot of the call's keys (SCRIPT LOAD is routed to the node that
// serves that slot, the node that answered NOSCRIPT).
type loadKey struct {
	c    rueidis.Client
	slot uint16
}

// load is one SCRIPT LOAD, shared by the callers that wait for it.
type load struct {
	done chan struct{} // closed when it ends
	err  error         // set before done is closed
	end  time.Time     // when it ended; set before done is closed
}

func newScript(src string) *script {
	sum := sha1.Sum([]byte(src))
	return &script{src: src, sha: hex.EncodeToString(sum[:]), loads: make(map[loadKey]*load)}
}

// Exec runs the script with keys and args through c (on Cluster, the keys
// must share one hash slot) and returns its reply. A NOSCRIPT never reaches
// the caller: the script is loaded (once for all concurrent callers) and
// sent again as EVALSHA; if that gets NOSCRIPT too (flushed again in
// between, or on Cluster a slot that moved meanwhile), it is sent once as
// EVAL.
func (s *script) Exec(ctx context.Context, c rueidis.Client, keys, args []string) rueidis.RedisResult {
	sent := time.Now()
	res := c.Do(ctx, s.evalsha(c, keys, args))
	if !isNoScript(res) {
		return res
	}
	if err := s.load(ctx, c, keys, sent); err != nil {
		return rueidis.NewErrorResult(err)
	}
	res = c.Do(ctx, s.evalsha(c, keys, args))
	if !isNoScript(res) {
		return res
	}
	return c.Do(ctx, c.B().Eval().Script(s.src).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build())
}

func (s *script) evalsha(c rueidis.Client, keys, args []string) rueidis.Completed {
	return c.B().Evalsha().Sha1(s.sha).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build()
}

// isNoScript reports whether res is a NOSCRIPT error reply.
func isNoScript(res rueidis.RedisResult) bool {
	re, ok := rueidis.IsRedisErr(res.Error())
	return ok && re.IsNoScript()
}

// load makes sure the script is loaded where c sends keys, for a caller
// whose EVALSHA, sent at sent, got NOSCRIPT. It joins the load in flight
// for the same place, returns at once if one succeeded after sent (its
// SCRIPT LOAD reached Redis after that EVALSHA), or starts one. It waits at
// most until ctx is done.
func (s *script) load(ctx context.Context, c rueidis.Client, keys []string, sent time.Time) error {
	k := loadKey{c: c}
	cluster := c.Mode() == rueidis.ClientModeCluster && len(keys) > 0
	if cluster {
		k.slot = keySlot(keys[0])
	}
	s.mu.Lock()
	l := s.loads[k]
	switch {
	case l == nil:
	case l.end.IsZero(): // in flight: join it
	case l.err == nil && l.end.After(sent):
		s.mu.Unlock()
		return nil
	default:
		l = nil
	}
	if l == nil {
		l = &load{done: make(chan struct{})}
		s.prune(sent)
		s.loads[k] = l
		budget := loadTimeout
		if d, ok := ctx.Deadline(); ok {
			budget = max(budget, time.Until(d))
		}
		// Detached from the caller: the callers that join it may have
		// more time than the one that started it.
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), budget)
		cmd := c.B().ScriptLoad().Script(s.src).Build()
		if cluster {
			// SCRIPT LOAD has no key, so rueidis would send it to any
			// node; route it by the call's key to the node serving it.
			cmd = cmd.SetSlot(keys[0])
		}
		go func() {
			defer cancel()
			err := c.Do(lctx, cmd).Error()
			s.mu.Lock()
			l.err, l.end = err, time.Now()
			s.mu.Unlock()
			close(l.done)
		}()
	}
	s.mu.Unlock()
	select {
	case <-l.done:
		return l.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// prune forgets the loads that ended long ago (and with them the clients
// closed since). s.mu is held.
func (s *script) prune(now time.Time) {
	for k, l := range s.loads {
		if !l.end.IsZero() && now.Sub(l.end) > loadKeep {
			delete(s.loads, k)
		}
	}
}

// keySlot is the Cluster hash slot of a key: that of its hash tag when it
// has one, as Redis computes it.
func keySlot(key string) uint16 {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	return slot(key)
}
