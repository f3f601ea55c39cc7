package redistest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
)

// SentinelOptions configures a master, one replica and the sentinels that
// watch them. The zero value gives one sentinel with quorum 1 watching
// "mymaster".
type SentinelOptions struct {
	// Sentinels is the number of sentinel processes. Zero means 1.
	Sentinels int

	// Quorum is the number of sentinels that must agree the master is down.
	// Zero means a majority: Sentinels/2 + 1.
	Quorum int

	// MasterName is the name the sentinels monitor the master under. Empty
	// means "mymaster".
	MasterName string

	// DownAfter is down-after-milliseconds: how long the master may fail to
	// answer before a sentinel considers it down. Zero means 1 second.
	DownAfter time.Duration

	// FailoverTimeout is the sentinels' failover-timeout. Zero means 3 seconds.
	FailoverTimeout time.Duration

	// Args are extra redis-server arguments for the master and the replica
	// (not the sentinels), as in [ServerOptions].
	Args []string

	// Password, when not empty, is the requirepass and masterauth of the
	// master and the replica, and the sentinels' auth-pass.
	Password string

	// SentinelPassword, when not empty, is the sentinels' own requirepass
	// (and the sentinel-pass they use with each other), as Helm charts
	// deploy them; [Server.Do] on a sentinel authenticates with it.
	SentinelPassword string

	// Users are ACL rules for extra users of the master and the replica, one
	// string per user in the form of the "user" directive, for example
	// "app on >secret ~* &* +@all -@dangerous" (no spaces inside a rule).
	Users []string

	// Timeout bounds the whole start, until every sentinel reports the master
	// and sees the replica. Zero means 20 seconds.
	Timeout time.Duration
}

// Sentinel is a monitored master with one replica (--replicaof) and a set of
// sentinels (redis-server <conf> --sentinel), all child processes on
// 127.0.0.1. Master and Replica are the initial roles: after a failover, ask
// [Sentinel.MasterAddr] who the master is. Its methods are safe for
// concurrent use. Close it when done.
type Sentinel struct {
	// Master is the initial master.
	Master *Server

	// Replica is the initial replica of Master.
	Replica *Server

	// Sentinels are the sentinel processes.
	Sentinels []*Server

	name string
}

// StartSentinel starts the master, then the replica, waits until the replica
// is in sync, then starts the sentinels and waits until each of them reports
// the master (SENTINEL GET-MASTER-ADDR-BY-NAME), sees the replica and, when
// there are several, sees the other sentinels. The error wraps
// [ErrUnavailable] when redis-server is not installed.
func StartSentinel(opts SentinelOptions) (*Sentinel, error) {
	if err := Available(); err != nil {
		return nil, err
	}
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), opts.Timeout)
	defer cancel()
	sn := &Sentinel{name: opts.MasterName}
	if err := sn.start(ctx, opts); err != nil {
		sn.Close()
		return nil, err
	}
	return sn, nil
}

// NewSentinel starts a sentinel setup for the test t and closes it in
// t.Cleanup. It skips or fails the test like [NewServer].
func NewSentinel(t testing.TB, opts SentinelOptions) *Sentinel {
	t.Helper()
	sn, err := StartSentinel(opts)
	Check(t, err)
	t.Cleanup(func() { sn.Close() })
	return sn
}

func (o SentinelOptions) withDefaults() (SentinelOptions, error) {
	if o.Sentinels == 0 {
		o.Sentinels = 1
	}
	if o.Quorum == 0 {
		o.Quorum = o.Sentinels/2 + 1
	}
	if o.MasterName == "" {
		o.MasterName = "mymaster"
	}
	if o.DownAfter == 0 {
		o.DownAfter = time.Second
	}
	if o.FailoverTimeout == 0 {
		o.FailoverTimeout = 3 * time.Second
	}
	if o.Timeout == 0 {
		o.Timeout = defaultWaitTimeout
	}
	if o.Sentinels < 1 || o.Quorum < 1 || o.Quorum > o.Sentinels {
		return o, fmt.Errorf("redistest: %d sentinels with quorum %d not allowed", o.Sentinels, o.Quorum)
	}
	if strings.ContainsAny(o.MasterName, " \t\r\n\"'") {
		return o, fmt.Errorf("redistest: master name %q must not contain spaces or quotes", o.MasterName)
	}
	return o, nil
}

func (sn *Sentinel) start(ctx context.Context, opts SentinelOptions) error {
	var err error
	args := opts.Args
	for _, u := range opts.Users {
		args = append(append([]string{"--user"}, strings.Fields(u)...), args...)
	}
	base := ServerOptions{Args: args, Password: opts.Password, StartTimeout: opts.Timeout}
	if sn.Master, err = startServer(base, nodeKind{}); err != nil {
		return err
	}
	replica := base
	replica.Args = append([]string{"--replicaof", "127.0.0.1", strconv.Itoa(sn.Master.Port())}, args...)
	if sn.Replica, err = startServer(replica, nodeKind{}); err != nil {
		return err
	}
	// Sentinels learn replicas from the master's INFO, which they read on
	// connecting and then only every 10 seconds, so start them once the
	// replica is in sync.
	if err := waitUntil(ctx, "replica "+sn.Replica.Addr()+" to sync", func(ctx context.Context) error {
		return replicaInSync(ctx, sn.Master, sn.Replica)
	}); err != nil {
		return err
	}
	conf := sentinelConf(opts, sn.Master.Port())
	sn.Sentinels, err = startAll(opts.Sentinels, func(int) (*Server, error) {
		return startServer(ServerOptions{Password: opts.SentinelPassword, StartTimeout: opts.Timeout}, nodeKind{sentinel: true, conf: conf})
	})
	if err != nil {
		return err
	}
	for _, s := range sn.Sentinels {
		if err := waitUntil(ctx, "sentinel "+s.Addr()+" to watch master and replica", func(ctx context.Context) error {
			return sn.checkSentinel(ctx, s)
		}); err != nil {
			return err
		}
	}
	return nil
}

