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
)

// fakeSentinel answers SENTINEL MASTER (unless hideEpoch, when it refuses
// it as a restricted ACL user would) and SENTINEL GET-MASTER-ADDR-BY-NAME
// for master set "m" with master and epoch. It returns its address.
func fakeSentinel(t *testing.T, master string, epoch int, hideEpoch bool) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	host, port, _ := net.SplitHostPort(master)
	bulk := func(ss ...string) string {
		b := fmt.Sprintf("*%d\r\n", len(ss))
		for _, s := range ss {
			b += fmt.Sprintf("$%d\r\n%s\r\n", len(s), s)
		}
		return b
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					v, err := readResp(r, 0)
					if err != nil {
						return
					}
					args, _ := v.([]any)
					cmd := make([]string, len(args))
					for i, a := range args {
						cmd[i], _ = a.(string)
					}
					switch strings.ToUpper(strings.Join(cmd, " ")) {
					case "SENTINEL MASTER M":
						if hideEpoch {
							fmt.Fprint(c, "-NOPERM this user has no permissions to run the 'sentinel|master' command\r\n")
						} else {
							fmt.Fprint(c, bulk("name", "m", "ip", host, "port", port, "flags", "master", "config-epoch", fmt.Sprint(epoch)))
						}
					case "SENTINEL GET-MASTER-ADDR-BY-NAME M":
						fmt.Fprint(c, bulk(host, port))
					default:
						fmt.Fprint(c, "-ERR unknown command\r\n")
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// closedAddr returns a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// TestSentinelsNameNewestView: the master a dial is checked against is the
// sentinels' newest view, the answer with the highest config epoch, even
// when sentinels asked before it still name the old master, as the ones
// that did not lead a failover do for a moment after it (row C3: the old
// master may be back by then, calling itself master). With no epoch to go
// by, any sentinel naming the address vouches for it; with no sentinel
// answering, the address is accepted.
func TestSentinelsNameNewestView(t *testing.T) {
	const oldMaster, newMaster, other = "127.0.0.1:7001", "127.0.0.1:7002", "127.0.0.1:7003"
	for _, tt := range []struct {
		name      string
		sentinels []string
		dst       string
		named     bool
		other     string
	}{
		{"lagging sentinels first: the new master", []string{
			fakeSentinel(t, oldMaster, 4, false), fakeSentinel(t, newMaster, 5, false), fakeSentinel(t, oldMaster, 4, false),
		}, newMaster, true, ""},
		{"lagging sentinels first: the stale master is refused", []string{
			fakeSentinel(t, oldMaster, 4, false), fakeSentinel(t, newMaster, 5, false), fakeSentinel(t, oldMaster, 4, false),
		}, oldMaster, false, newMaster},
		{"agreeing sentinels", []string{
			fakeSentinel(t, newMaster, 5, false), fakeSentinel(t, newMaster, 5, false),
		}, newMaster, true, ""},
		{"one sentinel down, the other names another", []string{
			closedAddr(t), fakeSentinel(t, newMaster, 5, false),
		}, oldMaster, false, newMaster},
		{"no sentinel answers", []string{closedAddr(t), closedAddr(t)}, oldMaster, true, ""},
		{"epochs hidden: any sentinel naming it", []string{
			fakeSentinel(t, oldMaster, 4, true), fakeSentinel(t, newMaster, 5, true),
		}, oldMaster, true, ""},
		{"epochs hidden: named by none", []string{
			fakeSentinel(t, oldMaster, 4, true), fakeSentinel(t, newMaster, 5, true),
		}, other, false, oldMaster},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := &Store{copt: rueidis.ClientOption{InitAddress: tt.sentinels, Sentinel: rueidis.SentinelOption{MasterSet: "m"}}}
			named, other := s.sentinelsName(context.Background(), tt.dst, time.Now().Add(5*time.Second))
			if named != tt.named || other != tt.other {
				t.Errorf("sentinelsName(%s) = %v, %q; want %v, %q", tt.dst, named, other, tt.named, tt.other)
			}
		})
	}
}
