package redistest

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// slotCount is the number of hash slots in a Redis Cluster.
const slotCount = 16384

// defaultWaitTimeout bounds cluster and sentinel creation when the options
// leave Timeout zero.
const defaultWaitTimeout = 20 * time.Second

// ClusterOptions configures a Redis Cluster. The zero value gives three
// masters without replicas.
type ClusterOptions struct {
	// Masters is the number of masters; the 16384 slots are split evenly
	// among them in order. Zero means 3.
	Masters int

	// ReplicasPerMaster is the number of replicas of each master. Zero means
	// none.
	ReplicasPerMaster int

	// Args are extra redis-server arguments for every node, as in
	// [ServerOptions]; they come last, so they override the defaults. Each
	// node already gets --cluster-enabled yes, its own
	// --cluster-config-file and --cluster-port, and a
	// --cluster-node-timeout of 1000 ms with replicas (so that a replica
	// takes over a killed master within seconds) or 15000 ms, Redis's own
	// default, without (no failover to wait for: a short timeout would
	// only let a node starved of CPU on a loaded machine be marked failed,
	// taking the cluster down).
	Args []string

	// Password, when not empty, is every node's requirepass and masterauth.
	Password string

	// Timeout bounds the whole creation, from starting the processes to the
	// cluster being healthy. Zero means 20 seconds.
	Timeout time.Duration
}

// Cluster is a Redis Cluster of redis-server child processes on 127.0.0.1,
// created without redis-cli: CLUSTER SET-CONFIG-EPOCH, ADDSLOTSRANGE, MEET and
// REPLICATE over RESP. Its fields are set once by [StartCluster]; the Servers
// in them may be killed, stopped and restarted by tests. Its methods are safe
// for concurrent use. Close it when done.
type Cluster struct {
	// Nodes holds every node: the masters first, then the replicas.
	Nodes []*Server

	// Masters holds the initial masters; Masters[i] serves the i-th equal
	// share of the slots, starting with slot 0.
	Masters []*Server

	// Replicas holds the initial replicas; Replicas[i*ReplicasPerMaster+j]
	// replicates Masters[i].
	Replicas []*Server
}

// StartCluster starts the nodes, joins them into a cluster and waits until
// every node reports cluster_state:ok, knows every other node, agrees on the
// owner of each slot, and every replica is attached to its master. The error
// wraps [ErrUnavailable] when redis-server is not installed.
func StartCluster(opts ClusterOptions) (*Cluster, error) {
	if err := Available(); err != nil {
		return nil, err
	}
	if opts.Masters == 0 {
		opts.Masters = 3
	}
	if opts.Masters < 1 || opts.Masters > slotCount || opts.ReplicasPerMaster < 0 {
		return nil, fmt.Errorf("redistest: cluster with %d masters and %d replicas per master not allowed", opts.Masters, opts.ReplicasPerMaster)
	}
	if opts.Timeout == 0 {
		opts.Timeout = defaultWaitTimeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), opts.Timeout)
	defer cancel()

	nodeTimeout := "1000"
	if opts.ReplicasPerMaster == 0 {
		nodeTimeout = "15000"
	}
	args := append([]string{"--cluster-node-timeout", nodeTimeout}, opts.Args...)
	n := opts.Masters * (1 + opts.ReplicasPerMaster)
	nodes, err := startAll(n, func(int) (*Server, error) {
		return startServer(ServerOptions{Args: args, Password: opts.Password, StartTimeout: opts.Timeout}, nodeKind{cluster: true})
	})
	if err != nil {
		return nil, err
	}
	c := &Cluster{Nodes: nodes, Masters: nodes[:opts.Masters], Replicas: nodes[opts.Masters:]}
	if err := c.create(ctx, opts.ReplicasPerMaster); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// NewCluster starts a cluster for the test t and closes it in t.Cleanup. It