// sentinelConf returns a sentinel config file body monitoring the master on
// masterPort.
func sentinelConf(o SentinelOptions, masterPort int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "sentinel monitor %s 127.0.0.1 %d %d\n", o.MasterName, masterPort, o.Quorum)
	fmt.Fprintf(&b, "sentinel down-after-milliseconds %s %d\n", o.MasterName, o.DownAfter.Milliseconds())
	fmt.Fprintf(&b, "sentinel failover-timeout %s %d\n", o.MasterName, o.FailoverTimeout.Milliseconds())
	fmt.Fprintf(&b, "sentinel parallel-syncs %s 1\n", o.MasterName)
	if o.Password != "" {
		fmt.Fprintf(&b, "sentinel auth-pass %s %s\n", o.MasterName, strconv.Quote(o.Password))
	}
	if o.SentinelPassword != "" {
		fmt.Fprintf(&b, "sentinel sentinel-pass %s\n", strconv.Quote(o.SentinelPassword))
	}
	return b.String()
}

// replicaInSync returns nil when replica's link to master is up and master
// lists it as an online replica.
func replicaInSync(ctx context.Context, master, replica *Server) error {
	ri, err := replica.infoContext(ctx, "replication")
	if err != nil {
		return err
	}
	if ri["master_link_status"] != "up" {
		return fmt.Errorf("replica %s: master_link_status:%s", replica.Addr(), ri["master_link_status"])
	}
	mi, err := master.infoContext(ctx, "replication")
	if err != nil {
		return err
	}
	for k, v := range mi {
		if strings.HasPrefix(k, "slave") && strings.Contains(v, "port="+strconv.Itoa(replica.Port())+",") && strings.Contains(v, "state=online") {
			return nil
		}
	}
	return fmt.Errorf("master %s does not list replica %s as online", master.Addr(), replica.Addr())
}

// checkSentinel returns nil when sentinel s reports the initial master, sees
// the replica with plain "slave" flags and knows all the other sentinels.
func (sn *Sentinel) checkSentinel(ctx context.Context, s *Server) error {
	addr, err := getMasterAddr(ctx, s, sn.name)
	if err != nil {
		return err
	}
	if addr != sn.Master.Addr() {
		return fmt.Errorf("sentinel %s reports master %s, want %s", s.Addr(), addr, sn.Master.Addr())
	}
	v, err := s.DoContext(ctx, "SENTINEL", "REPLICAS", sn.name)
	if err != nil {
		return fmt.Errorf("sentinel replicas on %s: %w", s.Addr(), err)
	}
	replicas, _ := v.([]any)
	found := false
	for _, r := range replicas {
		m := pairs(r)
		if m["port"] == strconv.Itoa(sn.Replica.Port()) && m["flags"] == "slave" {
			found = true
		}
	}
	if !found {
		return fmt.Errorf("sentinel %s does not see replica %s up (replicas: %v)", s.Addr(), sn.Replica.Addr(), replicas)
	}
	v, err = s.DoContext(ctx, "SENTINEL", "SENTINELS", sn.name)
	if err != nil {
		return fmt.Errorf("sentinel sentinels on %s: %w", s.Addr(), err)
	}
	if others, _ := v.([]any); len(others) != len(sn.Sentinels)-1 {
		return fmt.Errorf("sentinel %s knows %d other sentinels, want %d", s.Addr(), len(others), len(sn.Sentinels)-1)
	}
	return nil
}

// getMasterAddr asks sentinel s for the address of the master called name.
func getMasterAddr(ctx context.Context, s *Server, name string) (string, error) {
	v, err := s.DoContext(ctx, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", name)
	if err != nil {
		return "", fmt.Errorf("sentinel get-master-addr-by-name on %s: %w", s.Addr(), err)
	}
	a, _ := v.([]any)
	if len(a) != 2 {
		return "", fmt.Errorf("sentinel %s: no master named %q (reply %v)", s.Addr(), name, v)
	}
	host, _ := a[0].(string)
	port, _ := a[1].(string)
	return net.JoinHostPort(host, port), nil
}

// pairs turns a flat [k1 v1 k2 v2 ...] array reply into a map.
func pairs(v any) map[string]string {
	a, _ := v.([]any)
	m := make(map[string]string, len(a)/2)
	for i := 0; i+1 < len(a); i += 2 {
		k, _ := a[i].(string)
		val, _ := a[i+1].(string)
		m[k] = val
	}
	return m
}

// MasterName returns the name the sentinels monitor the master under.
func (sn *Sentinel) MasterName() string { return sn.name }

// SentinelAddrs returns the sentinels' TCP addresses.
func (sn *Sentinel) SentinelAddrs() []string { return addrs(sn.Sentinels) }

// MasterAddr asks the running sentinels, in order, for the current master's
// address and returns the first answer. After a failover it differs from
// Master.Addr().
func (sn *Sentinel) MasterAddr(ctx context.Context) (string, error) {
	var errs []error
	for _, s := range sn.Sentinels {
		if !s.Running() {
			continue
		}
		addr, err := getMasterAddr(ctx, s, sn.name)
		if err == nil {
			return addr, nil
		}
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		return "", fmt.Errorf("redistest: no sentinel running")
	}
	return "", errors.Join(errs...)
}

// Close kills the master, the replica and the sentinels and removes their
// directories.
func (sn *Sentinel) Close() error {
	all := append([]*Server{sn.Master, sn.Replica}, sn.Sentinels...)
	return closeAll(all)
}
