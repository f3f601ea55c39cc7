package httplimit

import (
	"net/netip"
	"strings"
)

// IPResolver finds the client's IP address for `ip` keys. It believes
// X-Forwarded-For only when the TCP peer is one of TrustedProxies and reads
// it from right to left, as traefik's pkg/ip does, so a client cannot choose
// its own key by sending the header. The zero value (and a nil *IPResolver)
// trusts no proxy: the client is the TCP peer. An IPResolver must not be
// modified once in use; it is then safe for concurrent use.
type IPResolver struct {
	// TrustedProxies are the proxies whose X-Forwarded-For entries are
	// believed. Nil means none. IPv4 prefixes match IPv4 and IPv4-mapped IPv6
	// addresses alike, because addresses are unmapped before matching.
	TrustedProxies []netip.Prefix
	// IPv6PrefixLen, when between 1 and 127, groups IPv6 clients by that
	// prefix: the key of 2001:db8::1 with 64 is "2001:db8::/64", so one host
	// with a whole /64 gets one budget. Zero means the whole address.
	IPv6PrefixLen int
}

// ClientIP returns the client address of r and whether one was found.
//
// The peer is r.RemoteAddr() ("ip:port" or a bare IP; see PeerAddresser). If the peer is trusted,
// every X-Forwarded-For header is split at commas and walked from the last
// entry to the first, skipping trusted addresses; the first untrusted address
// is the client. An empty or malformed entry stops the walk and the client is
// the nearest trusted hop already walked: entries left of a bad one may have
// been written by anyone, while that hop is an address the proxy itself saw.
// When every entry is trusted, the leftmost is the client. Addresses are
// returned without zone, and IPv4-mapped IPv6 addresses as IPv4.
func (ipr *IPResolver) ClientIP(r Request) (netip.Addr, bool) {
	peer, ok := peerAddr(r)
	if !ok {
		return netip.Addr{}, false
	}
	if !ipr.trusted(peer) {
		return peer, true
	}
	client := peer
	xff := r.HeaderValues("X-Forwarded-For")
	for i := len(xff) - 1; i >= 0; i-- {
		list := xff[i]
		for list != "" {
			var entry string
			if j := strings.LastIndexByte(list, ','); j >= 0 {
				entry, list = list[j+1:], list[:j]
			} else {
				entry, list = list, ""
			}
			a, ok := parseHostAddr(strings.TrimSpace(entry))
			if !ok {
				return client, true
			}
			client = a
			if !ipr.trusted(a) {
				return a, true
			}
		}
	}
	return client, true
}

// PeerTrusted reports whether r's TCP peer (r.RemoteAddr()) is inside one of
// TrustedProxies, that is whether the forwarding headers it sends are
// believed.
func (ipr *IPResolver) PeerTrusted(r Request) bool {
	peer, ok := peerAddr(r)
	return ok && ipr.trusted(peer)
}

// trusted reports whether a is inside one of the trusted prefixes.
func (ipr *IPResolver) trusted(a netip.Addr) bool {
	if ipr == nil {
		return false
	}
	for _, p := range ipr.TrustedProxies {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// clientKey returns the key value of r's client address, "" if none.
func (ipr *IPResolver) clientKey(r Request) string {
	a, ok := ipr.ClientIP(r)
	if !ok {
		return ""
	}
	if ipr != nil && a.Is6() && ipr.IPv6PrefixLen > 0 && ipr.IPv6PrefixLen < 128 {
		p, err := a.Prefix(ipr.IPv6PrefixLen)
		if err == nil {
			return p.String()
		}
	}
	return a.String()
}

// parseHostAddr parses "ip", "ip:port" or "[ipv6]:port" and normalises the
// address: zone removed, IPv4-mapped unmapped.
func parseHostAddr(s string) (netip.Addr, bool) {
	var a netip.Addr
	// Pick the parser by shape: a failed parse allocates its error, and this
	// runs for every request.
	if strings.HasPrefix(s, "[") || strings.Count(s, ":") == 1 {
		ap, err := netip.ParseAddrPort(s)
		if err != nil {
			return netip.Addr{}, false
		}
		a = ap.Addr()
	} else {
		var err error
		if a, err = netip.ParseAddr(s); err != nil {
			return netip.Addr{}, false
		}
	}
	return a.Unmap().WithZone(""), true
}
