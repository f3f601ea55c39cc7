package redis

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluice-gw/sluice/internal/redistest"
)

// TestPingRefusesWhatWritesWould: Ping fails, as unavailable and without
// writing anything, when Redis answers PING but would refuse a decision's
// writes (docs/reliability.md row C5: a master short of min-replicas-to-write; a
// replica), and passes again once writes would be taken. A readiness probe
// or a half-open breaker trusting PING would send traffic to a server that
// fails every decision.
func TestPingRefusesWhatWritesWould(t *testing.T) {
	srv := redistest.NewServer(t, redistest.ServerOptions{})
	s := mustNew(t, Options{Addrs: []string{srv.Addr()}, Timeout: 2 * time.Second})
	ctx := context.Background()
	if err := s.Ping(ctx); err != nil {
		t.Fatalf("Ping on a writable master: %v", err)
	}

	// No replica, one required: writes fail with NOREPLICAS, PING answers.
	if _, err := srv.Do("CONFIG", "SET", "min-replicas-max-lag", 10, "min-replicas-to-write", 1); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Do("SET", "probe-check", 1); err == nil {
		t.Fatal("the master took a write with min-replicas-to-write 1 and no replica")
	}
	if _, err := srv.Do("PING"); err != nil {
		t.Fatalf("PING: %v", err)
	}
	err := s.Ping(ctx)
	if !errors.Is(err, ErrUnavailable) || ErrorKind(err) != "other" {
		t.Fatalf("Ping without the replicas writes need: %v (kind %q), want ErrUnavailable (kind other)", err, ErrorKind(err))
	}
	if n, err := srv.Do("DBSIZE"); err != nil || n != int64(0) {
		t.Fatalf("DBSIZE = %v (%v), want 0: Ping wrote", n, err)
	}
	if _, err := srv.Do("CONFIG", "SET", "min-replicas-to-write", 0); err != nil {
		t.Fatal(err)
	}
	if err := s.Ping(ctx); err != nil {
		t.Fatalf("Ping once writes are taken again: %v", err)
	}
	if s.pingOnly.Load() {
		t.Error("Ping fell back to PING against Redis 7")
	}

	// A replica answers PING and refuses writes: READONLY.
	rep, err := redistest.StartReplica(srv, redistest.ServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rep.Close() })
	rs := mustNew(t, Options{Addrs: []string{rep.Addr()}, Timeout: 2 * time.Second})
	if err := rs.Ping(ctx); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Ping on a replica: %v, want ErrUnavailable (READONLY)", err)
	}
}

// TestPingEveryDeployment: the write probe, a script of no keys, runs on
// each deployment (on Cluster, at any master).
func TestPingEveryDeployment(t *testing.T) {
	for _, d := range deployments {
		t.Run(d.name, func(t *testing.T) {
			s := mustNew(t, Options{Mode: d.mode, Addrs: d.addrs(t), Timeout: 5 * time.Second})
			for range 5 {
				if err := s.Ping(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
			if s.pingOnly.Load() {
				t.Error("Ping fell back to PING against Redis 7")
			}
		})
	}
}