// skips or fails the test like [NewServer].
func NewCluster(t testing.TB, opts ClusterOptions) *Cluster {
	t.Helper()
	c, err := StartCluster(opts)
	Check(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// create joins the started nodes into a cluster and waits until it is
// healthy.
func (c *Cluster) create(ctx context.Context, perMaster int) error {
	ids := make([]string, len(c.Nodes))
	for i, s := range c.Nodes {
		// Distinct config epochs, as redis-cli --cluster create sets them,
		// spare the nodes a round of epoch collision handling.
		if _, err := s.DoContext(ctx, "CLUSTER", "SET-CONFIG-EPOCH", i+1); err != nil {
			return fmt.Errorf("redistest: cluster set-config-epoch on %s: %w", s.Addr(), err)
		}
		id, err := s.DoContext(ctx, "CLUSTER", "MYID")
		if err != nil {
			return fmt.Errorf("redistest: cluster myid on %s: %w", s.Addr(), err)
		}
		ids[i], _ = id.(string)
	}
	for i, s := range c.Masters {
		lo, hi := slotRange(i, len(c.Masters))
		if _, err := s.DoContext(ctx, "CLUSTER", "ADDSLOTSRANGE", lo, hi); err != nil {
			return fmt.Errorf("redistest: cluster addslotsrange %d %d on %s: %w", lo, hi, s.Addr(), err)
		}
	}
	first := c.Nodes[0]
	for _, s := range c.Nodes[1:] {
		if _, err := first.DoContext(ctx, "CLUSTER", "MEET", "127.0.0.1", s.Port(), s.BusPort()); err != nil {
			return fmt.Errorf("redistest: cluster meet %s from %s: %w", s.Addr(), first.Addr(), err)
		}
	}
	if err := waitUntil(ctx, "all cluster nodes to know each other", func(ctx context.Context) error {
		return c.checkKnown(ctx)
	}); err != nil {
		return err
	}
	for j, r := range c.Replicas {
		master := ids[j/perMaster]
		if err := waitUntil(ctx, "cluster replicate on "+r.Addr(), func(ctx context.Context) error {
			_, err := r.DoContext(ctx, "CLUSTER", "REPLICATE", master)
			return err
		}); err != nil {
			return err
		}
	}
	want := make(map[string]string, len(c.Nodes)) // node ID -> master ID, "-" for masters
	for i := range c.Nodes {
		want[ids[i]] = "-"
		if i >= len(c.Masters) {
			want[ids[i]] = ids[(i-len(c.Masters))/perMaster]
		}
	}
	return waitUntil(ctx, "cluster_state:ok with replicas attached", func(ctx context.Context) error {
		if err := c.check(ctx, c.Nodes); err != nil {
			return err
		}
		return c.checkRoles(ctx, want)
	})
}

// slotRange returns the first and last slot of master i of n.
func slotRange(i, n int) (lo, hi int) {
	return i * slotCount / n, (i+1)*slotCount/n - 1
}

// Addrs returns the TCP addresses of the initial masters, for a cluster
// client to start from.
func (c *Cluster) Addrs() []string { return addrs(c.Masters) }

// Close kills every node and removes their directories.
func (c *Cluster) Close() error { return closeAll(c.Nodes) }

// Wait waits until every running node reports cluster_state:ok, knows all
// the nodes, and all of them agree on which node serves each slot: for
// instance after a test killed and restarted a node, or ran CLUSTER FAILOVER.
// It returns an error naming the node that is not ready when ctx ends.
func (c *Cluster) Wait(ctx context.Context) error {
	return waitUntil(ctx, "cluster to be healthy", func(ctx context.Context) error {
		var running []*Server
		for _, s := range c.Nodes {
			if s.Running() {
				running = append(running, s)
			}
		}
		return c.check(ctx, running)
	})
}

// clusterNode is one line of CLUSTER NODES.
type clusterNode struct {
	id, addr, master string
	flags            []string
	slots            []string // "lo-hi" or "n"; migration markers dropped
}

// clusterNodes runs CLUSTER NODES on s and parses the reply.
func clusterNodes(ctx context.Context, s *Server) ([]clusterNode, error) {
	v, err := s.DoContext(ctx, "CLUSTER", "NODES")
	if err != nil {
		return nil, fmt.Errorf("cluster nodes on %s: %w", s.Addr(), err)
	}
	str, _ := v.(string)
	var nodes []clusterNode
	for _, line := range strings.Split(strings.TrimSpace(str), "\n") {
		f := strings.Fields(line)
		if len(f) < 8 {
			return nil, fmt.Errorf("cluster nodes on %s: bad line %q", s.Addr(), line)
		}
		n := clusterNode{id: f[0], addr: f[1], flags: strings.Split(f[2], ","), master: f[3]}
		for _, sl := range f[8:] {
			if !strings.HasPrefix(sl, "[") {
				n.slots = append(n.slots, sl)
			}
		}
		nodes = append(nodes, n)
	}
	return nodes, nil
}

// checkKnown returns nil when every node lists all nodes and none of them
// is still in handshake.
func (c *Cluster) checkKnown(ctx context.Context) error {
	for _, s := range c.Nodes {
		nodes, err := clusterNodes(ctx, s)
		if err != nil {
			return err
		}
		if len(nodes) != len(c.Nodes) {
			return fmt.Errorf("%s knows %d nodes, want %d", s.Addr(), len(nodes), len(c.Nodes))
		}
		for _, n := range nodes {
			if slices.Contains(n.flags, "handshake") || slices.Contains(n.flags, "noaddr") {
				return fmt.Errorf("%s sees %s in state %s", s.Addr(), n.addr, strings.Join(n.flags, ","))
			}
		}
	}
	return nil
}

// check returns nil when each of servers reports cluster_state:ok with all
// slots assigned and all nodes known, and they agree on the slot owners.
func (c *Cluster) check(ctx context.Context, servers []*Server) error {
	var first string
	for _, s := range servers {
		v, err := s.DoContext(ctx, "CLUSTER", "INFO")
		if err != nil {
			return fmt.Errorf("cluster info on %s: %w", s.Addr(), err)
		}
		str, _ := v.(string)
		info := parseInfo(str)
		if info["cluster_state"] != "ok" || info["cluster_slots_assigned"] != strconv.Itoa(slotCount) ||
			info["cluster_known_nodes"] != strconv.Itoa(len(c.Nodes)) {
			return fmt.Errorf("%s: cluster_state:%s cluster_slots_assigned:%s cluster_known_nodes:%s (want ok, %d, %d)",
				s.Addr(), info["cluster_state"], info["cluster_slots_assigned"], info["cluster_known_nodes"], slotCount, len(c.Nodes))
		}
		nodes, err := clusterNodes(ctx, s)
		if err != nil {
			return err
		}
		var owners []string
		for _, n := range nodes {
			if len(n.slots) > 0 {
				owners = append(owners, n.id+" "+strings.Join(n.slots, " "))
			}
		}
		slices.Sort(owners)
		view := strings.Join(owners, "; ")
		if first == "" {
			first = view
		} else if view != first {
			return fmt.Errorf("slot owners differ: %s sees %q, %s sees %q", servers[0].Addr(), first, s.Addr(), view)
		}
	}
	return nil
}

// checkRoles returns nil when every node sees each node in the role given
// by want (node ID to master ID, "-" for a master) and every replica has its
// replication link up.
func (c *Cluster) checkRoles(ctx context.Context, want map[string]string) error {
	for _, s := range c.Nodes {
		nodes, err := clusterNodes(ctx, s)
		if err != nil {
			return err
		}
		for _, n := range nodes {
			if w, ok := want[n.id]; !ok || n.master != w {
				return fmt.Errorf("%s sees node %s (%s) with master %q, want %q", s.Addr(), n.id, n.addr, n.master, w)
			}
		}
	}
	for _, r := range c.Replicas {
		info, err := r.infoContext(ctx, "replication")
		if err != nil {
			return err
		}
		if info["master_link_status"] != "up" {
			return fmt.Errorf("replica %s: master_link_status:%s", r.Addr(), info["master_link_status"])
		}
	}
	return nil
}
