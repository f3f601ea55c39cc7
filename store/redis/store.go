package redis

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluice-gw/sluice/ratelimit"
)

// Mode is the Redis deployment a Store talks to.
type Mode string

// Deployments.
const (
	// Standalone is one Redis server (DB may be chosen).
	Standalone Mode = "standalone"
	// Sentinel is a master found through Sentinel by its master name; the
	// store follows failovers the sentinels announce.
	Sentinel Mode = "sentinel"
	// Cluster is a Redis Cluster, found through the addresses of some of its nodes.
	Cluster Mode = "cluster"
)

// Defaults applied by New.
const (
	DefaultPrefix      = "sluice"
	DefaultAddr        = "127.0.0.1:6379"
	DefaultTimeout     = 50 * time.Millisecond
	DefaultDialTimeout = time.Second
	// DefaultMaxFlushDelay is rueidis' suggested flush delay: with many
	// concurrent calls, waiting this long lets one socket write carry many
	// scripts, which saves client and server CPU per decision.
	DefaultMaxFlushDelay = 20 * time.Microsecond
)

// reconnectInterval is the least time between two attempts to set up the
// client while Redis is unreachable: at most 10 attempts per second.
const reconnectInterval = 100 * time.Millisecond

// Options configures a Store. The zero value is a standalone Redis on
// 127.0.0.1:6379 with the default prefix and timeouts.
type Options struct {
	// Mode is the deployment; empty means Standalone.
	Mode Mode
	// Addrs are host:port addresses: the server (Standalone, only the first
	// is used), the sentinels (Sentinel) or any cluster nodes (Cluster).
	// Empty means 127.0.0.1:6379.
	Addrs []string
	// MasterName is the name the sentinels monitor the master under;
	// required for Sentinel, unused otherwise.
	MasterName string
	// Username and Password authenticate to Redis (AUTH, or an ACL user when
	// Username is set). Empty means no AUTH. Sentinels are reached with the
	// same TLS settings and their own credentials below.
	Username string
	Password string
	// SentinelUsername and SentinelPassword authenticate to the sentinels
	// (Sentinel mode only). Empty means no AUTH.
	SentinelUsername string
	SentinelPassword string
	// DB is the database number for Standalone and Sentinel; it must be 0 for
	// Cluster. Zero means database 0.
	DB int
	// TLS, when not nil, makes every connection use TLS with this config.
	TLS *tls.Config
	// Prefix starts every key the store writes; empty means "sluice". It must
	// not contain '{' or '}', which would change Cluster slot grouping.
	Prefix string
	// Timeout bounds one Evaluate, Peek or Reset, including the reload of
	// the script after a NOSCRIPT and, on Cluster, the refund of a denied
	// request (the refund after a failed script run goes on in the
	// background, with a Timeout of its own); zero means 50ms.
	Timeout time.Duration
	// DialTimeout bounds setting up one connection (TCP, TLS, AUTH, SELECT)
	// outside a call; a call waits no longer than its own Timeout. Zero means
	// one second.
	DialTimeout time.Duration
	// MaxFlushDelay is how long the client may wait before writing queued
	// commands, so that concurrent calls share one socket write
	// (auto-pipelining). It adds at most about that much latency, and only
	// while several calls are in flight (a lone caller is written at once).
	// Zero means DefaultMaxFlushDelay; a negative value always writes at
	// once. Unused by NewFromClient.
	MaxFlushDelay time.Duration
	// Logger receives the store's warnings about the deployment: an
	// evicting maxmemory-policy, a Sentinel-mode user that may not run ROLE.
	// Each is logged once per Store. Nil means discard.
	Logger *slog.Logger
	// Clock is for tests only. Nil (production) means each script reads
	// Redis TIME, so every gateway instance shares Redis' clock. A non-nil
	// Clock's time is passed to the scripts explicitly, so a timeline can be
	// replayed on Redis exactly as on the memory store.
	Clock ratelimit.Clock
}

// conn is a ready client and whether it is a cluster client.
type conn struct {
	c       rueidis.Client
	cluster bool
}

