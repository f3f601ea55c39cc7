package gateway

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
	"time"
)

// bodyReaderKey is the context key of the *bodyReader wrapping a proxied
// request's body.
type bodyReaderKey struct{}

// bodyReader wraps the client's request body as the proxy streams it to the
// upstream and records the first read error. A body that cannot be read
// (malformed chunked encoding, a chunk size that overflows, a body cut
// short) makes the transport abort the upstream request; the proxy's
// ErrorHandler asks the bodyReader so that it blames the client (400)
// rather than the upstream (502). It is safe for concurrent use: the
// transport reads in its own goroutine while the ErrorHandler may ask.
type bodyReader struct {
	io.ReadCloser
	mu       sync.Mutex
	err      error // first read error other than io.EOF
	done     bool  // the body was read to its end
	released bool  // the handler returned: the connection is no longer this request's
}

// Read reads from the client's body, recording a read error or the end.
func (b *bodyReader) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		b.mu.Lock()
		if errors.Is(err, io.EOF) {
			b.done = true
		} else if b.err == nil {
			b.err = err
		}
		b.mu.Unlock()
	}
	return n, err
}

// endRead ends the read of a body the client may still be sending (neither
// read to its end nor failed) by setting the read deadline of w's
// connection to now, unless the handler has returned (release): past that,
// the connection may already carry the client's next request.
func (b *bodyReader) endRead(w http.ResponseWriter) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.released && !b.done && b.err == nil {
		http.NewResponseController(w).SetReadDeadline(time.Now())
	}
}

// release records that the handler has returned; endRead does nothing after.
func (b *bodyReader) release() {
	b.mu.Lock()
	b.released = true
	b.mu.Unlock()
}

// Err returns the first error reading the body, or nil.
func (b *bodyReader) Err() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.err
}

// requestBodyError returns the error reading the client's body of the
// request with context ctx, or nil if it was read without one (or not read,
// or there was none).
func requestBodyError(ctx context.Context) error {
	if b, ok := ctx.Value(bodyReaderKey{}).(*bodyReader); ok {
		return b.Err()
	}
	return nil
}
