package gateway

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluice-gw/sluice/gateway/config"
	"github.com/sluice-gw/sluice/httplimit"
	"github.com/sluice-gw/sluice/internal/testkit"
)

// TestUpgradeRoundTrip: a websocket-style Upgrade request reaches the
// upstream with Connection: Upgrade and its Upgrade header, the upstream's
// 101 reaches the client, and bytes then flow both ways over the two
// connections piped together, with the limits decided once.
func TestUpgradeRoundTrip(t *testing.T) {
	upLn := testkit.Listen(t)
	seen := make(chan *http.Request, 1)
	go func() {
		c, err := upLn.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		br := bufio.NewReader(c)
		r, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		seen <- r
		io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\nX-Upstream: yes\r\n\r\n")
		// Echo each line, upper-cased, until the client closes.
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				return
			}
			io.WriteString(c, strings.ToUpper(line))
		}
	}()
	rc := upstreamRoute("ws", "/ws", "http://"+upLn.Addr().String())
	rc.Limits = []config.Limit{{Policy: "three", Key: httplimit.Key{{Source: httplimit.SourceConst, Name: "all"}}}}
	g := newTestGateway(t, testConfig(rc))
	srv := startServer(t, g)

	c, err := net.DialTimeout("tcp", srv.Addr().String(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(c, "GET /ws HTTP/1.1\r\nHost: gw\r\nConnection: keep-alive, Upgrade\r\nUpgrade: echo\r\n\r\n")
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols || resp.Header.Get("Upgrade") != "echo" || resp.Header.Get("X-Upstream") != "yes" {
		t.Fatalf("answer %d, Upgrade %q, X-Upstream %q; want the upstream's 101", resp.StatusCode, resp.Header.Get("Upgrade"), resp.Header.Get("X-Upstream"))
	}
	r := <-seen
	if r.Header.Get("Upgrade") != "echo" || !strings.EqualFold(r.Header.Get("Connection"), "Upgrade") || r.Header.Get("X-Forwarded-For") == "" {
		t.Errorf("upstream got Upgrade %q, Connection %q, X-Forwarded-For %q; want echo, Upgrade and the peer", r.Header.Get("Upgrade"), r.Header.Get("Connection"), r.Header.Get("X-Forwarded-For"))
	}
	for _, msg := range []string{"ping\n", "second message\n"} {
		io.WriteString(c, msg)
		got, err := br.ReadString('\n')
		if err != nil || got != strings.ToUpper(msg) {
			t.Fatalf("echo of %q = %q, %v", msg, got, err)
		}
	}
	if m := scrapeMetrics(t, g); !strings.Contains(m, `sluice_decisions_total{policy="three",result="allowed",route="ws"} 1`) {
		t.Errorf("want one allowed decision for the upgrade, metrics:\n%s", m)
	}
}