// Store is a [ratelimit.Store] on Redis. Each limit's state lives in keys
// that share one Cluster hash slot; every decision is one Lua script run
// (see the package documentation for the semantics across slots). A Store
// is safe for concurrent use.
type Store struct {
	prefix  string
	timeout time.Duration
	clock   ratelimit.Clock
	mode    Mode
	copt    rueidis.ClientOption
	owned   bool // the Store built the client and closes it

	cur      atomic.Pointer[conn]
	batch    batcher     // combines concurrent Evaluate calls (batch.go)
	pingOnly atomic.Bool // Redis read no script flags: Ping sends PING (see writeProbe)

	mu      sync.Mutex
	closed  bool
	dialing chan struct{} // closed when the attempt in flight ends
	lastTry time.Time
	lastErr error
	wg      sync.WaitGroup // the connect attempt and background refunds

	// Sentinel mode: the re-resolution of the master (sentinel_resilience.go).
	resolving   bool
	lastResolve time.Time
	resolves    atomic.Int64                   // re-resolutions started (for tests)
	retired     map[*time.Timer]rueidis.Client // replaced clients, closed by the timer
	roleDenied  atomic.Bool                    // the user may not run ROLE: direct clients
	watchOnce   sync.Once                      // starts watch with the first direct client

	log             *slog.Logger
	done            chan struct{} // closed by Close
	evictionChecked bool          // checkEviction ran; only connect reads it, one at a time
}

var _ ratelimit.Store = (*Store)(nil)

// New validates opts and returns a Store. It dials nothing: the client is
// set up on the first call that needs Redis, in the background, and a call
// waits for it no longer than its Timeout; while Redis is unreachable each
// call fails fast with a "connection" error (see [ErrorKind]) and a new
// attempt is made at most every 100ms. So New succeeds while Redis is down,
// and a store that comes up later is used without a restart. (rueidis'
// NewClient dials, and for Cluster and Sentinel fails, when no server
// answers; it has no lazy mode, hence the deferred setup.)
func New(opts Options) (*Store, error) {
	s, err := newStore(opts)
	if err != nil {
		return nil, err
	}
	addrs := opts.Addrs
	if len(addrs) == 0 {
		addrs = []string{DefaultAddr}
	}
	dialTimeout := opts.DialTimeout
	if dialTimeout == 0 {
		dialTimeout = DefaultDialTimeout
	}
	flushDelay := opts.MaxFlushDelay
	switch {
	case flushDelay == 0:
		flushDelay = DefaultMaxFlushDelay
	case flushDelay < 0:
		flushDelay = 0
	}
	s.owned = true
	s.copt = rueidis.ClientOption{
		InitAddress: addrs,
		Username:    opts.Username,
		Password:    opts.Password,
		SelectDB:    opts.DB,
		TLSConfig:   opts.TLS,
		Dialer:      net.Dialer{Timeout: dialTimeout, KeepAlive: time.Second},
		// A connection whose replies stall this long is closed and redialed
		// (and, on Cluster, triggers a slot-map refresh).
		ConnWriteTimeout: max(time.Second, 10*s.timeout),
		// Never re-send a command after a network error: a script that timed
		// out may have run, and would count twice.
		DisableRetry: true,
		DisableCache: true,
		// Always use the pipe's background reader and writer. Without it a
		// connection serving one call at a time (rueidis' "sync" mode, the
		// usual case at low concurrency) is closed whenever a call times
		// out, and redialed by the next call: while Redis hangs each probe
		// opens a connection (docs/reliability.md row B2), and right
		// after recovery one spurious timeout costs a redial and the calls
		// behind it (the relapse). In the background mode a timeout only
		// abandons its own reply; a connection whose replies stall is
		// closed by rueidis' keep-alive PING after ConnWriteTimeout.
		AlwaysPipelining: true,
		ClientName:       "sluice",
		MaxFlushDelay:    flushDelay,
	}
	switch s.mode {
	case Standalone:
		s.copt.InitAddress = addrs[:1]
		s.copt.ForceSingleClient = true
	case Sentinel:
		s.copt.Sentinel = rueidis.SentinelOption{
			MasterSet: opts.MasterName,
			Username:  opts.SentinelUsername,
			Password:  opts.SentinelPassword,
			TLSConfig: opts.TLS,
			Dialer:    s.copt.Dialer,
			// Besides reacting to +switch-master, re-ask the sentinels
			// periodically so a missed event cannot pin the old master.
			TopologyRefreshInterval: sentinelRefresh,
		}
		// Every connection is checked after dialing: ROLE, and a master
		// must be the one the sentinels name (see sentinelDial). The
		// sentinel connections go through it too and pass as sentinels.
		s.copt.DialCtxFn = s.sentinelDial
	case Cluster:
		// The slot map is also refreshed on MOVED/ASK and whenever a
		// connection closes (rueidis' behaviour); this catches the rest.
		s.copt.ClusterOption.ShardsRefreshInterval = 5 * time.Second
	}
	return s, nil
}

