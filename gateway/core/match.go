package core

import (
	"net/textproto"
	"net/url"
	"strings"

	"github.com/sluice-gw/sluice/gateway/config"
	"github.com/sluice-gw/sluice/httplimit"
)

// matcher decides whether a request belongs to a route (docs/operations.md,
// "Path rules"): path glob, methods (GET taking HEAD too), host and exact
// header values must all hold. It is immutable and safe for concurrent use.
type matcher struct {
	segments []string // the path pattern split on "/", without the leading empty one
	methods  map[string]bool
	// hosts are the required hosts, normalised by httplimit.NormalizeHost:
	// match.host and a "Host" entry of match.headers, which Go's server
	// keeps in Request.Host rather than in the header map.
	hosts   []string
	headers map[string]string // canonical name -> exact value, Host aside
	query   map[string]string // parameter -> a value it must have ("" = present)
	// encodedSlash admits paths with an encoded "/" or "\" (match.allow_encoded_slash).
	encodedSlash bool
}

// newMatcher compiles a route's match section. Validation of the values is
// config's job; here an empty path means "/".
func newMatcher(mc config.Match) *matcher {
	m := &matcher{segments: splitPath(mc.Path), encodedSlash: mc.AllowEncodedSlash}
	if len(mc.Query) > 0 {
		m.query = mc.Query
	}
	if mc.Host != "" {
		m.hosts = append(m.hosts, httplimit.NormalizeHost(mc.Host))
	}
	if len(mc.Methods) > 0 {
		m.methods = make(map[string]bool, len(mc.Methods)+1)
		for _, meth := range mc.Methods {
			m.methods[strings.ToUpper(meth)] = true
		}
		// GET covers HEAD, as nginx's limit_except GET does: a HEAD runs
		// the upstream's GET handler (RFC 9110 §9.3.2), so a HEAD that
		// missed a GET-only route would reach a later route's upstream
		// past this route's limits.
		if m.methods["GET"] {
			m.methods["HEAD"] = true
		}
	}
	for k, v := range mc.Headers {
		k = textproto.CanonicalMIMEHeaderKey(k)
		if k == "Host" {
			m.hosts = append(m.hosts, httplimit.NormalizeHost(v))
			continue
		}
		if m.headers == nil {
			m.headers = make(map[string]string, len(mc.Headers))
		}
		m.headers[k] = v
	}
	return m
}

// match reports whether r, seen as in, satisfies every condition. A path
// that in refuses matches no route, and one with an encoded slash only a
// route that allows them.
func (m *matcher) match(r httplimit.Request, in *inbound) bool {
	if m.methods != nil && !m.methods[r.Method()] {
		return false
	}
	for _, h := range m.hosts {
		if in.host != h {
			return false
		}
	}
	for k, v := range m.headers {
		if r.Header(k) != v {
			return false
		}
	}
	for k, v := range m.query {
		if !hasQueryValue(r.RawQuery(), k, v) {
			return false
		}
	}
	if in.refused != "" || in.encodedSlash && !m.encodedSlash {
		return false
	}
	return matchSegments(m.segments, in.segments)
}

// inbound is a request's host and path as every route sees them, worked
// out once per request.
type inbound struct {
	host string // httplimit.NormalizeHost(r.Host)
	// segments are the escaped path split on "/", each segment decoded: an
	// encoded slash is part of a segment, never a separator, so matching
	// counts the same segments as strip_prefix (stripSegments).
	segments []string
	// encodedSlash: the path holds %2F or %5C (any case) or a literal "\".
	encodedSlash bool
	// refused says why no route takes the path, or is "".
	refused string
}

// newInbound reads a request's host and path, escaped as received and
// decoded; the path's segments are appended to segs. The path rules are in
// docs/operations.md ("Path rules"): no route takes a path with a "." or
// ".." segment, an empty segment other than a trailing one, or a ";".
// Each is checked on the path fully decoded, with "/" and "\" both taken as
// separators, so that none hides behind an escape. Go's server passes such
// paths on as they came, and upstreams read them differently: one resolves
// "..", another merges "//" (nginx, Spring, Tomcat), a third drops
// ";params" (Tomcat, Jetty) or takes %2F or "\" for "/". Any of these would
// serve a path that another route, and its limits, was meant to take.
func newInbound(host, escaped, path string, segs []string) inbound {
	in := inbound{host: httplimit.NormalizeHost(host)}
	in.encodedSlash = hasEncodedSlash(escaped)
	if in.encodedSlash {
		in.segments = appendSegments(segs, escaped)
		for i, s := range in.segments {
			if d, err := url.PathUnescape(s); err == nil {
				in.segments[i] = d
			}
		}
	} else {
		in.segments = appendSegments(segs, path)
	}
	switch {
	case strings.IndexByte(escaped, ';') >= 0:
		in.refused = `a ";"`
	case hasControl(path):
		in.refused = "a control character"
	default:
		in.refused = oddSegment(path)
	}
	return in
}

// hasEncodedSlash reports whether an escaped path holds %2F or %5C (any
// case) or a literal "\".
func hasEncodedSlash(escaped string) bool {
	for i := 0; i < len(escaped); i++ {
		switch escaped[i] {
		case '\\':
			return true
		case '%':
			if i+2 < len(escaped) {
				if h := escaped[i+1 : i+3]; strings.EqualFold(h, "2f") || strings.EqualFold(h, "5c") {
					return true
				}
			}
		}
	}
	return false
}

// hasControl reports whether a decoded path holds a control character
// (below 0x20, or 0x7F), such as an escaped NUL that an upstream written in
// C ends the path at.
func hasControl(decoded string) bool {
	for i := 0; i < len(decoded); i++ {
		if c := decoded[i]; c < 0x20 || c == 0x7f {
			return true
		}
	}
	return false
}

// oddSegment names the first dot or empty segment (a trailing empty one
// aside) of a decoded path split on "/" and "\", or returns "".
func oddSegment(decoded string) string {
	rest := strings.TrimPrefix(decoded, "/")
	for rest != "" {
		i := strings.IndexAny(rest, `/\`)
		seg := rest
		if i >= 0 {
			seg = rest[:i]
		}
		switch {
		case seg == "." || seg == "..":
			return "a dot segment"
		case seg == "" && i >= 0:
			return "an empty segment"
		}
		if i < 0 {
			break
		}
		rest = rest[i+1:]
	}
	return ""
}

// splitPath splits "/a/b/" into ["a", "b", ""]; "/" and "" give [""].
func splitPath(p string) []string {
	return appendSegments(nil, p)
}

// appendSegments appends the segments of p, as splitPath splits it, to dst.
func appendSegments(dst []string, p string) []string {
	p = strings.TrimPrefix(p, "/")
	for {
		i := strings.IndexByte(p, '/')
		if i < 0 {
			return append(dst, p)
		}
		dst = append(dst, p[:i])
		p = p[i+1:]
	}
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

// StripSegments removes the first n segments of an escaped path; removing
// every segment leaves "/". A trailing slash after the kept segments stays.
func StripSegments(escaped string, n int) string {
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
