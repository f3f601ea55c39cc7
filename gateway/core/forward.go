package core

import (
	"net/netip"
	"strconv"
	"strings"
)

// The rules of a forwarded request that every engine's proxy follows
// (docs/semantics.md §4.4): which headers are hop-by-hop, what the
// X-Forwarded-* headers say, which Host the upstream sees and which
// request-target. Each engine applies them to its own header type.

// HopHeaders are removed from a request and a response as they are
// forwarded (RFC 9110 §7.6.1), with every header Connection names.
var HopHeaders = []string{
	"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization",
	"Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

// ConnectionListed appends the header names that the Connection header
// values list to dst.
func ConnectionListed[S ~string | ~[]byte](dst []string, values []S) []string {
	for _, v := range values {
		for f := range strings.SplitSeq(string(v), ",") {
			if f = strings.TrimSpace(f); f != "" {
				dst = append(dst, f)
			}
		}
	}
	return dst
}

// AppendForwardedFor appends the X-Forwarded-For sent upstream to dst,
// which holds the client's own X-Forwarded-For values joined (empty for
// none): the TCP peer is appended to them.
func (r *Request) AppendForwardedFor(dst []byte) []byte {
	if peer := r.Peer(); peer.IsValid() {
		if len(dst) > 0 {
			dst = append(dst, ", "...)
		}
		return peer.Addr().AppendTo(dst)
	}
	if ap, err := netip.ParseAddrPort(r.RemoteAddr()); err == nil {
		if len(dst) > 0 {
			dst = append(dst, ", "...)
		}
		return ap.Addr().Unmap().AppendTo(dst)
	}
	return dst
}

// ForwardedProto is the X-Forwarded-Proto sent upstream: "https" for a
// request that came over TLS, else "http".
func (r *Request) ForwardedProto() string {
	if r.secure {
		return "https"
	}
	return "http"
}

// Host returns the Host header the upstream gets for r: the upstream's
// own, or under preserve_host the client's (when it sent one).
func (u *Upstream) Host(r *Request) string {
	if !u.PreserveHost || r.Host() == "" {
		return u.Target.Host
	}
	return r.Host()
}

// AppendRequestURI appends the target sent upstream for r to dst: the
// escaped path, less strip_prefix segments, joined to the upstream's base
// path, and the query joined to the upstream's, as httputil's
// ProxyRequest.SetURL joins them.
func (u *Upstream) AppendRequestURI(dst []byte, r *Request) []byte {
	dst = appendJoinedPath(dst, u.Target.EscapedPath(), StripSegments(r.EscapedPath(), u.StripPrefix))
	tq, q := u.Target.RawQuery, r.RawQuery()
	if tq == "" && q == "" {
		return dst
	}
	dst = append(append(dst, '?'), tq...)
	if tq != "" && q != "" {
		dst = append(dst, '&')
	}
	return append(dst, q...)
}

// appendJoinedPath appends base path a joined to request path b, with one
// slash between, to dst.
func appendJoinedPath(dst []byte, a, b string) []byte {
	if a == "" {
		return append(dst, b...)
	}
	as, bs := strings.HasSuffix(a, "/"), strings.HasPrefix(b, "/")
	switch {
	case as && bs:
		return append(append(dst, a...), b[1:]...)
	case !as && !bs:
		return append(append(append(dst, a...), '/'), b...)
	}
	return append(append(dst, a...), b...)
}

// httpsURL returns the https URL of r's request on the HTTPS listener's
// port (none written for 443), or "" when r's Host cannot be one.
func httpsURL(r *Request, port string) string {
	host := r.host
	if h, _, ok := splitHostPort(host); ok {
		host = h
	}
	if !validHost(host) {
		return ""
	}
	var b strings.Builder
	b.WriteString("https://")
	if strings.IndexByte(host, ':') >= 0 { // an IPv6 literal
		b.WriteString("[" + host + "]")
	} else {
		b.WriteString(host)
	}
	if port != "" && port != "443" {
		b.WriteString(":" + port)
	}
	b.WriteString(r.escaped)
	if r.query != "" {
		b.WriteString("?" + r.query)
	}
	return b.String()
}

// splitHostPort splits "host:port" and "[v6]:port"; ok is false when s
// has no port.
func splitHostPort(s string) (host, port string, ok bool) {
	if strings.HasPrefix(s, "[") {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return "", "", false
		}
		host, rest := s[1:end], s[end+1:]
		if rest == "" {
			return host, "", true
		}
		if rest[0] != ':' {
			return "", "", false
		}
		return host, rest[1:], true
	}
	i := strings.LastIndexByte(s, ':')
	if i < 0 || strings.IndexByte(s[:i], ':') >= 0 {
		return "", "", false
	}
	if _, err := strconv.Atoi(s[i+1:]); err != nil && s[i+1:] != "" {
		return "", "", false
	}
	return s[:i], s[i+1:], true
}

// validHost reports whether h is a host name or IP address a URL may
// carry: letters, digits, '-', '.', and ':' for an IPv6 address.
func validHost(h string) bool {
	if h == "" || len(h) > 253 {
		return false
	}
	if strings.IndexByte(h, ':') >= 0 {
		a, err := netip.ParseAddr(h)
		return err == nil && a.Is6()
	}
	for i := 0; i < len(h); i++ {
		switch c := h[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '-', c == '.':
		default:
			return false
		}
	}
	return true
}
