package gateway

import (
	"net"
	"net/http"
	"strings"
)

// matcher decides whether a request belongs to a route (SPEC §2.1): path
// glob, methods, host without port and exact header values must all hold.
// It is immutable and safe for concurrent use.
type matcher struct {
	segments []string // the path pattern split on "/", without the leading empty one
	methods  map[string]bool
	host     string            // lower case, no port; "" = any
	headers  map[string]string // canonical name -> exact value
}

// newMatcher compiles a route's match section. Validation of the values is
// config's job; here an empty path means "/".
func newMatcher(path string, methods []string, host string, headers map[string]string) *matcher {
	m := &matcher{segments: splitPath(path), host: strings.ToLower(stripPort(host))}
	if len(methods) > 0 {
		m.methods = make(map[string]bool, len(methods))
		for _, meth := range methods {
			m.methods[strings.ToUpper(meth)] = true
		}
	}
	if len(headers) > 0 {
		m.headers = make(map[string]string, len(headers))
		for k, v := range headers {
			m.headers[http.CanonicalHeaderKey(k)] = v
		}
	}
	return m
}

// match reports whether r satisfies every condition. A path with a "." or
// ".." segment, written as such or escaped (%2e, or behind %2F), matches no
// route: Go's server passes such paths on as they are, and an upstream that
// resolves them would be asked for a path outside the route's prefix (another
// route's, past that route's limits, or above the upstream's base path).
func (m *matcher) match(r *http.Request) bool {
	if m.methods != nil && !m.methods[r.Method] {
		return false
	}
	if m.host != "" && !strings.EqualFold(stripPort(r.Host), m.host) {
		return false
	}
	for k, v := range m.headers {
		if r.Header.Get(k) != v {
			return false
		}
	}
	path := splitPath(r.URL.Path)
	if hasDotSegment(path) {
		return false
	}
	return matchSegments(m.segments, path)
}

// hasDotSegment reports whether a split, decoded path has a "." or ".."
// segment.
func hasDotSegment(segs []string) bool {
	for _, s := range segs {
		if s == "." || s == ".." {
			return true
		}
	}
	return false
}

// splitPath splits "/a/b/" into ["a", "b", ""]; "/" and "" give [""].
func splitPath(p string) []string {
	return strings.Split(strings.TrimPrefix(p, "/"), "/")
}

// matchSegments matches path segments against a pattern where "*" is exactly
// one non-empty segment and "**" is any number of segments, none included, so
// that /api/** matches /api, /api/ and everything below. Every other pattern
// segment must equal the path segment byte for byte.
func matchSegments(pat, path []string) bool {
	for i, p := range pat {
		switch p {
		case "**":
			rest := pat[i+1:]
			if len(rest) == 0 {
				return true
			}
			for j := i; j <= len(path); j++ {
				if matchSegments(rest, path[j:]) {
					return true
				}
			}
			return false
		case "*":
			if i >= len(path) || path[i] == "" {
				return false
			}
		default:
			if i >= len(path) || path[i] != p {
				return false
			}
		}
	}
	return len(pat) == len(path)
}

// stripPort returns host without a trailing :port, and without the brackets
// of an IPv6 literal.
func stripPort(host string) string {
	if h, _, err := net.SplitHostPort(host); err == nil {
		return h
	}
	return strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
}

// stripSegments removes the first n segments of an escaped path; removing
// every segment leaves "/". A trailing slash after the kept segments stays.
func stripSegments(escaped string, n int) string {
	if n <= 0 {
		return escaped
	}
	rest := strings.TrimPrefix(escaped, "/")
	for range n {
		i := strings.IndexByte(rest, '/')
		if i < 0 {
			return "/"
		}
		rest = rest[i+1:]
	}
	return "/" + rest
}