// NewFromClient returns a Store that uses c, which the caller keeps owning:
// Close does not close it. opts.Mode, Addrs, MasterName, Username, Password,
// DB, TLS and DialTimeout are ignored (c is already configured); Cluster
// mode is taken from c.Mode(). It is meant for tests and for programs that
// share one client. For production clients, set DisableRetry so a timed-out
// script is never re-sent.
func NewFromClient(c rueidis.Client, opts Options) (*Store, error) {
	if c == nil {
		return nil, errors.New("redis store: NewFromClient needs a client")
	}
	opts.Mode = ""
	opts.DB = 0
	s, err := newStore(opts)
	if err != nil {
		return nil, err
	}
	s.cur.Store(&conn{c: c, cluster: c.Mode() == rueidis.ClientModeCluster})
	return s, nil
}

// newStore validates the options both constructors share.
func newStore(opts Options) (*Store, error) {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("redis store: "+format, args...))
	}
	s := &Store{prefix: opts.Prefix, timeout: opts.Timeout, clock: opts.Clock, mode: opts.Mode,
		log: opts.Logger, done: make(chan struct{})}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.prefix == "" {
		s.prefix = DefaultPrefix
	}
	if strings.ContainsAny(s.prefix, "{}") {
		bad("prefix %q must not contain '{' or '}'", s.prefix)
	}
	if s.timeout == 0 {
		s.timeout = DefaultTimeout
	}
	if s.timeout < 0 {
		bad("timeout must not be negative, got %v", opts.Timeout)
	}
	s.batch.slots, s.batch.maxWait = batchSlots, min(batchMaxWait, s.timeout/8)
	if opts.DialTimeout < 0 {
		bad("dial timeout must not be negative, got %v", opts.DialTimeout)
	}
	if s.mode == "" {
		s.mode = Standalone
	}
	switch s.mode {
	case Standalone:
	case Sentinel:
		if opts.MasterName == "" {
			bad("mode sentinel needs a master name")
		}
	case Cluster:
		if opts.DB != 0 {
			bad("db must be 0 in mode cluster, got %d", opts.DB)
		}
	default:
		bad("unknown mode %q (standalone, sentinel or cluster)", opts.Mode)
	}
	if opts.DB < 0 {
		bad("db must not be negative, got %d", opts.DB)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return s, nil
}

