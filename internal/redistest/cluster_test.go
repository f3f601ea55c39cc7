package redistest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"
)

func TestClusterMasters(t *testing.T) {
	t.Parallel()
	c := NewCluster(t, ClusterOptions{})
	if len(c.Nodes) != 3 || len(c.Masters) != 3 || len(c.Replicas) != 0 || len(c.Addrs()) != 3 {
		t.Fatalf("got %d nodes, %d masters, %d replicas, %d addrs; want 3, 3, 0, 3", len(c.Nodes), len(c.Masters), len(c.Replicas), len(c.Addrs()))
	}
	for _, s := range c.Nodes {
		checkClusterInfo(t, s, 3)
	}
	checkSlots(t, c)

	// Writes go to the slot owner; the others redirect.
	v, err := c.Nodes[0].Do("CLUSTER", "KEYSLOT", "user:42")
	if err != nil {
		t.Fatal(err)
	}
	slot := int(v.(int64))
	for i, s := range c.Masters {
		lo, hi := slotRange(i, len(c.Masters))
		_, err := s.Do("SET", "user:42", "x")
		var re *ReplyError
		switch owner := lo <= slot && slot <= hi; {
		case owner && err != nil:
			t.Errorf("SET on the owner of slot %d (%s): %v", slot, s.Addr(), err)
		case !owner && (!errors.As(err, &re) || re.Prefix() != "MOVED"):
			t.Errorf("SET on %s, not the owner of slot %d: error %v, want MOVED", s.Addr(), slot, err)
		}
	}

	// A crashed and restarted master rejoins with its slots (nodes.conf).
	m := c.Masters[1]
	if err := m.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := m.Restart(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := c.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	checkSlots(t, c)
}

func TestClusterReplicas(t *testing.T) {
	t.Parallel()
	c := NewCluster(t, ClusterOptions{Masters: 3, ReplicasPerMaster: 1})
	if len(c.Nodes) != 6 || len(c.Replicas) != 3 {
		t.Fatalf("got %d nodes, %d replicas; want 6, 3", len(c.Nodes), len(c.Replicas))
	}
	for _, s := range c.Nodes {
		checkClusterInfo(t, s, 6)
	}
	for i, r := range c.Replicas {
		info, err := r.Info("replication")
		if err != nil {
			t.Fatal(err)
		}
		if info["role"] != "slave" || info["master_port"] != strconv.Itoa(c.Masters[i].Port()) || info["master_link_status"] != "up" {
			t.Errorf("replica %s: role %s master_port %s link %s; want slave of port %d, up",
				r.Addr(), info["role"], info["master_port"], info["master_link_status"], c.Masters[i].Port())
		}
	}

	// The harness supports a manual failover: the replica takes over.
	r := c.Replicas[0]
	if _, err := r.Do("CLUSTER", "FAILOVER"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	err := waitUntil(ctx, "replica to become master", func(ctx context.Context) error {
		info, err := r.infoContext(ctx, "replication")
		if err != nil || info["role"] != "master" {
			return fmt.Errorf("role %q, err %v", info["role"], err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Wait(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestClusterOptionsRefused(t *testing.T) {
	t.Parallel()
	Require(t)
	for _, o := range []ClusterOptions{{Masters: -1}, {ReplicasPerMaster: -1}} {
		if c, err := StartCluster(o); err == nil {
			c.Close()
			t.Errorf("StartCluster(%+v) succeeded, want an error", o)
		}
	}
}

// checkClusterInfo checks that s reports a healthy cluster of n nodes.
func checkClusterInfo(t *testing.T, s *Server, n int) {
	t.Helper()
	v, err := s.Do("CLUSTER", "INFO")
	if err != nil {
		t.Fatal(err)
	}
	info := parseInfo(v.(string))
	if info["cluster_state"] != "ok" || info["cluster_slots_ok"] != "16384" || info["cluster_known_nodes"] != strconv.Itoa(n) {
		t.Errorf("%s CLUSTER INFO: state %s, slots_ok %s, known_nodes %s; want ok, 16384, %d",
			s.Addr(), info["cluster_state"], info["cluster_slots_ok"], info["cluster_known_nodes"], n)
	}
}

// checkSlots checks, through CLUSTER SLOTS on every master, that each
// master serves exactly its share of the slots.
func checkSlots(t *testing.T, c *Cluster) {
	t.Helper()
	want := map[string]string{}
	for i, m := range c.Masters {
		lo, hi := slotRange(i, len(c.Masters))
		want[fmt.Sprintf("%d-%d", lo, hi)] = strconv.Itoa(m.Port())
	}
	for _, s := range c.Masters {
		v, err := s.Do("CLUSTER", "SLOTS")
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, e := range v.([]any) {
			r := e.([]any)
			master := r[2].([]any)
			got[fmt.Sprintf("%d-%d", r[0], r[1])] = fmt.Sprint(master[1])
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("CLUSTER SLOTS on %s: %v, want %v", s.Addr(), got, want)
		}
	}
}
