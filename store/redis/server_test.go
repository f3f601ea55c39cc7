package redis

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluice-gw/sluice/internal/redistest"
	"github.com/sluice-gw/sluice/internal/testkit"
	"github.com/sluice-gw/sluice/ratelimit"
	"github.com/sluice-gw/sluice/ratelimit/kit"
)

var tbPolicy = ratelimit.MustPolicy(ratelimit.PolicyConfig{Name: "tb", Algorithm: ratelimit.TokenBucket, Capacity: 10, Rate: 1})

// mustNew is New that fails the test on error and closes the store after it.
func mustNew(t *testing.T, opts Options) *Store {
	t.Helper()
	if opts.Prefix == "" {
		opts.Prefix = testPrefix()
	}
	if opts.Timeout == 0 {
		opts.Timeout = 5 * time.Second
	}
	s, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// cmdCalls returns the calls= field of INFO commandstats for cmd.
func cmdCalls(t *testing.T, srv *redistest.Server, cmd string) int {
	t.Helper()
	info, err := srv.Info("commandstats")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range strings.Split(info["cmdstat_"+cmd], ",") {
		if v, ok := strings.CutPrefix(f, "calls="); ok {
			n, _ := strconv.Atoi(v)
			return n
		}
	}
	return 0
}

// TestNoScript: after SCRIPT FLUSH (as after a restart) the store loads the
// script once (SCRIPT LOAD, never EVAL) and goes on deciding from the same
// state. docs/reliability.md row B8.
func TestNoScript(t *testing.T) {
	srv := redistest.NewServer(t, redistest.ServerOptions{})
	s := mustNew(t, Options{Addrs: []string{srv.Addr()}})
	req := ratelimit.Request{Key: "k", Policy: tbPolicy}
	for i := range 6 {
		loads := cmdCalls(t, srv, "script|load")
		if i%2 == 0 {
			if _, err := srv.Do("SCRIPT", "FLUSH"); err != nil {
				t.Fatal(err)
			}
		}
		ok, out := evaluate(t, s, req)
		// Rate 1/s: at most one token can come back during the test.
		if want := int64(10 - 1 - i); !ok || out[0].Remaining < want || out[0].Remaining > want+1 {
			t.Fatalf("request %d: %v, remaining %d, want admitted with %d", i, ok, out[0].Remaining, want)
		}
		wantLoads := loads
		if i%2 == 0 {
			wantLoads++ // NOSCRIPT → SCRIPT LOAD → EVALSHA
		}
		if got := cmdCalls(t, srv, "script|load"); got != wantLoads {
			t.Errorf("request %d: SCRIPT LOAD calls %d → %d, want %d", i, loads, got, wantLoads)
		}
	}
	if n := cmdCalls(t, srv, "eval"); n != 0 {
		t.Errorf("EVAL calls = %d, want 0 (the script is loaded, not sent with each call)", n)
	}
	if n := cmdCalls(t, srv, "evalsha"); n < 9 {
		t.Errorf("EVALSHA calls = %d, want at least 9 (6 runs, 3 NOSCRIPT)", n)
	}
}

// TestRedisTime: without a Clock the scripts take the time from Redis TIME
// (docs/semantics.md §1.1): a gcra TAT written by a request is Redis' now plus
// one interval.
func TestRedisTime(t *testing.T) {
	c := standaloneRedis(t)
	s := newTestStore(t, c, nil)
	p := ratelimit.MustPolicy(ratelimit.PolicyConfig{Algorithm: ratelimit.GCRA, Burst: 10, Rate: 1})
	req := ratelimit.Request{Key: "k", Policy: p}
	evaluate(t, s, req)
	key := appendKeys(nil, s.prefix, tag(req.Key), specOf(p))[0]
	tat, err := c.Do(context.Background(), c.B().Get().Key(key).Build()).AsInt64()
	if err != nil {
		t.Fatal(err)
	}
	tm, err := c.Do(context.Background(), c.B().Time().Build()).AsIntSlice()
	if err != nil {
		t.Fatal(err)
	}
	redisNow := tm[0]*1e6 + tm[1]
	if d := tat - kit.ParamsOf(p).IntervalMicros - redisNow; d > 0 || d < -1e6 {
		t.Errorf("TAT - interval = %d, Redis TIME = %d: %dµs apart, want within a second before", tat-kit.ParamsOf(p).IntervalMicros, redisNow, d)
	}
}

// TestTTL: every key a request writes has a TTL at least as long as the
// decision's Reset (time until the state equals no state: a drained bucket
// refilled, a window passed), so a key never expires while it still holds
// back budget; and not much longer, so idle keys go.
func TestTTL(t *testing.T) {
	c := standaloneRedis(t)
	s := newTestStore(t, c, nil)
	ctx := context.Background()
	for _, p := range policies(t) {
		t.Run(p.Name(), func(t *testing.T) {
			req := ratelimit.Request{Key: "drained-" + p.Name(), Policy: p}
			var last ratelimit.Decision
			for {
				ok, out := evaluate(t, s, req)
				if !ok {
					break
				}
				last = out[0]
			}
			for _, k := range appendKeys(nil, s.prefix, tag(req.Key), specOf(p)) {
				pttl, err := c.Do(ctx, c.B().Pttl().Key(k).Build()).AsInt64()
				if err != nil {
					t.Fatal(err)
				}
				reset := last.Reset.Milliseconds()
				// The slack covers the time since the last write (-race, a
				// loaded machine); the TTL set was ceil(reset)+1ms.
				if pttl <= 0 || pttl+250 < reset || pttl > reset+2 {
					t.Errorf("%s: PTTL %dms after the last admission, whose reset was %v: want ≥ the reset, ≤ reset+2ms", k, pttl, last.Reset)
				}
			}
		})
	}
}

// TestAuthAndDB: password (requirepass) and ACL user authentication, and a
// database number.
func TestAuthAndDB(t *testing.T) {
	srv := redistest.NewServer(t, redistest.ServerOptions{Password: "s3cret"})
	if _, err := srv.Do("ACL", "SETUSER", "limiter", "on", ">u-pass", "~*", "+@all"); err != nil {
		t.Fatal(err)
	}
	req := ratelimit.Request{Key: "k", Policy: tbPolicy}
	for _, tc := range []struct {
		name string
		opts Options
		kind string // ErrorKind of the error; empty means success
	}{
		{"password", Options{Password: "s3cret"}, ""},
		{"acl user", Options{Username: "limiter", Password: "u-pass"}, ""},
		{"db 7", Options{Password: "s3cret", DB: 7}, ""},
		{"no password", Options{}, "connection"},
		{"wrong password", Options{Password: "nope"}, "connection"},
		{"wrong acl password", Options{Username: "limiter", Password: "nope"}, "connection"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.opts.Addrs = []string{srv.Addr()}
			s := mustNew(t, tc.opts)
			out := make([]ratelimit.Decision, 1)
			_, err := s.Evaluate(context.Background(), []ratelimit.Request{req}, out)
			if got := ErrorKind(err); got != tc.kind {
				t.Fatalf("Evaluate: error %v (kind %q), want kind %q", err, got, tc.kind)
			}
			if err != nil {
				return
			}
			key := appendKeys(nil, s.prefix, tag(req.Key), specOf(tbPolicy))[0]
			for db := range 8 {
				c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr()}, Password: "s3cret",
					SelectDB: db, ForceSingleClient: true, DisableCache: true})
				if err != nil {
					t.Fatal(err)
				}
				n, err := c.Do(context.Background(), c.B().Exists().Key(key).Build()).AsInt64()
				c.Close()
				if err != nil {
					t.Fatal(err)
				}
				if want := int64(0); db == tc.opts.DB && n != 1 || db != tc.opts.DB && n != want {
					t.Errorf("EXISTS %s in db %d = %d, want the key in db %d only", key, db, n, tc.opts.DB)
				}
			}
		})
	}
}

