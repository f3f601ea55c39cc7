package httplimit

import (
	"context"
	"net/http"
	"net/netip"
)

// Request is what the limits read from an HTTP request, whichever server
// parsed it: the middleware's decision ([Middleware.Decide]), key parts and
// [IPResolver] work on this view, so that every engine that serves limits
// (the net/http [Middleware.Handler], the gateway's own listener) decides
// the same request the same way. An implementation is used by one request
// at a time; the strings it returns may be kept by the limits (a key's
// parts reach [Options.Observe]) and must not change afterwards.
type Request interface {
	// Context is the request's context: it ends a shape-mode hold and is
	// passed to the store.
	Context() context.Context
	// Method is the request method, such as "GET".
	Method() string
	// Host is the request's host as the client sent it (the Host header, or
	// the host of an absolute-form target), port included.
	Host() string
	// Path is the request's URL path, decoded.
	Path() string
	// RawQuery is the query string without the '?', as sent.
	RawQuery() string
	// Header returns the first value of the header named name, given in
	// canonical form ("X-User-Id"), or "" when it is absent. Host is not a
	// header here: see Host.
	Header(name string) string
	// HeaderValues returns every value of the header named name (canonical
	// form), in the order received; nil when absent.
	HeaderValues(name string) []string
	// RemoteAddr is the TCP peer, "ip:port" or a bare IP.
	RemoteAddr() string
}

// PeerAddresser is implemented by a Request that holds its TCP peer's
// address parsed: PeerAddr returns what parsing RemoteAddr would (the
// address without zone, IPv4-mapped unmapped) and whether there is one,
// so that the client address is found without formatting and parsing it
// again on every request.
type PeerAddresser interface {
	PeerAddr() (netip.Addr, bool)
}

// peerAddr returns r's TCP peer address, parsed.
func peerAddr(r Request) (netip.Addr, bool) {
	if pa, ok := r.(PeerAddresser); ok {
		return pa.PeerAddr()
	}
	return parseHostAddr(r.RemoteAddr())
}

// HTTPRequest returns r as a [Request]. It allocates nothing.
func HTTPRequest(r *http.Request) Request { return httpRequest{r} }

// httpRequest is a *http.Request seen as a Request. A struct of one pointer
// is stored in an interface value without an allocation.
type httpRequest struct{ r *http.Request }

func (h httpRequest) Context() context.Context { return h.r.Context() }
func (h httpRequest) Method() string           { return h.r.Method }
func (h httpRequest) Host() string             { return h.r.Host }
func (h httpRequest) Path() string             { return h.r.URL.Path }
func (h httpRequest) RawQuery() string         { return h.r.URL.RawQuery }
func (h httpRequest) RemoteAddr() string       { return h.r.RemoteAddr }

// Header reads the map directly: name is already canonical, and
// http.Header.Get would canonicalize it again on every request.
func (h httpRequest) Header(name string) string {
	if v := h.r.Header[name]; len(v) > 0 {
		return v[0]
	}
	return ""
}

func (h httpRequest) HeaderValues(name string) []string { return h.r.Header[name] }
