package redistest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

func TestSentinelFailover(t *testing.T) {
	t.Parallel()
	sn := NewSentinel(t, SentinelOptions{})
	if sn.MasterName() != "mymaster" || len(sn.SentinelAddrs()) != 1 {
		t.Fatalf("MasterName() = %q, SentinelAddrs() = %v; want mymaster and one address", sn.MasterName(), sn.SentinelAddrs())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if addr, err := sn.MasterAddr(ctx); addr != sn.Master.Addr() || err != nil {
		t.Fatalf("MasterAddr() = %s, %v; want %s", addr, err, sn.Master.Addr())
	}
	m, err := sn.Sentinels[0].Do("SENTINEL", "MASTER", "mymaster")
	if err != nil {
		t.Fatal(err)
	}
	if f := pairs(m); f["flags"] != "master" || f["quorum"] != "1" || f["down-after-milliseconds"] != "1000" || f["failover-timeout"] != "3000" {
		t.Errorf("SENTINEL MASTER mymaster: flags %s quorum %s down-after %s failover-timeout %s; want master, 1, 1000, 3000",
			f["flags"], f["quorum"], f["down-after-milliseconds"], f["failover-timeout"])
	}

	if _, err := sn.Sentinels[0].Do("SENTINEL", "FAILOVER", "mymaster"); err != nil {
		t.Fatal(err)
	}
	err = waitUntil(ctx, "sentinel to promote the replica", func(ctx context.Context) error {
		addr, err := sn.MasterAddr(ctx)
		if err != nil || addr != sn.Replica.Addr() {
			return fmt.Errorf("master %s, err %v", addr, err)
		}
		info, err := sn.Replica.infoContext(ctx, "replication")
		if err != nil || info["role"] != "master" {
			return fmt.Errorf("replica role %q, err %v", info["role"], err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestSentinelThreeWithPassword(t *testing.T) {
	t.Parallel()
	sn := NewSentinel(t, SentinelOptions{Sentinels: 3, Password: "pw", MasterName: "other"})
	if len(sn.SentinelAddrs()) != 3 {
		t.Fatalf("SentinelAddrs() = %v, want 3", sn.SentinelAddrs())
	}
	for _, s := range sn.Sentinels {
		v, err := s.Do("SENTINEL", "MASTER", "other")
		if err != nil {
			t.Fatal(err)
		}
		f := pairs(v)
		if f["quorum"] != "2" || f["num-other-sentinels"] != "2" || f["num-slaves"] != "1" || f["flags"] != "master" {
			t.Errorf("sentinel %s: quorum %s, others %s, replicas %s, flags %s; want 2, 2, 1, master",
				s.Addr(), f["quorum"], f["num-other-sentinels"], f["num-slaves"], f["flags"])
		}
	}
	_, err := roundTrip(context.Background(), "tcp", sn.Master.Addr(), "", []any{"PING"})
	var re *ReplyError
	if !errors.As(err, &re) || re.Prefix() != "NOAUTH" {
		t.Errorf("PING the master without password: %v, want NOAUTH", err)
	}
}

func TestSentinelOptionsRefused(t *testing.T) {
	t.Parallel()
	Require(t)
	for _, o := range []SentinelOptions{{Sentinels: 1, Quorum: 2}, {Sentinels: -1}, {MasterName: "a b"}} {
		if sn, err := StartSentinel(o); err == nil {
			sn.Close()
			t.Errorf("StartSentinel(%+v) succeeded, want an error", o)
		}
	}
}
