package httplimit

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
)

func prefixes(t testing.TB, ss ...string) []netip.Prefix {
	t.Helper()
	var ps []netip.Prefix
	for _, s := range ss {
		ps = append(ps, netip.MustParsePrefix(s))
	}
	return ps
}

func TestClientIP(t *testing.T) {
	trusted := &IPResolver{TrustedProxies: prefixes(t, "10.0.0.0/8", "fd00::/8")}
	tests := []struct {
		name   string
		ipr    *IPResolver
		remote string
		xff    []string // one X-Forwarded-For header per element
		want   string   // "" = none
	}{
		{"no proxy trusted: peer", nil, "198.51.100.7:4711", []string{"203.0.113.9"}, "198.51.100.7"},
		{"untrusted peer ignores the header", trusted, "198.51.100.7:4711", []string{"203.0.113.9"}, "198.51.100.7"},
		{"trusted peer: last untrusted entry", trusted, "10.0.0.1:80", []string{"203.0.113.9"}, "203.0.113.9"},
		{"spoofed left entries are ignored", trusted, "10.0.0.1:80", []string{"1.2.3.4, 203.0.113.9"}, "203.0.113.9"},
		{"trusted hops skipped right to left", trusted, "10.0.0.1:80", []string{"1.2.3.4, 203.0.113.9, 10.1.1.1,10.2.2.2"}, "203.0.113.9"},
		{"several headers read as one list", trusted, "10.0.0.1:80", []string{"1.2.3.4, 203.0.113.9", "10.1.1.1"}, "203.0.113.9"},
		{"malformed entry: nearest trusted hop", trusted, "10.0.0.1:80", []string{"203.0.113.9, bogus, 10.1.1.1"}, "10.1.1.1"},
		{"malformed last entry: the peer", trusted, "10.0.0.1:80", []string{"203.0.113.9, unknown"}, "10.0.0.1"},
		{"empty entry stops the walk", trusted, "10.0.0.1:80", []string{"203.0.113.9,,10.1.1.1"}, "10.1.1.1"},
		{"all trusted: leftmost", trusted, "10.0.0.1:80", []string{"10.3.3.3, 10.1.1.1"}, "10.3.3.3"},
		{"trusted peer without header", trusted, "10.0.0.1:80", nil, "10.0.0.1"},
		{"entry with port", trusted, "10.0.0.1:80", []string{"203.0.113.9:5555"}, "203.0.113.9"},
		{"IPv6 peer", nil, "[2001:db8::1]:443", nil, "2001:db8::1"},
		{"IPv6 zone stripped", nil, "[fe80::1%eth0]:443", nil, "fe80::1"},
		{"IPv4-mapped peer unmapped", nil, "[::ffff:198.51.100.7]:443", nil, "198.51.100.7"},
		{"IPv4-mapped peer matches an IPv4 prefix", trusted, "[::ffff:10.0.0.1]:443", []string{"203.0.113.9"}, "203.0.113.9"},
		{"IPv6 trusted proxy, IPv6 client", trusted, "[fd00::1]:443", []string{"2001:DB8:0:0::5"}, "2001:db8::5"},
		{"bracketed IPv6 entry with port", trusted, "[fd00::1]:443", []string{"[2001:db8::5]:99"}, "2001:db8::5"},
		{"peer without port", nil, "198.51.100.7", nil, "198.51.100.7"},
		{"unparseable peer", nil, "pipe", nil, ""},
		{"grouped by /64", &IPResolver{IPv6PrefixLen: 64}, "[2001:db8:1:2:3:4:5:6]:1", nil, "2001:db8:1:2::/64"},
		{"grouping leaves IPv4 alone", &IPResolver{IPv6PrefixLen: 64}, "192.0.2.1:1", nil, "192.0.2.1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			r.RemoteAddr = tt.remote
			for _, v := range tt.xff {
				r.Header.Add("X-Forwarded-For", v)
			}
			if got := tt.ipr.clientKey(HTTPRequest(r)); got != tt.want {
				t.Errorf("client of %s via %q = %q, want %q", tt.remote, tt.xff, got, tt.want)
			}
		})
	}
}

// FuzzClientIP checks, for any peer and X-Forwarded-For, that ClientIP never
// panics, returns a normalised address, believes nothing an untrusted peer
// says, and returns either the peer or an address that appears in the header.
func FuzzClientIP(f *testing.F) {
	f.Add("10.0.0.1:80", "1.2.3.4, 203.0.113.9, 10.1.1.1", "")
	f.Add("[::ffff:10.0.0.1]:1", "::ffff:203.0.113.9", "bogus")
	f.Add("198.51.100.7:1", "10.0.0.2", "")
	f.Add("[fd00::1%eth0]:1", "[2001:db8::5]:99,,", "fe80::1%lo")
	ipr := &IPResolver{TrustedProxies: prefixes(f, "10.0.0.0/8", "fd00::/8", "::ffff:0:0/96")}
	f.Fuzz(func(t *testing.T, remote, xff1, xff2 string) {
		r := &http.Request{RemoteAddr: remote, Header: http.Header{}}
		for _, v := range []string{xff1, xff2} {
			if v != "" {
				r.Header.Add("X-Forwarded-For", v)
			}
		}
		got, ok := ipr.ClientIP(HTTPRequest(r))
		peer, peerOK := parseHostAddr(remote)
		if ok != peerOK {
			t.Fatalf("ClientIP ok = %v, but peer %q parses: %v", ok, remote, peerOK)
		}
		if !ok {
			return
		}
		if got.Zone() != "" || got.Is4In6() {
			t.Errorf("ClientIP = %v: not normalised", got)
		}
		if !ipr.trusted(peer) {
			if got != peer {
				t.Errorf("untrusted peer %v, ClientIP = %v", peer, got)
			}
			return
		}
		if got == peer {
			return
		}
		found := false
		for _, e := range strings.Split(xff1+","+xff2, ",") {
			if a, ok := parseHostAddr(strings.TrimSpace(e)); ok && a == got {
				found = true
			}
		}
		if !found {
			t.Errorf("ClientIP = %v, neither the peer nor in X-Forwarded-For %q, %q", got, xff1, xff2)
		}
	})
}
