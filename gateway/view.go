package gateway

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/sluice-gw/sluice/httplimit"
	"github.com/sluice-gw/sluice/internal/tracing"
)

// publicRequest is a request of the public listener seen as an
// httplimit.Request, the one view that route matching, keys and limits
// read. It is the fasthttp engine's adapter: nothing past it depends on
// the engine. Its strings are copies, so they may outlive the request.
type publicRequest struct {
	ctx    *fasthttp.RequestCtx
	method string
	host   string
	// target is the request-target as received; escaped the path part of
	// it, path that decoded, query the part after '?'.
	target, escaped, path, query string
	// peer is the TCP peer's address; remote, its RemoteAddr form, is
	// made from peerNet when first asked for.
	peer    netip.AddrPort
	peerNet net.Addr
	remote  string
	// entry is the access log record, nil when the request is not sampled.
	entry *accessEntry
	// span is the request's trace span, off when tracing is.
	span tracing.Span
	xff  []string
	buf  []byte // scratch for the proxy's X-Forwarded-For
	// readDeadline bounds the connection's reads past the request's
	// headers (read_timeout from the request's start), zero for none.
	readDeadline time.Time
	// status, when not 0, is the status recorded instead of the response's
	// (499: the client went away).
	status int
	// lease holds the request's leases (concurrency limits, shedding)
	// until its response ends (see route.decide).
	lease held
	// client names the request's client for the upstream latency signal
	// (route.clientOf before the limits, clientOfKeys after); 0: not
	// named yet.
	client uint64
	// pending, while an Expect: 100-continue request is decided, receives
	// the request the limits admit (route.admit); nil otherwise.
	pending *pending
}

// takeLease hands the request's leases to the caller, who then releases
// them when the response ends: a streamed body or a hijacked connection
// outlives the handler.
func (r *publicRequest) takeLease() held {
	l := r.lease
	r.lease = held{}
	return l
}

var (
	_ httplimit.Request       = (*publicRequest)(nil)
	_ httplimit.PeerAddresser = (*publicRequest)(nil)
)

func (r *publicRequest) Context() context.Context { return requestContext{r} }
func (r *publicRequest) Method() string           { return r.method }
func (r *publicRequest) Host() string             { return r.host }
func (r *publicRequest) Path() string             { return r.path }
func (r *publicRequest) RawQuery() string         { return r.query }

// RemoteAddr returns the TCP peer as net/http's Request.RemoteAddr gives it.
func (r *publicRequest) RemoteAddr() string {
	if r.remote == "" && r.peerNet != nil {
		r.remote = string(appendAddr(nil, r.peerNet))
	}
	return r.remote
}

// PeerAddr returns the TCP peer's address as httplimit parses RemoteAddr:
// without zone, IPv4-mapped unmapped.
func (r *publicRequest) PeerAddr() (netip.Addr, bool) {
	if r.peer.IsValid() {
		return r.peer.Addr().Unmap().WithZone(""), true
	}
	if r.peerNet == nil {
		return netip.Addr{}, false
	}
	s := r.RemoteAddr()
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap().WithZone(""), true
	}
	a, err := netip.ParseAddr(s)
	return a.Unmap().WithZone(""), err == nil
}

// setPeer records peer, the request's TCP peer.
func (r *publicRequest) setPeer(peer net.Addr) {
	r.peerNet, r.remote, r.peer = peer, "", netip.AddrPort{}
	if a, ok := peer.(*net.TCPAddr); ok {
		r.peer = a.AddrPort()
	}
}

// Header returns the first value of a header; Host is not one (see Host).
func (r *publicRequest) Header(name string) string {
	if name == "Host" {
		return ""
	}
	v := r.ctx.Request.Header.Peek(name)
	if len(v) == 0 {
		return ""
	}
	return string(v)
}

// HeaderValues returns every value of a header.
func (r *publicRequest) HeaderValues(name string) []string {
	if name == "Host" {
		return nil
	}
	r.xff = r.xff[:0]
	for _, v := range r.ctx.Request.Header.PeekAll(name) {
		r.xff = append(r.xff, string(v))
	}
	if len(r.xff) == 0 {
		return nil
	}
	return r.xff
}

// errTarget is a request-target that does not parse.
var errTarget = errors.New("malformed request target")

