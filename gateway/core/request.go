package core

import (
	"context"
	"crypto/x509"
	"errors"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/sluice-gw/sluice/gateway/internal/tracing"
	"github.com/sluice-gw/sluice/httplimit"
)

// Wire is what an engine gives the core of one request beyond its method,
// host and target: its header fields as received, and its TCP peer. The
// byte slices it returns are read during the call that asked for them and
// never kept.
type Wire interface {
	// Peek returns the first value of header name (compared without
	// case), nil when the request has none.
	Peek(name string) []byte
	// PeekAll returns every value of header name, in order.
	PeekAll(name string) [][]byte
	// RemoteAddr returns the TCP peer as net/http's Request.RemoteAddr
	// gives it ("" when there is none).
	RemoteAddr() string
}

// Request is one request of the public listener as the core sees it, the
// one view that route matching, keys and limits read (an
// httplimit.Request). An engine fills one in with Reset and hands it to
// Table.Decide; nothing past it depends on the engine. Its strings are
// copies, so they may outlive the request. A Request whose Wire implements
// httplimit.ClientWatcher ends a shape-mode hold when the client leaves.
type Request struct {
	wire   Wire
	method string
	host   string
	// target is the request-target as received; escaped the path part of
	// it, path that decoded, query the part after '?'.
	target, escaped, path, query string
	// peer is the TCP peer's address, when it is one; remote, its
	// RemoteAddr form, is asked of the wire when first needed.
	peer   netip.AddrPort
	remote string
	// entry is the access log record, nil when the request is not sampled.
	entry *accessEntry
	// span is the request's trace span, off when tracing is.
	span tracing.Span
	xff  []string
	buf  []byte
	// status, when not 0, is the status recorded instead of the engine's
	// answer (499: the client went away).
	status int
	// client names the request's client for the upstream latency signal
	// (Route.clientOf before the limits, clientOfKeys after); 0: not
	// named yet.
	client uint64
	// secure: the request came over TLS; cert is the client's verified
	// certificate, nil without one.
	secure bool
	cert   *x509.Certificate
	// http2Upstreams: the engine serving r forwards to HTTP/2-only
	// (h2c:// and h2://) upstreams.
	http2Upstreams bool
}

// Reset makes r the view of a new request: its wire, method, Host header,
// raw request-target and TCP peer (the zero AddrPort when the peer is not
// TCP). The target is parsed by Table.Decide. Scratch memory is kept.
func (r *Request) Reset(w Wire, method string, host, target []byte, peer netip.AddrPort) {
	*r = Request{wire: w, method: method, peer: peer, xff: r.xff[:0], buf: r.buf[:0]}
	r.buf = append(append(r.buf, host...), target...)
	all := string(r.buf)
	r.host = all[:len(host)]
	r.target = all[len(host):]
}

// SetTLS records that r came over TLS, with cert the client's verified
// certificate (nil when it sent none). An engine calls it after Reset.
func (r *Request) SetTLS(cert *x509.Certificate) { r.secure, r.cert = true, cert }

// SetHTTP2Upstreams records that the engine serving r can forward it to an
// HTTP/2-only upstream (h2c:// or h2://); without it, a route with such an
// upstream answers r 505 before its limits run. An engine calls it after
// Reset.
func (r *Request) SetHTTP2Upstreams() { r.http2Upstreams = true }

// Secure reports whether r came over TLS.
func (r *Request) Secure() bool { return r.secure }

// ClientCertificate returns the client's verified TLS certificate, nil
// when r did not come over TLS or the client sent none (the client_cert
// key sources read it).
func (r *Request) ClientCertificate() *x509.Certificate { return r.cert }

// Clear drops what r references, keeping its scratch memory for reuse.
func (r *Request) Clear() {
	*r = Request{xff: r.xff[:0], buf: r.buf[:0]}
}

// Span returns r's trace span (off when tracing is).
func (r *Request) Span() *tracing.Span { return &r.span }

// SetStatus records status as r's answer instead of the one the engine
// sent (499: the client went away).
func (r *Request) SetStatus(status int) { r.status = status }

// Status returns the status SetStatus recorded, or 0.
func (r *Request) Status() int { return r.status }

// Peer returns the TCP peer's address, the zero AddrPort when the peer is
// not TCP.
func (r *Request) Peer() netip.AddrPort { return r.peer }

// EscapedPath returns the path as received, escapes kept.
func (r *Request) EscapedPath() string { return r.escaped }

var (
	_ httplimit.Request       = (*Request)(nil)
	_ httplimit.PeerAddresser = (*Request)(nil)
	_ httplimit.ClientWatcher = (*Request)(nil)
)

func (r *Request) Context() context.Context { return requestContext{r} }
func (r *Request) Method() string           { return r.method }
func (r *Request) Host() string             { return r.host }
func (r *Request) Path() string             { return r.path }
func (r *Request) RawQuery() string         { return r.query }

// RemoteAddr returns the TCP peer as net/http's Request.RemoteAddr gives it.
func (r *Request) RemoteAddr() string {
	if r.remote == "" && r.wire != nil {
		r.remote = r.wire.RemoteAddr()
	}
	return r.remote
}

// PeerAddr returns the TCP peer's address as httplimit parses RemoteAddr:
// without zone, IPv4-mapped unmapped.
func (r *Request) PeerAddr() (netip.Addr, bool) {
	if r.peer.IsValid() {
		return r.peer.Addr().Unmap().WithZone(""), true
	}
	s := r.RemoteAddr()
	if s == "" {
		return netip.Addr{}, false
	}
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap().WithZone(""), true
	}
	a, err := netip.ParseAddr(s)
	return a.Unmap().WithZone(""), err == nil
}

// WatchClient is the wire's httplimit.ClientWatcher, when it has one.
func (r *Request) WatchClient() (<-chan struct{}, func()) {
	if w, ok := r.wire.(httplimit.ClientWatcher); ok {
		return w.WatchClient()
	}
	return nil, func() {}
}

// Header returns the first value of a header; Host is not one (see Host).
func (r *Request) Header(name string) string {
	if name == "Host" {
		return ""
	}
	v := r.wire.Peek(name)
	if len(v) == 0 {
		return ""
	}
	return string(v)
}

// HeaderValues returns every value of a header.
func (r *Request) HeaderValues(name string) []string {
	if name == "Host" {
		return nil
	}
	r.xff = r.xff[:0]
	for _, v := range r.wire.PeekAll(name) {
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

// parseTarget fills in r's escaped path, decoded path and query from the
// raw request-target (see splitTarget); an absolute-form target's host
// becomes r's host.
func (r *Request) parseTarget() error {
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

// requestContext is a public request's context: the access log entry
// (accessKey{}) and the trace span (spanKey{}) travel in it, and it is never cancelled: the engine does
// not tell when a client leaves, and the end of the server's drain must not
// fail the store calls of requests still being served.
type requestContext struct{ r *Request }

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

// MethodString returns a request method as a string, without an
// allocation for the common ones.
func MethodString(m []byte) string {
	switch string(m) { // no allocation: the compiler compares the bytes
	case "GET":
		return "GET"
	case "POST":
		return "POST"
	case "HEAD":
		return "HEAD"
	case "PUT":
		return "PUT"
	case "DELETE":
		return "DELETE"
	case "PATCH":
		return "PATCH"
	case "OPTIONS":
		return "OPTIONS"
	}
	return string(m)
}
