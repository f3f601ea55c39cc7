package core

import (
	"maps"
	"net/textproto"
	"slices"

	"github.com/sluice-gw/sluice/gateway/config"
)

// Fixed is a respond route's answer: the same status, headers and body for
// every request the route admits. Content-Type defaults to text/plain.
type Fixed struct {
	Status int
	// Headers are the answer's header fields, names canonical, in a
	// stable order.
	Headers [][2]string
	Body    []byte
}

// newFixed compiles a route's respond section.
func newFixed(rc *config.Respond) *Fixed {
	f := &Fixed{Status: rc.Status, Body: []byte(rc.Body)}
	if f.Status == 0 {
		f.Status = statusOK
	}
	h := make(map[string]string, len(rc.Headers)+1)
	for _, k := range slices.Sorted(maps.Keys(rc.Headers)) {
		h[textproto.CanonicalMIMEHeaderKey(k)] = rc.Headers[k]
	}
	if h["Content-Type"] == "" {
		h["Content-Type"] = "text/plain; charset=utf-8"
	}
	for _, k := range slices.Sorted(maps.Keys(h)) {
		f.Headers = append(f.Headers, [2]string{k, h[k]})
	}
	return f
}
