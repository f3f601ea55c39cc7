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
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	} else {
		host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	}
	return strings.ToLower(strings.TrimSuffix(host, "."))
}
