package redis

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluice-gw/sluice/internal/testkit"
)

// sentinelView is what a fake sentinel says of master set "m": master is
// its GET-MASTER-ADDR-BY-NAME answer; configured, epoch and failing its
// SENTINEL MASTER ip:port, config-epoch and failover_in_progress flag
// (configured empty: the same as master). hideEpoch refuses SENTINEL
// MASTER, as for a restricted ACL user.
type sentinelView struct {
	master, configured string
	epoch              int
	failing, hideEpoch bool
}

// fakeSentinel serves v on a loopback port and returns its address.
func fakeSentinel(t *testing.T, v sentinelView) string {
	t.Helper()
	if v.configured == "" {
		v.configured = v.master
	}
	host, port, _ := net.SplitHostPort(v.master)
	chost, cport, _ := net.SplitHostPort(v.configured)
	flags := "master"
	if v.failing {
		flags = "master,failover_in_progress"
	}
	bulk := func(ss ...string) string {
		b := fmt.Sprintf("*%d\r\n", len(ss))
		for _, s := range ss {
			b += fmt.Sprintf("$%d\r\n%s\r\n", len(s), s)
		}
		return b
	}
	return testkit.ServeConns(t, func(c net.Conn) {
		r := bufio.NewReader(c)
		for {
			req, err := readResp(r, 0)
			if err != nil {
				return
			}
			args, _ := req.([]any)
			cmd := make([]string, len(args))
			for i, a := range args {
				cmd[i], _ = a.(string)
			}
			switch strings.ToUpper(strings.Join(cmd, " ")) {
			case "SENTINEL MASTER M":
				if v.hideEpoch {
					fmt.Fprint(c, "-NOPERM this user has no permissions to run the 'sentinel|master' command\r\n")
				} else {
					fmt.Fprint(c, bulk("name", "m", "ip", chost, "port", cport, "flags", flags, "config-epoch", fmt.Sprint(v.epoch)))
				}
			case "SENTINEL GET-MASTER-ADDR-BY-NAME M":
				fmt.Fprint(c, bulk(host, port))
			default:
				fmt.Fprint(c, "-ERR unknown command\r\n")
			}
		}
	})
}

// closedAddr returns a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	return testkit.ClosedAddr(t)
}

// TestSentinelsNameNewestView: the master a dial is checked against is the
// sentinels' newest view, even when sentinels asked before it still name
// the old master, as the ones that did not lead a failover do for a moment
// after it (row C3: the old master may be back by then, calling itself
// master). A master a sentinel is failing over is refused, before and after
// the promotion, while the leader's configuration still names it; the
// promoted replica, which the leader then gives clients, is accepted. With
// no configuration to go by, any sentinel naming the address vouches for it;
// with no sentinel answering, the address is accepted.
func TestSentinelsNameNewestView(t *testing.T) {
	const oldMaster, newMaster, other = "127.0.0.1:7001", "127.0.0.1:7002", "127.0.0.1:7003"
	lagging := sentinelView{master: oldMaster, epoch: 4}
	switched := sentinelView{master: newMaster, epoch: 5}
	promoted := sentinelView{master: newMaster, configured: oldMaster, epoch: 4, failing: true}
	failing := sentinelView{master: oldMaster, epoch: 4, failing: true}
	hidden := func(v sentinelView) sentinelView { v.hideEpoch = true; return v }
	for _, tt := range []struct {
		name  string
		views []sentinelView
		dst   string
		named bool
		other string
	}{
		{"switched, others lagging: the new master", []sentinelView{lagging, switched, lagging}, newMaster, true, ""},
		{"switched, others lagging: the stale master is refused", []sentinelView{lagging, switched, lagging}, oldMaster, false, newMaster},
		{"promoted, not yet switched: the stale master is refused", []sentinelView{lagging, promoted, lagging}, oldMaster, false, newMaster},
		{"promoted, not yet switched: the promoted replica", []sentinelView{lagging, promoted, lagging}, newMaster, true, ""},
		{"failing over, before the promotion: the old master is refused", []sentinelView{lagging, failing, lagging}, oldMaster, false, oldMaster},
		{"agreeing sentinels", []sentinelView{switched, switched}, newMaster, true, ""},
		{"configuration hidden: any sentinel naming it", []sentinelView{hidden(lagging), hidden(switched)}, oldMaster, true, ""},
		{"configuration hidden: named by none", []sentinelView{hidden(lagging), hidden(switched)}, other, false, oldMaster},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var addrs []string
			for _, v := range tt.views {
				addrs = append(addrs, fakeSentinel(t, v))
			}
			checkNamed(t, addrs, tt.dst, tt.named, tt.other)
		})
	}
	t.Run("one sentinel down, the other names another", func(t *testing.T) {
		checkNamed(t, []string{closedAddr(t), fakeSentinel(t, switched)}, oldMaster, false, newMaster)
	})
	t.Run("no sentinel answers", func(t *testing.T) {
		checkNamed(t, []string{closedAddr(t), closedAddr(t)}, oldMaster, true, "")
	})
}

// checkNamed checks sentinelsName(dst) against the sentinels at addrs.
func checkNamed(t *testing.T, addrs []string, dst string, named bool, other string) {
	t.Helper()
	s := &Store{copt: rueidis.ClientOption{InitAddress: addrs, Sentinel: rueidis.SentinelOption{MasterSet: "m"}}}
	gotNamed, gotOther := s.sentinelsName(context.Background(), dst, time.Now().Add(5*time.Second))
	if gotNamed != named || gotOther != other {
		t.Errorf("sentinelsName(%s) = %v, %q; want %v, %q", dst, gotNamed, gotOther, named, other)
	}
}
