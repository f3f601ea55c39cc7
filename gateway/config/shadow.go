package config

import (
	"fmt"
	"net/textproto"
	"slices"
	"strings"
)

// Warnings returns what a valid configuration does that its author likely
// did not mean, each at its position as an [Error] is: `sluice check`
// prints them beside its summary, and they do not stop the gateway. Nil
// when there are none, and for a Config not yet validated.
//
// Today it reports routes (and forward_auth.match sections) that lose HEAD
// requests to an earlier route: GET in match.methods takes HEAD too, so a
// later route listing HEAD, whose requests the earlier route all takes,
// never sees one (docs/operations.md, "Path rules"); and server.tls
// certificates that have expired or are not valid yet when the file is
// checked.
func (c *Config) Warnings() Errors {
	return c.warnings
}

// warnf records a warning as errf records a problem, at the same position.
func (v *validator) warnf(path, format string, args ...any) {
	n := len(v.errs)
	v.errf(path, format, args...)
	if len(v.errs) > n {
		v.warns = append(v.warns, v.errs[n:]...)
		v.errs = v.errs[:n]
	}
}

// headShadows warns of each route that lists HEAD in its methods when an
// earlier route takes every HEAD request it matches, only because GET in
// the earlier route's methods covers HEAD: a route listing HEAD alone then
// never matches, and one listing HEAD beside other methods never sees a
// HEAD.
func (v *validator) headShadows(c *Config) {
	for j := range c.Routes {
		head, ok := headOnly(&c.Routes[j])
		if !ok {
			continue
		}
		for i := range j {
			if shadows(&c.Routes[i], &head, true) && !shadows(&c.Routes[i], &head, false) {
				v.headShadow(c, i, j)
				break
			}
		}
	}
}

// headOnly returns r narrowed to its HEAD requests: each of its method
// lists (match.methods, forward_auth.match.methods) that names HEAD
// becomes [HEAD]. It returns false when neither names HEAD.
func headOnly(r *Route) (Route, bool) {
	head := *r
	named := false
	if slices.Contains(r.Match.Methods, "HEAD") {
		head.Match.Methods = []string{"HEAD"}
		named = true
	}
	if fa := r.ForwardAuth; fa != nil && fa.Match != nil && slices.Contains(fa.Match.Methods, "HEAD") {
		m := *fa.Match
		m.Methods = []string{"HEAD"}
		f := *fa
		f.Match = &m
		head.ForwardAuth = &f
		named = true
	}
	return head, named
}

func (v *validator) headShadow(c *Config, i, j int) {
	early, late := &c.Routes[i], &c.Routes[j]
	p := fmt.Sprintf("routes[%d]", j)
	methods := late.Match.Methods
	if !slices.Contains(methods, "HEAD") {
		p += ".forward_auth"
		methods = late.ForwardAuth.Match.Methods
	}
	p += ".match.methods"
	where := fmt.Sprintf("routes[%d]", i)
	if l := v.line(where); l > 0 {
		where += fmt.Sprintf(" at line %d", l)
	}
	what := "never sees a HEAD request"
	if !slices.ContainsFunc(methods, func(m string) bool { return m != "HEAD" }) {
		what = "never matches"
	}
	v.warnf(p, "route %q %s: route %q (%s) lists GET in its methods, which takes HEAD too, and matches every HEAD request this one does; put this route first if it is to take them", late.ID, what, early.ID, where)
}

// shadows reports whether route a, tried before b, takes every request b
// matches, so that b decides none. headIsGet says whether GET in a
// method list covers HEAD. An upstream or respond route takes what its
// match holds for; a forward_auth route takes every auth request its match
// holds for from the upstream and respond routes behind it, but passes an
// original request its forward_auth.match refuses on to the next
// forward_auth route.
func shadows(a, b *Route, headIsGet bool) bool {
	if !matchCovers(&a.Match, &b.Match, headIsGet) {
		return false
	}
	if a.ForwardAuth == nil || b.ForwardAuth == nil {
		return true
	}
	all := Match{Path: "/**"}
	am, bm := a.ForwardAuth.Match, b.ForwardAuth.Match
	if am == nil {
		am = &all
	}
	if bm == nil {
		bm = &all
	}
	return matchCovers(am, bm, headIsGet)
}

// matchCovers reports whether every request b holds for, a holds for too.
// It errs towards false: a host or header that a and b spell differently
// counts as different.
func matchCovers(a, b *Match, headIsGet bool) bool {
	if len(a.Methods) > 0 {
		if len(b.Methods) == 0 {
			return false
		}
		for _, m := range b.Methods {
			if !slices.Contains(a.Methods, m) && !(headIsGet && m == "HEAD" && slices.Contains(a.Methods, "GET")) {
				return false
			}
		}
	}
	if b.AllowEncodedSlash && !a.AllowEncodedSlash {
		return false
	}
	if a.Host != "" && !strings.EqualFold(strings.TrimSuffix(a.Host, "."), strings.TrimSuffix(b.Host, ".")) {
		return false
	}
	bh := make(map[string]string, len(b.Headers))
	for k, v := range b.Headers {
		bh[textproto.CanonicalMIMEHeaderKey(k)] = v
	}
	for k, v := range a.Headers {
		if w, ok := bh[textproto.CanonicalMIMEHeaderKey(k)]; !ok || w != v {
			return false
		}
	}
	for k, v := range a.Query {
		if w, ok := b.Query[k]; !ok || v != "" && w != v {
			return false
		}
	}
	return patternCovers(splitPattern(a.Path), splitPattern(b.Path))
}

// splitPattern splits a path pattern into its segments, as the gateway
// does: "/a/b/" is ["a", "b", ""].
func splitPattern(p string) []string {
	return strings.Split(strings.TrimPrefix(p, "/"), "/")
}

// patternCovers reports whether every path pattern b matches, pattern a
// matches: "*" is one non-empty segment and "**", last, any rest.
func patternCovers(a, b []string) bool {
	for k, s := range a {
		switch {
		case s == "**":
			return true
		case k >= len(b) || b[k] == "**":
			return false
		case s == "*":
			if b[k] == "" {
				return false
			}
		case b[k] != s:
			return false
		}
	}
	return len(a) == len(b)
}
