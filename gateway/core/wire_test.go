package core

import (
	"net/http"
	"net/netip"
)

// headerWire is a Wire over an http.Header: the engine's side of a request
// in the core's tests.
type headerWire struct {
	h      http.Header
	remote string
}

var _ Wire = (*headerWire)(nil)

func (w *headerWire) Peek(name string) []byte {
	if vs := w.h.Values(name); len(vs) > 0 {
		return []byte(vs[0])
	}
	return nil
}

func (w *headerWire) PeekAll(name string) [][]byte {
	var out [][]byte
	for _, v := range w.h.Values(name) {
		out = append(out, []byte(v))
	}
	return out
}

func (w *headerWire) RemoteAddr() string { return w.remote }

// newRequest returns the core's view of a request as an engine fills it in
// (Reset), over header h (nil for none) from peer, its target parsed as
// Table.Decide parses it.
func newRequest(method, host, target string, h http.Header, peer netip.AddrPort) (*Request, error) {
	if h == nil {
		h = http.Header{}
	}
	r := new(Request)
	r.Reset(&headerWire{h: h, remote: peer.String()}, method, []byte(host), []byte(target), peer)
	return r, r.parseTarget()
}
