package fastengine

import (
	"net"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/sluice-gw/sluice/httplimit"
)

// stringAddr is a peer address of no TCP kind, known by its string only.
type stringAddr string

func (a stringAddr) Network() string { return "other" }
func (a stringAddr) String() string  { return string(a) }

// remoteOnly hides a request's PeerAddr, so that httplimit parses its
// RemoteAddr as it does any Request's.
type remoteOnly struct{ httplimit.Request }

// TestPeerAddrAsParsed: the peer address a public request holds parsed is
// the one httplimit finds by parsing its RemoteAddr, for every kind of
// peer, and the X-Forwarded-For entry outbound appends is the host part of
// RemoteAddr.
func TestPeerAddrAsParsed(t *testing.T) {
	trustAll := &httplimit.IPResolver{}
	for _, peer := range []net.Addr{
		&net.TCPAddr{IP: net.IPv4(192, 0, 2, 1).To4(), Port: 1234},
		&net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 1234}, // 16-byte form
		&net.TCPAddr{IP: net.ParseIP("2001:db8::1"), Port: 443},
		&net.TCPAddr{IP: net.ParseIP("fe80::1"), Port: 80, Zone: "eth0"},
		&net.TCPAddr{IP: net.ParseIP("::ffff:198.51.100.7"), Port: 8080},
		stringAddr("203.0.113.9:55"),
		stringAddr("203.0.113.9"),
		stringAddr("not an address"),
	} {
		var ctx fasthttp.RequestCtx
		ctx.Init(&fasthttp.Request{}, peer, nil)
		x := &exchange{ctx: &ctx}
		x.Req.Reset(x, "GET", []byte("gw.test"), []byte("/"), peerOf(peer))
		r := &x.Req
		got, gotOK := r.PeerAddr()
		want, wantOK := trustAll.ClientIP(remoteOnly{r})
		if got != want || gotOK != wantOK {
			t.Errorf("%v: PeerAddr %v %v, want %v %v (RemoteAddr %q parsed)", peer, got, gotOK, want, wantOK, r.RemoteAddr())
		}
		// net/http's Request.RemoteAddr is the connection's
		// RemoteAddr().String(): an IPv4 peer in IPv4 form.
		if r.RemoteAddr() != peer.String() {
			t.Errorf("%v: RemoteAddr %q, want %q", peer, r.RemoteAddr(), peer.String())
		}
		if host, _, err := net.SplitHostPort(r.RemoteAddr()); err == nil && r.Peer().IsValid() {
			if s := r.Peer().Addr().String(); s != host {
				t.Errorf("%v: X-Forwarded-For gets %q, want %q", peer, s, host)
			}
		}
	}
}
