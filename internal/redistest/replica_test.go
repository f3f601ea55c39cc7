package redistest

import (
	"context"
	"fmt"
	"testing"
	"time"
)

func TestReplicaFollowsMaster(t *testing.T) {
	t.Parallel()
	m := NewServer(t, ServerOptions{Password: "pw"})
	r := NewReplica(t, m, ServerOptions{Password: "pw"})
	if v, err := r.Do("ROLE"); err != nil || len(v.([]any)) == 0 || v.([]any)[0] != "slave" {
		t.Fatalf("replica ROLE = %v, %v; want slave", v, err)
	}
	if _, err := m.Do("SET", "k", "v"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := waitUntil(ctx, "the write to reach the replica", func(ctx context.Context) error {
		v, err := r.DoContext(ctx, "GET", "k")
		if err == nil && v != "v" {
			return fmt.Errorf("GET k = %v", v)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Do("SET", "k2", "v"); err == nil {
		t.Error("a write to the replica succeeded, want READONLY")
	}
}
