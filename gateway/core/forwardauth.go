package core

import (
	"errors"
	"net/url"

	"github.com/sluice-gw/sluice/gateway/config"
	"github.com/sluice-gw/sluice/httplimit"
)

// forwardAuth is a forward_auth route's reading of the original request
// (docs/forward-auth.md). It is immutable and safe for concurrent use.
type forwardAuth struct {
	from string // config.FromXForwarded, config.FromXOriginal or config.FromRequest
	// strip is the number of segments removed from the auth request's path
	// to get the original path (from: request).
	strip int
	// match must hold for the original request: forward_auth.match, or
	// every path that passes the path rules.
	match *matcher
	// methodHeader and uriHeader name the headers the original method and
	// URI are read from; empty for from: request.
	methodHeader, uriHeader string
}

// The headers a forward-auth proxy describes the original request in.
const (
	headerForwardedMethod = "X-Forwarded-Method"
	headerForwardedURI    = "X-Forwarded-Uri"
	headerForwardedHost   = "X-Forwarded-Host"
	headerOriginalMethod  = "X-Original-Method"
	headerOriginalURI     = "X-Original-URI" // as docs/forward-auth.md spells it; lookups fold case
)

// newForwardAuth compiles a route's forward_auth section.
func newForwardAuth(fc *config.ForwardAuth, strip int) *forwardAuth {
	fa := &forwardAuth{from: fc.From, strip: strip}
	if fc.Match != nil {
		fa.match = newMatcher(*fc.Match)
	} else {
		fa.match = newMatcher(config.Match{Path: "/**"})
	}
	switch fc.From {
	case config.FromXForwarded:
		fa.methodHeader, fa.uriHeader = headerForwardedMethod, headerForwardedURI
	case config.FromXOriginal:
		fa.methodHeader, fa.uriHeader = headerOriginalMethod, headerOriginalURI
	}
	return fa
}

// forwardedRequest is the original request a forward-auth proxy asks
// about, seen as an httplimit.Request: its method, host, path and query
// come from the forwarded description, and its headers, peer address and
// context are the auth request's (the proxies pass the original request's
// headers on, and X-Forwarded-For names the client behind the proxy as it
// does for proxied traffic). Its strings may outlive the request.
type forwardedRequest struct {
	*Request
	method, host, escaped, path, query string
}

var _ httplimit.Request = (*forwardedRequest)(nil)

func (f *forwardedRequest) Method() string   { return f.method }
func (f *forwardedRequest) Host() string     { return f.host }
func (f *forwardedRequest) Path() string     { return f.path }
func (f *forwardedRequest) RawQuery() string { return f.query }

// forwardError is why an auth request does not describe an original
// request that can be decided: its answer is a 400 with this detail.
type forwardError string

func (e forwardError) Error() string { return string(e) }

// read fills in f from the auth request r. An error means that r describes
// no original request sluice can decide: a header missing or given twice, a
// method that is no HTTP token, a URI that is not an origin-form target,
// holds a raw "#" or does not parse, a host with bytes no host has, or a query the gateway
// refuses. None of them is ever decided as some other request.
func (fa *forwardAuth) read(r *Request, f *forwardedRequest) error {
	*f = forwardedRequest{Request: r}
	if fa.from == config.FromRequest {
		f.method, f.host, f.query = r.method, r.host, r.query
		f.escaped, f.path = r.escaped, r.path
		if fa.strip > 0 {
			f.escaped = StripSegments(r.escaped, fa.strip)
			f.path = f.escaped
			if r.path != r.escaped {
				p, err := url.PathUnescape(f.escaped)
				if err != nil {
					return forwardError("The request path cannot be decoded.")
				}
				f.path = p
			}
		}
		return nil
	}
	method, err := onlyValue(r, fa.methodHeader)
	if err != nil {
		return err
	}
	if !isToken(method) {
		return forwardError(fa.methodHeader + " is not an HTTP method.")
	}
	f.method = MethodString(method)
	uri, err := onlyValue(r, fa.uriHeader)
	if err != nil {
		return err
	}
	if uri[0] != '/' {
		return forwardError(fa.uriHeader + " is not an origin-form request target (\"/path?query\").")
	}
	var host string
	f.escaped, f.path, f.query, host, err = splitTarget(string(uri))
	if errors.Is(err, errFragment) {
		return forwardError(fragmentDetail(fa.uriHeader + " header"))
	}
	if err != nil || host != "" {
		return forwardError(fa.uriHeader + " cannot be parsed.")
	}
	if err := checkQuery(f.query); err != nil {
		return forwardError("The query string of " + fa.uriHeader + " cannot be parsed: " + err.Error() + ".")
	}
	h, err := onlyValue(r, headerForwardedHost)
	if err != nil {
		return err
	}
	if !isHost(h) {
		return forwardError(headerForwardedHost + " is not a host.")
	}
	f.host = string(h)
	return nil
}

// onlyValue returns the one non-empty value of header name, or an error
// when the header is absent, empty or given more than once: a proxy that
// adds its value beside the client's, rather than replacing it, leaves two.
func onlyValue(r *Request, name string) ([]byte, error) {
	vs := r.wire.PeekAll(name)
	switch {
	case len(vs) == 0 || len(vs) == 1 && len(vs[0]) == 0:
		return nil, forwardError("The forward-auth request has no " + name + " header: the proxy must set it (docs/forward-auth.md).")
	case len(vs) > 1:
		return nil, forwardError("The forward-auth request has more than one " + name + " header.")
	}
	return vs[0], nil
}

// isToken reports whether b is an HTTP token (RFC 9110 §5.6.2), as a
// method is.
func isToken(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	for _, c := range b {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '!' || c == '#' || c == '$' || c == '%' || c == '&' || c == '\'' || c == '*' || c == '+' ||
			c == '-' || c == '.' || c == '^' || c == '_' || c == '`' || c == '|' || c == '~':
		default:
			return false
		}
	}
	return true
}

// isHost reports whether b holds only bytes a host with an optional port
// has: letters, digits, '.', '-', '_', ':' and the brackets of an IPv6
// literal. A list ("a, b") is not one host.
func isHost(b []byte) bool {
	for _, c := range b {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '.' || c == '-' || c == '_' || c == ':' || c == '[' || c == ']':
		default:
			return false
		}
	}
	return true
}

// decideForward decides an auth request that route rt matched: it reads
// the original request into x.fwd and, when forward_auth.match holds for
// it, decides it with the route's limits and returns the Outcome and true.
// It returns false when the original request is not this route's; an auth
// request that describes no original request is answered 400.
func (rt *Route) decideForward(x *Exchange) (Outcome, bool) {
	r := &x.Req
	if err := rt.fwd.read(r, &x.fwd); err != nil {
		out := problem(statusBadRequest, err.Error())
		out.Route = rt
		return out, true
	}
	f := &x.fwd
	in := newInbound(f.host, f.escaped, f.path, x.fwdSegments[:0])
	x.fwdSegments = in.segments
	if !rt.fwd.match.match(f, &in) {
		return Outcome{}, false
	}
	return rt.decide(r, f, &x.res), true
}