// TestSentinel: limits work through the master name (1 master, 1 replica,
// 1 sentinel), and their keys live on the master.
func TestSentinel(t *testing.T) {
	sn := redistest.NewSentinel(t, redistest.SentinelOptions{})
	s := mustNew(t, Options{Mode: Sentinel, Addrs: sn.SentinelAddrs(), MasterName: sn.MasterName()})
	req := ratelimit.Request{Key: "k", Policy: ratelimit.MustPolicy(ratelimit.PolicyConfig{
		Algorithm: ratelimit.FixedWindow, Limit: 3, Window: ratelimit.MaxWindow})}
	for i := range 4 {
		ok, out := evaluate(t, s, req)
		if want := i < 3; ok != want || want && out[0].Remaining != int64(2-i) {
			t.Fatalf("request %d = %v, remaining %d; want %v, remaining %d", i, ok, out[0].Remaining, want, 2-i)
		}
	}
	key := appendKeys(nil, s.prefix, tag(req.Key), specOf(req.Policy))[0]
	if n, err := sn.Master.Do("EXISTS", key); err != nil || n != int64(1) {
		t.Errorf("EXISTS %s on the master = %v, %v; want 1", key, n, err)
	}
}

// TestLazyConnect: New dials nothing and succeeds while Redis is down;
// calls fail fast with a connection error; once Redis is up the same store
// works without a restart. docs/reliability.md row B12.
func TestLazyConnect(t *testing.T) {
	srv := redistest.NewServer(t, redistest.ServerOptions{})
	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	// New dials nothing: a listener sees no connection from it. (A dial
	// New made would wait in the accept queue, so the short deadline below
	// cannot miss it however busy the machine is.)
	ln := testkit.Listen(t)
	mustNew(t, Options{Addrs: []string{ln.Addr().String()}})
	ln.(*net.TCPListener).SetDeadline(time.Now().Add(50 * time.Millisecond))
	if c, err := ln.Accept(); err == nil {
		c.Close()
		t.Error("New dialed Redis, want no dialing before the first call")
	}

	s := mustNew(t, Options{Addrs: []string{srv.Addr()}, Timeout: 500 * time.Millisecond})
	req := []ratelimit.Request{{Key: "k", Policy: tbPolicy}}
	out := make([]ratelimit.Decision, 1)
	// A connection error, not a timeout: the call failed as soon as the
	// dial was refused instead of waiting out the Timeout.
	_, err := s.Evaluate(context.Background(), req, out)
	if kind := ErrorKind(err); kind != "connection" {
		t.Fatalf("Evaluate with Redis down: %v (kind %q), want a connection error", err, kind)
	}
	if err := s.Ping(context.Background()); ErrorKind(err) != "connection" {
		t.Errorf("Ping with Redis down: %v, want a connection error", err)
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err := s.Evaluate(context.Background(), req, out)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Evaluate 5s after Redis came up: %v", err)
		}
	}
	if err := s.Ping(context.Background()); err != nil {
		t.Errorf("Ping with Redis up: %v", err)
	}
}

