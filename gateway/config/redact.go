package config

import "strings"

// RedactAddress returns addr with the secret part of its userinfo replaced
// by "xxxxx", in the style of url.URL.Redacted: "http://user:pw@host"
// becomes "http://user:xxxxx@host" and "redis://:pw@host:6379" becomes
// "redis://:xxxxx@host:6379". A userinfo without a colon may itself be a
// token, so it is replaced whole: "pw@host:6379" becomes "xxxxx@host:6379".
// It works on text, not on a parsed URL, so an error about an address that
// does not parse can still quote it. An address without "@" before its
// path is returned unchanged.
func RedactAddress(addr string) string {
	scheme, rest := "", addr
	if i := strings.Index(addr, "://"); i >= 0 {
		scheme, rest = addr[:i+3], addr[i+3:]
	}
	authority := rest
	if end := strings.IndexAny(rest, "/?#"); end >= 0 {
		authority = rest[:end]
	}
	at := strings.LastIndex(authority, "@")
	if at < 0 {
		return addr
	}
	user := "xxxxx"
	if i := strings.Index(authority[:at], ":"); i >= 0 {
		user = authority[:i+1] + "xxxxx"
	}
	return scheme + user + rest[at:]
}

// RedactAddresses returns a copy of addrs with [RedactAddress] applied to each.
func RedactAddresses(addrs []string) []string {
	out := make([]string, len(addrs))
	for i, a := range addrs {
		out[i] = RedactAddress(a)
	}
	return out
}
