package redis

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/redis/rueidis"
)

// ErrUnavailable is wrapped by errors for which the Redis server answered,
// but said it cannot serve now: BUSY, OOM, LOADING, READONLY, CLUSTERDOWN,
// MASTERDOWN, NOREPLICAS or TRYAGAIN. A circuit breaker should treat them
// like a connection failure. Test with errors.Is.
var ErrUnavailable = errors.New("redis unavailable")

// ErrClosed is returned by every method of a Store after Close.
var ErrClosed = errors.New("redis store: closed")

// errBadReply is wrapped when a script answers in a shape the store does not
// expect (for example a key holding another program's data).
var errBadReply = errors.New("unexpected script reply")

// unavailableCodes are the error codes that mean "not now" rather than
// "wrong request".
var unavailableCodes = []string{
	"BUSY", "OOM", "LOADING", "READONLY", "CLUSTERDOWN", "MASTERDOWN", "NOREPLICAS", "TRYAGAIN",
}

// connectError reports a failure to set up the client: dialing, AUTH,
// SELECT, Sentinel or Cluster discovery.
type connectError struct{ err error }

func (e *connectError) Error() string { return "redis store: connect: " + e.err.Error() }
func (e *connectError) Unwrap() error { return e.err }

// wrap adds the store's context to an error from step, and marks the server
// errors that mean the server is unavailable.
func wrap(step string, err error) error {
	if re, ok := rueidis.IsRedisErr(err); ok {
		msg := re.Error()
		code, _, _ := strings.Cut(msg, " ")
		for _, c := range unavailableCodes {
			if code == c {
				return fmt.Errorf("redis store: %s: %w: %w", step, ErrUnavailable, err)
			}
		}
	}
	return fmt.Errorf("redis store: %s: %w", step, err)
}

// ErrorKind classifies an error returned by a Store for metrics
// (sluice_store_errors_total{kind}). It returns
//
//   - "timeout": the call ran out of time (the store's Timeout, the
//     caller's deadline, or a connection read/write deadline);
//   - "connection": Redis could not be reached or the connection broke
//     (refused, reset, closed, failed to connect or authenticate);
//   - "script": Redis rejected or failed a script, or answered in an
//     unexpected shape;
//   - "other": anything else, including [ErrUnavailable] (the server
//     answered BUSY, OOM, LOADING, …; test for it with errors.Is),
//     [ErrClosed], cancellation by the caller and invalid requests.
//
// It returns "" for a nil error.
func ErrorKind(err error) string {
	var ce *connectError
	var ne net.Error
	switch {
	case err == nil:
		return ""
	case errors.Is(err, ErrClosed), errors.Is(err, ErrUnavailable):
		return "other"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	case errors.As(err, &ce):
		return "connection"
	case isConnection(err):
		return "connection"
	case errors.Is(err, errBadReply):
		return "script"
	}
	var re *rueidis.RedisError
	if errors.As(err, &re) {
		return "script"
	}
	return "other"
}

// isConnection reports whether err means the connection is unusable.
func isConnection(err error) bool {
	var oe *net.OpError
	return errors.As(err, &oe) ||
		errors.Is(err, rueidis.ErrClosing) ||
		errors.Is(err, rueidis.ErrNoAddr) ||
		errors.Is(err, errWrongRole) ||
		errors.Is(err, io.EOF) ||
		errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, net.ErrClosed) ||
		errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE)
}
