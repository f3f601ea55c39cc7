package faultload

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluice-gw/sluice/internal/redistest"
)

// reshard is row D3 of docs/reliability.md: 1,000 slots, among them the accounting key's,
// move from their master to the next one while the load runs, the way
// `redis-cli --cluster reshard` moves them (IMPORTING/MIGRATING, MIGRATE,
// SETSLOT NODE), spoken directly over RESP.
func reshard(_ context.Context, e *Env) error {
	cl, err := redistest.StartCluster(redistest.ClusterOptions{Masters: 3, Timeout: time.Minute})
	if err != nil {
		return err
	}
	e.Cleanup(func() { cl.Close() })
	e.Redis(fmt.Sprintf("{mode: cluster, addrs: [%s]}", quoted(cl.Addrs())))
	var moved, keys int
	var acctSlot int64
	e.Inject(e.Before, "reshard 1000 slots", func(ctx context.Context) error {
		slot, err := accountingSlot(cl)
		if err != nil {
			return err
		}
		acctSlot = slot
		m := len(cl.Masters)
		i := int(slot) * m / 16384
		lo, hi := i*16384/m, (i+1)*16384/m-1
		first := max(lo, min(int(slot)-500, hi-999))
		src, dst := cl.Masters[i], cl.Masters[(i+1)%m]
		srcID, err := src.Do("CLUSTER", "MYID")
		if err != nil {
			return err
		}
		dstID, err := dst.Do("CLUSTER", "MYID")
		if err != nil {
			return err
		}
		nodes, err := dialNodes(cl)
		if err != nil {
			return err
		}
		defer nodes.close()
		for s := first; s < first+1000; s++ {
			n, err := nodes.migrateSlot(ctx, cl, src, dst, s, srcID.(string), dstID.(string))
			if err != nil {
				return fmt.Errorf("slot %d: %w", s, err)
			}
			moved++
			keys += n
		}
		return nil
	})
	e.Recover(e.Before, "resharding done", noop)
	e.Check(func(r *Report) {
		r.Note("moved %d slots (%d keys), the accounting key's slot %d among them; %.2f%% of background requests decided without Redis",
			moved, keys, acctSlot, 100*r.BgShare())
		// ASK, TRYAGAIN or MOVED reaching the store would be script or
		// other errors; timeouts are the loaded machine.
		if n := r.StoreErrors["script"] + r.StoreErrors["other"]; n > 0 {
			r.Fail("%.0f Redis errors (ASK/TRYAGAIN/MOVED surfaced) during the resharding, want 0", n)
		}
		if bound := 1.05 * r.RunBudget; float64(r.RunAllowed) > bound {
			r.Fail("accounting key in a moved slot: %d allowed over the run, want ≤ 1.05·(B + L·T) = %.0f", r.RunAllowed, bound)
		}
	})
	return nil
}

// accountingSlot finds the accounting key's state (the only token-bucket
// key, suffix ":tb") on the masters and returns its slot.
func accountingSlot(cl *redistest.Cluster) (int64, error) {
	for _, m := range cl.Masters {
		cursor := "0"
		for {
			v, err := m.Do("SCAN", cursor, "MATCH", "fault:*:tb", "COUNT", 1000)
			if err != nil {
				return 0, err
			}
			a, _ := v.([]any)
			if len(a) != 2 {
				return 0, fmt.Errorf("SCAN reply %v", v)
			}
			if ks, _ := a[1].([]any); len(ks) > 0 {
				s, err := m.Do("CLUSTER", "KEYSLOT", ks[0])
				if err != nil {
					return 0, err
				}
				return s.(int64), nil
			}
			if cursor, _ = a[0].(string); cursor == "0" {
				break
			}
		}
	}
	return 0, errors.New("accounting key not found on any master")
}

// nodeClients holds one connection to each master for the resharding: a
// thousand slots take six commands each, and a connection of its own per
// command (Server.Do) made the move outlast the run on a loaded machine.
type nodeClients map[*redistest.Server]*redistest.Conn

// dialNodes connects to every master of cl.
func dialNodes(cl *redistest.Cluster) (nodeClients, error) {
	nc := nodeClients{}
	for _, m := range cl.Masters {
		c, err := m.Dial()
		if err != nil {
			nc.close()
			return nil, fmt.Errorf("connect to %s: %w", m.Addr(), err)
		}
		nc[m] = c
	}
	return nc, nil
}

func (nc nodeClients) close() {
	for _, c := range nc {
		c.Close()
	}
}

// do sends args to s and returns the reply.
func (nc nodeClients) do(ctx context.Context, s *redistest.Server, args ...any) (any, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return nc[s].DoContext(ctx, args...)
}

// migrateSlot moves one slot from src to dst and returns how many keys it
// moved.
func (nc nodeClients) migrateSlot(ctx context.Context, cl *redistest.Cluster, src, dst *redistest.Server, slot int, srcID, dstID string) (int, error) {
	if _, err := nc.do(ctx, dst, "CLUSTER", "SETSLOT", slot, "IMPORTING", srcID); err != nil {
		return 0, err
	}
	if _, err := nc.do(ctx, src, "CLUSTER", "SETSLOT", slot, "MIGRATING", dstID); err != nil {
		return 0, err
	}
	n := 0
	for {
		v, err := nc.do(ctx, src, "CLUSTER", "GETKEYSINSLOT", slot, 100)
		if err != nil {
			return n, err
		}
		ks, _ := v.([]any)
		if len(ks) == 0 {
			break
		}
		args := []any{"MIGRATE", "127.0.0.1", dst.Port(), "", 0, 5000, "REPLACE", "KEYS"}
		args = append(args, ks...)
		if _, err := nc.do(ctx, src, args...); err != nil {
			return n, err
		}
		n += len(ks)
	}
	// The new owner first, then the old one, then the rest (as redis-cli),
	// each once.
	order := []*redistest.Server{dst, src}
	for _, m := range cl.Masters {
		if m != dst && m != src {
			order = append(order, m)
		}
	}
	for _, s := range order {
		if _, err := nc.do(ctx, s, "CLUSTER", "SETSLOT", slot, "NODE", dstID); err != nil {
			return n, err
		}
	}
	return n, nil
}
