package fastengine

import (
	"bytes"
	"net/http"

	"github.com/valyala/fasthttp"
)

// defaultMaxHeaderBytes is the default bound on the request line and headers
// (server.max_header_bytes).
const defaultMaxHeaderBytes = 16 << 10

// serverReadBufferSize returns the public server's read buffer size for a
// gateway bound of max bytes. The engine answers a header block that does
// not fit its buffer itself (through the error handler, with the same JSON
// 431), but to name the configured bound exactly the buffer holds up to
// twice it and the gateway measures each request itself (headerBytes). The
// buffer is also what a connection may make the server hold before its
// request is parsed, so it stays a small multiple of the bound.
func serverReadBufferSize(bound int) int { return 2*bound + 4096 }

// headerBytes returns the size of the request line and header block as
// sent: "METHOD URI PROTO\r\n", the header lines as received and the final
// "\r\n".
func headerBytes(h *fasthttp.RequestHeader) int {
	return len(h.Method()) + 1 + len(h.RequestURI()) + 1 + len(h.Protocol()) + 2 + len(h.RawHeaders())
}

// checkFraming refuses a header block whose framing or fields Go's server
// refuses and the engine's parser lets through, so that no request is read
// one way by the gateway and another by an upstream (docs/operations.md,
// "Answers sluice gives itself"): 501 for a Transfer-Encoding other than a
// single "chunked"; 400 for several or malformed Content-Length values, a
// field name that is not a token (a space in it, or before its colon), a
// control character in a field value, a header line ended by a bare LF, a
// Connection header that names Content-Length or Transfer-Encoding, a
// missing (HTTP/1.1) or repeated Host. It returns the status and detail, or
// 0.
func checkFraming(h *fasthttp.RequestHeader) (int, string) {
	raw := h.RawHeaders()
	var cl []byte
	var te [][]byte
	hosts := 0
	for len(raw) > 0 {
		var line []byte
		i := bytes.IndexByte(raw, '\n')
		if i < 0 {
			line, raw = raw, nil
		} else {
			line, raw = raw[:i], raw[i+1:]
		}
		if len(line) == 0 || line[len(line)-1] != '\r' {
			return http.StatusBadRequest, "A header line ends in a bare LF, not CRLF."
		}
		line = line[:len(line)-1]
		if len(line) == 0 {
			continue
		}
		if line[0] == ' ' || line[0] == '\t' { // obs-fold: a continuation, as Go unfolds it
			if hasCtl(line) {
				return http.StatusBadRequest, "A header field value holds a control character."
			}
			continue
		}
		colon := bytes.IndexByte(line, ':')
		if colon <= 0 {
			return http.StatusBadRequest, "A header line is malformed."
		}
		name, value := line[:colon], bytes.TrimSpace(line[colon+1:])
		if c := name[len(name)-1]; c == ' ' || c == '\t' {
			return http.StatusBadRequest, "A header field name is followed by white space."
		}
		// The engine checks every other byte of a name; a space inside
		// one it lets through.
		if bytes.IndexByte(name, ' ') >= 0 {
			return http.StatusBadRequest, "A header field name is not a token."
		}
		if hasCtl(value) {
			return http.StatusBadRequest, "A header field value holds a control character."
		}
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			if cl != nil && !bytes.Equal(cl, value) || !digits(value) {
				return http.StatusBadRequest, "The Content-Length is malformed or given twice."
			}
			cl = value
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			te = append(te, value)
		case bytes.EqualFold(name, []byte("Host")):
			hosts++
		case bytes.EqualFold(name, []byte("Connection")):
			// Naming a framing header would drop it on the way upstream
			// and leave the body without its length.
			if hasToken(value, "content-length") || hasToken(value, "transfer-encoding") {
				return http.StatusBadRequest, "The Connection header names a framing header (Content-Length or Transfer-Encoding)."
			}
		}
	}
	if len(te) > 1 || len(te) == 1 && !bytes.EqualFold(te[0], []byte("chunked")) {
		return http.StatusNotImplemented, "Only a single chunked transfer coding is supported."
	}
	if hosts > 1 || hosts == 0 && h.IsHTTP11() {
		return http.StatusBadRequest, "The request must carry exactly one Host header."
	}
	return 0, ""
}

// hasCtl reports whether b holds a control character other than a tab.
func hasCtl(b []byte) bool {
	for _, c := range b {
		if c < 0x20 && c != '\t' || c == 0x7f {
			return true
		}
	}
	return false
}

// digits reports whether b is a non-empty run of ASCII digits.
func digits(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
