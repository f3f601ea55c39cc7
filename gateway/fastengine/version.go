package fastengine

import (
	"bytes"

	"github.com/valyala/fasthttp"
)

// minorAsHTTP11 makes a request of HTTP/1.2 to HTTP/1.9 an HTTP/1.1 one: a
// recipient of a higher minor version than it implements serves it as the
// highest it does (RFC 9110 §6.2), and the request goes upstream as
// HTTP/1.1. Its connection stays open unless it asked for close (or carries
// a Transfer-Encoding, whose connection the engine closes anyway). Any other
// version is left as it is: HTTP/1.0 is served as such, and a major version
// other than 1 is answered 505 (Gateway.serve).
func minorAsHTTP11(h *fasthttp.RequestHeader) {
	p := h.Protocol()
	if len(p) != len("HTTP/1.1") || p[5] != '1' || p[7] < '2' {
		return
	}
	closeAsked := h.ConnectionClose() && (h.ContentLength() == -1 || asksClose(h.RawHeaders()))
	h.SetProtocol("HTTP/1.1")
	if !closeAsked {
		h.ResetConnectionClose()
	}
}

// majorOne reports whether the protocol of a request line is HTTP/1.x.
func majorOne(p []byte) bool {
	return len(p) == len("HTTP/1.1") && p[5] == '1'
}

// asksClose reports whether the raw header block lists "close" in a
// Connection header. (The parsed header's Connection reads "close" for any
// request the engine means to close.)
func asksClose(raw []byte) bool {
	for len(raw) > 0 {
		var line []byte
		if i := bytes.IndexByte(raw, '\n'); i >= 0 {
			line, raw = raw[:i], raw[i+1:]
		} else {
			line, raw = raw, nil
		}
		name, value, ok := bytes.Cut(line, []byte{':'})
		if ok && bytes.EqualFold(bytes.TrimSpace(name), []byte("Connection")) && hasToken(value, "close") {
			return true
		}
	}
	return false
}

// hasToken reports whether the comma-separated header value v lists token.
func hasToken(v []byte, token string) bool {
	for len(v) > 0 {
		var item []byte
		if i := bytes.IndexByte(v, ','); i >= 0 {
			item, v = v[:i], v[i+1:]
		} else {
			item, v = v, nil
		}
		if tokenIs(bytes.TrimSpace(item), token) {
			return true
		}
	}
	return false
}

// tokenIs reports whether b is token, made of lower-case ASCII letters and
// '-', compared case-insensitively.
func tokenIs(b []byte, token string) bool {
	if len(b) != len(token) {
		return false
	}
	for i := range len(b) {
		if b[i]|0x20 != token[i] {
			return false
		}
	}
	return true
}
