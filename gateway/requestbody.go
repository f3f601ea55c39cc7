package gateway

import (
	"errors"
	"io"
	"net/http"
	"os"
	"sync"
	"time"
)

// bodyReader wraps the client's request body as the proxy streams it to the
// upstream. A read that fails (malformed chunked encoding, a chunk size that
// overflows, a body cut short) returns a *proxyError that blames the client:
// 400, or 408 when the read was ended because the route's timeout passed
// while the body was still arriving (endRead). The transport aborts the
// upstream request with that error, so the proxy answers the client's fault
// rather than the upstream's (502). It is safe for concurrent use: the
// transport reads in its own goroutine while the timer may end the read.
type bodyReader struct {
	io.ReadCloser
	rc       *http.ResponseController // the client's connection, for endRead
	mu       sync.Mutex
	err      *proxyError // first read error other than io.EOF
	done     bool        // the body was read to its end
	ended    bool        // endRead set the connection's read deadline
	released bool        // the handler returned: the connection is no longer this request's
}

// newBodyReader wraps body, the body of the request w answers.
func newBodyReader(body io.ReadCloser, w http.ResponseWriter) *bodyReader {
	return &bodyReader{ReadCloser: body, rc: http.NewResponseController(w)}
}

// Read reads from the client's body; an error other than io.EOF comes back
// as the *proxyError the request is answered with.
func (b *bodyReader) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
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
	default:
		b.err = &proxyError{Status: http.StatusBadRequest, Detail: "The request body could not be read.",
			Log: "request body unreadable", Err: err}
	}
	return n, b.err
}

// errBodyTimeout answers a request whose body was still arriving when the
// route's timeout passed.
var errBodyTimeout = &proxyError{Status: http.StatusRequestTimeout,
	Detail: "The request body did not arrive within the route's timeout.", Log: "request body too slow"}

// endRead ends the read of a body the client may still be sending (neither
// read to its end nor failed) by setting the read deadline of the client's
// connection to now, unless the handler has returned (release): past that,
// the connection may already carry the client's next request. Before it
// ends the read it calls cancel, so that the request carries the cause of
// its end before the client's connection fails. It reports whether it
// ended a read.
func (b *bodyReader) endRead(cancel func()) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.released || b.done || b.err != nil {
		return false
	}
	b.ended = true
	cancel()
	b.rc.SetReadDeadline(time.Now())
	return true
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