// errFragment is a request-target with a raw "#". A fragment is never sent
// in a request (RFC 9110 §4.2.4, RFC 9112 §3.2), and servers disagree on
// what a "#" in one means: nginx and Node end the path at it, Go and
// fasthttp keep it as a path byte. Matched as a path byte, "/login#1" is
// one segment that no "/login" route takes, while the upstream serves
// "/login"; so it is refused, not read either way. An escaped "%23" is a
// path byte everywhere and stays allowed.
var errFragment = errors.New(`raw "#" in a request target`)

// fragmentDetail is the 400's detail for a raw "#" found in where.
func fragmentDetail(where string) string {
	return "The " + where + ` holds a raw "#" (a fragment), which no request carries and upstreams read differently: write a "#" that belongs to the path as "%23" (see the path rules in docs/operations.md).`
}

// targetDetail is the 400's detail for a request-target that parseTarget
// refuses with err.
func targetDetail(err error) string {
	if errors.Is(err, errFragment) {
		return fragmentDetail("request-target")
	}
	return "The request target cannot be parsed."
}

// parseTarget fills in r's host from the Host header and r's target,
// escaped path, decoded path and query from the raw request-target (see
// splitTarget); an absolute-form target's host becomes r's host. r's peer
// is set from peer; host and target share one allocation.
func (r *publicRequest) parseTarget(host, raw []byte, peer net.Addr) error {
	r.buf = append(append(r.buf[:0], host...), raw...)
	all := string(r.buf)
	r.host = all[:len(host)]
	r.target = all[len(host):]
	r.setPeer(peer)
	var targetHost string
	var err error
	r.escaped, r.path, r.query, targetHost, err = splitTarget(r.target)
	if targetHost != "" {
		r.host = targetHost
	}
	return err
}

// splitTarget splits a request-target into its escaped path, decoded path
// and query, as url.ParseRequestURI reads it, and returns the host of an
// absolute-form target. A target made only of bytes that need no escaping
// and are no escape is split directly, without an allocation; any other
// goes through url.ParseRequestURI, so both give the same path. A target
// with a raw "#", in its path or its query, is errFragment.
func splitTarget(target string) (escaped, path, query, host string, err error) {
	if strings.IndexByte(target, '#') >= 0 {
		return "", "", "", "", errFragment
	}
	if plainTarget(target) {
		escaped = target
		if i := strings.IndexByte(target, '?'); i >= 0 {
			escaped, query = target[:i], target[i+1:]
		}
		return escaped, escaped, query, "", nil
	}
	u, perr := url.ParseRequestURI(target)
	if perr != nil {
		return "", "", "", "", errTarget
	}
	escaped, path, query = u.EscapedPath(), u.Path, u.RawQuery
	if escaped == "" {
		escaped, path = "/", "/"
	}
	return escaped, path, query, u.Host, nil
}

// plainTarget reports whether raw is an origin-form target ("/...") whose
// bytes are all ones a path or query holds as they are: unreserved,
// sub-delims, ':', '@', '/' and '?', no '%'.
func plainTarget(raw string) bool {
	if len(raw) == 0 || raw[0] != '/' {
		return false
	}
	for i := 0; i < len(raw); i++ {
		switch c := raw[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '/' || c == '-' || c == '.' || c == '_' || c == '~' || c == '!' || c == '$' || c == '&' ||
			c == '\'' || c == '(' || c == ')' || c == '*' || c == '+' || c == ',' || c == '=' || c == ':' || c == '@':
		case c == '?' || c == ';':
		default:
			return false
		}
	}
	return true
}

// appendAddr appends a as net/http's Request.RemoteAddr gives it.
func appendAddr(b []byte, a net.Addr) []byte {
	switch a := a.(type) {
	case nil:
		return b
	case *net.TCPAddr:
		return a.AddrPort().AppendTo(b)
	}
	return append(b, a.String()...)
}

// requestContext is a public request's context: the access log entry
// (accessKey{}) and the trace span (spanKey{}) travel in it, and it is never cancelled: the engine does
// not tell when a client leaves, and the end of the server's drain must not
// fail the store calls of requests still being served.
type requestContext struct{ r *publicRequest }

func (requestContext) Deadline() (time.Time, bool) { return time.Time{}, false }
func (requestContext) Done() <-chan struct{}       { return nil }
func (requestContext) Err() error                  { return nil }

func (c requestContext) Value(key any) any {
	switch key.(type) {
	case accessKey:
		return c.r.entry
	case spanKey:
		return &c.r.span
	}
	return nil
}