// client returns the ready client, starting a connect attempt if there is
// none and waiting for it at most until ctx is done.
func (s *Store) client(ctx context.Context) (*conn, error) {
	if c := s.cur.Load(); c != nil {
		return c, nil
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, ErrClosed
	}
	if c := s.cur.Load(); c != nil {
		s.mu.Unlock()
		return c, nil
	}
	if s.dialing == nil {
		if s.lastErr != nil && time.Since(s.lastTry) < reconnectInterval {
			err := s.lastErr
			s.mu.Unlock()
			return nil, err
		}
		s.dialing = make(chan struct{})
		s.lastTry = time.Now()
		s.wg.Add(1)
		go s.connect(s.dialing)
	}
	done := s.dialing
	s.mu.Unlock()
	select {
	case <-done:
	case <-ctx.Done():
		return nil, fmt.Errorf("redis store: connect: %w", ctx.Err())
	}
	if c := s.cur.Load(); c != nil {
		return c, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	return nil, s.lastErr
}

// connect sets up the client once and publishes it, or the error.
func (s *Store) connect(done chan struct{}) {
	defer s.wg.Done()
	c, err := s.newClient()
	if err == nil && s.mode == Cluster && c.Mode() != rueidis.ClientModeCluster {
		err = errors.New("mode cluster, but the server is not a cluster node")
	}
	if err != nil && c != nil {
		c.Close()
		c = nil
	}
	if c != nil && !s.evictionChecked {
		s.evictionChecked = true
		s.checkEviction(c)
	}
	s.mu.Lock()
	if s.closed && c != nil {
		defer c.Close()
	} else if c != nil {
		cluster := c.Mode() == rueidis.ClientModeCluster
		s.cur.Store(&conn{c: c, cluster: cluster})
	}
	if err != nil {
		s.lastErr = &connectError{err}
	} else {
		s.lastErr = nil
	}
	s.dialing = nil
	s.mu.Unlock()
	close(done)
}

// checkEviction warns when Redis may evict the store's keys: an evicted key
// is a fresh budget. A user that may not run CONFIG GET (NOPERM), or any
// other failure, skips the check quietly (at DEBUG).
func (s *Store) checkEviction(c rueidis.Client) {
	ctx, cancel := context.WithTimeout(context.Background(), max(s.timeout, s.copt.Dialer.Timeout))
	defer cancel()
	m, err := c.Do(ctx, c.B().ConfigGet().Parameter("maxmemory-policy").Build()).AsStrMap()
	policy, ok := m["maxmemory-policy"]
	if err != nil || !ok {
		s.log.Debug("redis store: maxmemory-policy not checked", "error", err)
		return
	}
	if policy != "noeviction" {
		s.log.Warn("redis store: maxmemory-policy may evict rate-limit keys, and an evicted key is a fresh budget; "+
			"set maxmemory-policy noeviction (a cache that needs eviction belongs on another Redis; see docs/operations.md)",
			"maxmemory_policy", policy)
	}
}

// Timeout returns the bound of each Evaluate, Peek and Reset call
// (Options.Timeout, or its default): a caller such as the fallback store
// need not add one of its own.
func (s *Store) Timeout() time.Duration { return s.timeout }

// Close releases the client (unless it came from NewFromClient), after the
// calls in flight finish. Every later call returns [ErrClosed].
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	c := s.cur.Swap(nil)
	close(s.done)
	s.mu.Unlock()
	s.wg.Wait()
	s.closeRetired()
	if c != nil && s.owned {
		c.c.Close()
	}
	return nil
}

// writeProbe is the script Ping runs. It writes nothing, but its shebang,
// without the no-writes flag, makes Redis (7 and later) check before running
// it that the server would take a write: a replica answers READONLY, a
// master short of min-replicas-to-write NOREPLICAS, one over maxmemory with
// noeviction OOM. PING answers in all three cases, while every decision
// fails.
const writeProbe = "#!lua\nreturn 1"

// Ping checks that Redis answers and would accept the writes a decision
// makes, setting up the client if needed. It is bounded by the store's
// Timeout. A server that cannot take writes now gives an error that wraps
// [ErrUnavailable]. Against a Redis older than 7, which reads no script
// flags, Ping falls back to PING for good.
func (s *Store) Ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	c, err := s.client(ctx)
	if err != nil {
		return err
	}
	if !s.pingOnly.Load() {
		err := c.c.Do(ctx, c.c.B().Eval().Script(writeProbe).Numkeys(0).Build()).Error()
		if !isCompileError(err) {
			if err != nil {
				return wrap("ping", err)
			}
			return nil
		}
		s.pingOnly.Store(true)
	}
	if err := c.c.Do(ctx, c.c.B().Ping().Build()).Error(); err != nil {
		return wrap("ping", err)
	}
	return nil
}

// isCompileError reports whether err is Redis failing to compile a script:
// what a Redis older than 7 answers to writeProbe's shebang.
func isCompileError(err error) bool {
	re, ok := rueidis.IsRedisErr(err)
	return ok && strings.Contains(re.Error(), "Error compiling script")
}

// now returns the time argument of the scripts: "" (Redis TIME) or the
// test clock's time in µs.
func (s *Store) now() string {
	if s.clock == nil {
		return ""
	}
	return strconv.FormatInt(s.clock.Now().UnixMicro(), 10)
}
