package redistest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
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

func TestSentinelPasswordAndUsers(t *testing.T) {
	t.Parallel()
	sn := NewSentinel(t, SentinelOptions{Sentinels: 3, Password: "pw", SentinelPassword: "spw",
		Users: []string{"app on >apw ~* &* +@all -@dangerous"}})
	for _, s := range sn.Sentinels {
		v, err := s.Do("SENTINEL", "MASTER", sn.MasterName())
		if err != nil {
			t.Fatal(err)
		}
		if f := pairs(v); f["num-other-sentinels"] != "2" || f["num-slaves"] != "1" {
			t.Errorf("sentinel %s: others %s, replicas %s; want 2, 1", s.Addr(), f["num-other-sentinels"], f["num-slaves"])
		}
		_, err = roundTrip(context.Background(), "tcp", s.Addr(), "", []any{"SENTINEL", "MASTERS"})
		var re *ReplyError
		if !errors.As(err, &re) || re.Prefix() != "NOAUTH" {
			t.Errorf("sentinel %s without password: %v, want NOAUTH", s.Addr(), err)
		}
	}
	for _, srv := range []*Server{sn.Master, sn.Replica} {
		_, err := roundTrip(context.Background(), "tcp", srv.Addr(), "", []any{"AUTH", "app", "apw"})
		if err != nil {
			t.Errorf("AUTH app on %s: %v", srv.Addr(), err)
		}
	}
	role, err := aclDo(sn.Master.Addr(), "app", "apw", "ROLE")
	var re *ReplyError
	if !errors.As(err, &re) || re.Prefix() != "NOPERM" {
		t.Errorf("ROLE as app: %v, %v; want NOPERM", role, err)
	}
	if _, err := aclDo(sn.Master.Addr(), "app", "apw", "SET", "k", "v"); err != nil {
		t.Errorf("SET as app: %v", err)
	}
}

// aclDo runs one command on addr as user.
func aclDo(addr, user, password string, args ...any) (any, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	r, w := bufio.NewReader(c), bufio.NewWriter(c)
	for _, cmd := range [][]any{{"AUTH", user, password}, args} {
		if err := writeCommand(w, cmd); err != nil {
			return nil, err
		}
		v, err := readReply(r)
		if err != nil {
			return nil, err
		}
		if e, ok := v.(*ReplyError); ok {
			return nil, e
		}
		if cmd[0] != "AUTH" {
			return v, nil
		}
	}
	return nil, nil
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