// TestTimeoutNoRetry: a script whose reply does not come in time is a
// "timeout" error, within the store's timeout, and is never re-sent: once
// the server resumes it has run at most once (once if its bytes were
// delivered, not at all if the connection was dropped first), and the
// budget shows exactly that. docs/reliability.md rows B2, B13.
func TestTimeoutNoRetry(t *testing.T) {
	srv := redistest.NewServer(t, redistest.ServerOptions{})
	s := mustNew(t, Options{Addrs: []string{srv.Addr()}, Timeout: 200 * time.Millisecond})
	p := ratelimit.MustPolicy(ratelimit.PolicyConfig{Algorithm: ratelimit.TokenBucket, Capacity: 10, Rate: ratelimit.MinRate})
	req := []ratelimit.Request{{Key: "k", Policy: p}}
	evaluate(t, s, req...)
	before := cmdCalls(t, srv, "evalsha")
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	out := make([]ratelimit.Decision, 1)
	_, err := s.Evaluate(context.Background(), req, out)
	elapsed := time.Since(start)
	if err := srv.Cont(); err != nil {
		t.Fatal(err)
	}
	if kind := ErrorKind(err); kind != "timeout" || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Evaluate on a stopped server: %v (kind %q), want a timeout", err, kind)
	}
	if elapsed > time.Second {
		t.Errorf("Evaluate on a stopped server took %v, want about the 200ms timeout", elapsed)
	}
	var d ratelimit.Decision
	deadline := time.Now().Add(5 * time.Second)
	for {
		out := make([]ratelimit.Decision, 1)
		if err := s.Peek(context.Background(), req, out); err == nil {
			d = out[0]
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("store did not recover after SIGCONT")
		}
	}
	// The EVALSHAs since before: the timed-out one (if delivered) and the
	// Peek (the first one succeeds once the server runs again).
	runs := cmdCalls(t, srv, "evalsha") - before - 1
	if runs < 0 || runs > 1 {
		t.Fatalf("EVALSHA calls %d → %d: the timed-out script ran %d times, want at most once", before, before+runs+1, runs)
	}
	if want := int64(10 - 1 - runs); d.Remaining != want {
		t.Errorf("remaining %d after one admitted request and a timed-out one that ran %d times, want %d", d.Remaining, runs, want)
	}
}

// TestServerErrors: an OOM answer wraps ErrUnavailable; a key holding
// something else is a script error.
func TestServerErrors(t *testing.T) {
	srv := redistest.NewServer(t, redistest.ServerOptions{})
	s := mustNew(t, Options{Addrs: []string{srv.Addr()}})
	req := []ratelimit.Request{{Key: "k", Policy: tbPolicy}}
	out := make([]ratelimit.Decision, 1)
	key := appendKeys(nil, s.prefix, tag("k"), specOf(tbPolicy))[0]
	if _, err := srv.Do("SET", key, "not a state"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Evaluate(context.Background(), req, out); ErrorKind(err) != "script" || errors.Is(err, ErrUnavailable) {
		t.Errorf("Evaluate on a foreign value: %v (kind %q), want a script error", err, ErrorKind(err))
	}
	if _, err := srv.Do("CONFIG", "SET", "maxmemory", "1"); err != nil {
		t.Fatal(err)
	}
	req[0].Key = "other"
	_, err := s.Evaluate(context.Background(), req, out)
	if !errors.Is(err, ErrUnavailable) || ErrorKind(err) != "other" {
		t.Errorf("Evaluate over maxmemory: %v (kind %q), want ErrUnavailable", err, ErrorKind(err))
	}
}

func TestErrorKind(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{nil, ""},
		{fmt.Errorf("redis store: run script: %w", context.DeadlineExceeded), "timeout"},
		{fmt.Errorf("redis store: run script: %w", context.Canceled), "other"},
		{ErrClosed, "other"},
		{&connectError{errors.New("WRONGPASS")}, "connection"},
		{fmt.Errorf("x: %w", rueidis.ErrClosing), "connection"},
		{fmt.Errorf("redis store: run script: %w: 3 integers", errBadReply), "script"},
		{errors.New("something"), "other"},
		{fmt.Errorf("redis store: %w", ratelimit.ErrInvalidCost), "other"},
	} {
		if got := ErrorKind(tc.err); got != tc.want {
			t.Errorf("ErrorKind(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}
