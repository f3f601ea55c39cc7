package fastengine

import (
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"syscall"
	"time"
)

// bodyReader wraps the client's request body as the proxy streams it to the
// upstream. A read that fails (malformed chunked encoding, a chunk size that
// overflows, a body cut short) returns a *proxyError that blames the client:
// 400, or 408 when the read was ended because the route's timeout passed
// while the body was still arriving (endRead), or errClientGone when the
// client reset its connection. The upstream request is aborted with that
// error, so the proxy answers the client's fault rather than the upstream's
// (502). It is safe for concurrent use: the timer may end the read while
// the upstream write reads the body.
type bodyReader struct {
	r    io.Reader
	left int       // bytes of a Content-Length body still to come; -1: chunked
	conn deadliner // the client's connection, for endRead
	mu   sync.Mutex
	err  *proxyError // first read error other than io.EOF
	done bool        // the body was read to its end
	// ended: endRead set the connection's read deadline; released: the
	// handler returned, the connection is no longer this request's.
	ended, released bool
}

// deadliner is the client's connection as endRead needs it.
type deadliner interface {
	SetReadDeadline(time.Time) error
}

// newBodyReader wraps body, read from the client connection conn, of
// length size (-1: chunked).
func newBodyReader(body io.Reader, conn deadliner, size int) *bodyReader {
	return &bodyReader{r: body, conn: conn, left: size}
}

// Read reads from the client's body; an error other than io.EOF comes back
// as the *proxyError the request is answered with.
func (b *bodyReader) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if b.left >= 0 {
		b.left -= n
		if err == io.EOF && b.left > 0 {
			err = io.ErrUnexpectedEOF // the engine ends a body cut short as if whole
		}
	}
	if err == nil {
		return n, nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case errors.Is(err, io.EOF):
		b.done = true
		return n, err
	case b.err != nil:
	case b.ended && errors.Is(err, os.ErrDeadlineExceeded):
		b.err = errBodyTimeout
	case clientLeft(err):
		b.err = errClientGone
	default:
		b.err = &proxyError{Status: http.StatusBadRequest, Detail: "The request body could not be read.",
			Log: "request body unreadable", Err: err}
	}
	return n, b.err
}

// clientLeft reports whether a read error means the client reset its
// connection. A body cut short (io.ErrUnexpectedEOF) is the client's fault,
// answered 400 like any malformed body.
func clientLeft(err error) bool {
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, net.ErrClosed)
}

// errBodyTimeout answers a request whose body was still arriving when the
// route's timeout passed.
var errBodyTimeout = &proxyError{Status: http.StatusRequestTimeout,
	Detail: "The request body did not arrive within the route's timeout.", Log: "request body too slow"}

// endRead ends the read of a body the client may still be sending (neither
// read to its end nor failed) by setting the read deadline of the client's
// connection to now, unless the handler has returned (release): past that,
// the connection may already carry the client's next request.
func (b *bodyReader) endRead() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.released || b.done || b.err != nil {
		return
	}
	b.ended = true
	b.conn.SetReadDeadline(time.Now()) //nolint:errcheck // a closed connection fails the read anyway
}

// release records that the handler has returned; endRead does nothing after.
func (b *bodyReader) release() {
	b.mu.Lock()
	b.released = true
	b.mu.Unlock()
}

// failure returns the error the body's read failed with, or nil (read
// without one, not read, or not read yet).
func (b *bodyReader) failure() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.err == nil {
		return nil
	}
	return b.err
}
