package httplimit

import (
	"net"
	"strings"
)

// NormalizeHost returns host as route matching and "header:Host" keys
// compare it: without a port or the brackets of an IPv6 literal, in lower
// case, and without one trailing dot ("api.example.com." is the same name as
// "api.example.com" in DNS). Without this, each spelling of one host would be
// a different key, a fresh budget.
func NormalizeHost(host string) string {
	if h, ok := splitPort(host); ok {
		host = h
	} else {
		host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	}
	return strings.ToLower(strings.TrimSuffix(host, "."))
}

// splitPort returns host without its port, as net.SplitHostPort splits it,
// and whether it had one. Without a ':' there is none, and SplitHostPort is
// not asked (its failure allocates an error, on every request).
func splitPort(host string) (string, bool) {
	if strings.IndexByte(host, ':') < 0 {
		return "", false
	}
	h, _, err := net.SplitHostPort(host)
	return h, err == nil
}
