// Package testkit gives tests their loopback listeners and the small servers
// they run on them, so that no test outside the test kit calls net.Listen
// itself (internal/layout's test checks it; docs/layout.md, "The test kit").
// It imports only the standard library.
//
// Every listener is TCP on 127.0.0.1 with a port the kernel picks, and is
// closed at the test's cleanup.
package testkit

import (
	"errors"
	"net"
	"net/http"
	"strconv"
	"sync"
	"testing"
)

// Listen returns a TCP listener on 127.0.0.1 with a port the kernel picks.
// It closes the listener at tb's cleanup; closing it earlier is harmless.
// It ends the test when the listener cannot be opened.
func Listen(tb testing.TB) net.Listener {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("testkit: listen on 127.0.0.1:0: %v", err)
	}
	tb.Cleanup(func() { ln.Close() })
	return ln
}

// ListenAgain returns a TCP listener on addr, a loopback address
// ("127.0.0.1:port") a listener of the kit had, for a test that stops a
// server and starts it again on the same port. It closes the listener at
// tb's cleanup; closing it earlier is harmless. It ends the test when addr
// is not on 127.0.0.1; it returns the error when the port cannot be bound
// (another process may have taken it meanwhile).
func ListenAgain(tb testing.TB, addr string) (net.Listener, error) {
	tb.Helper()
	host, _, err := net.SplitHostPort(addr)
	if err != nil || host != "127.0.0.1" {
		tb.Fatalf("testkit: listen again on %q: not a 127.0.0.1:port address", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	tb.Cleanup(func() { ln.Close() })
	return ln, nil
}

// Serve calls serve in a goroutine with a fresh listener from [Listen] and
// returns the listener's address ("127.0.0.1:port"). At tb's cleanup it
// closes the listener and waits for serve to return, so serve must return
// once its listener is closed (as http.Server.Serve and an Accept loop do).
// An error from serve other than one wrapping net.ErrClosed or
// http.ErrServerClosed fails the test.
func Serve(tb testing.TB, serve func(net.Listener) error) string {
	tb.Helper()
	ln := Listen(tb)
	done := make(chan error, 1)
	go func() { done <- serve(ln) }()
	tb.Cleanup(func() {
		ln.Close()
		if err := <-done; err != nil && !errors.Is(err, net.ErrClosed) && !errors.Is(err, http.ErrServerClosed) {
			tb.Errorf("testkit: serving %s: %v", ln.Addr(), err)
		}
	})
	return ln.Addr().String()
}

// ServeConns accepts connections on a fresh listener from [Listen] and
// calls handle in a goroutine of its own for each, closing the connection
// when handle returns. It returns the listener's address
// ("127.0.0.1:port"). At tb's cleanup it closes the listener and every
// connection still open, and waits for every handle to return.
func ServeConns(tb testing.TB, handle func(net.Conn)) string {
	tb.Helper()
	var (
		mu   sync.Mutex
		open = map[net.Conn]struct{}{}
		wg   sync.WaitGroup
	)
	tb.Cleanup(func() {
		// Serve's cleanup, registered later, runs before this one: the
		// accept loop has returned, so no connection is added from here on.
		mu.Lock()
		for c := range open {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return Serve(tb, func(ln net.Listener) error {
		for {
			c, err := ln.Accept()
			if err != nil {
				return err
			}
			mu.Lock()
			open[c] = struct{}{}
			wg.Add(1)
			mu.Unlock()
			go func() {
				defer wg.Done()
				defer func() {
					mu.Lock()
					delete(open, c)
					mu.Unlock()
					c.Close()
				}()
				handle(c)
			}()
		}
	})
}

// FreePorts returns n distinct loopback TCP ports that the kernel handed
// out a moment ago and that nothing listens on when it returns: it holds n
// listeners open at once, then closes them. Another process may take a
// port before the caller binds it; a caller that starts a server on one
// treats "address already in use" as that race.
func FreePorts(tb testing.TB, n int) []int {
	tb.Helper()
	lns := make([]net.Listener, n)
	ports := make([]int, n)
	for i := range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			for _, l := range lns[:i] {
				l.Close()
			}
			tb.Fatalf("testkit: listen on 127.0.0.1:0: %v", err)
		}
		lns[i] = ln
		ports[i] = ln.Addr().(*net.TCPAddr).Port
	}
	var errs []error
	for _, ln := range lns {
		errs = append(errs, ln.Close())
	}
	if err := errors.Join(errs...); err != nil {
		tb.Fatalf("testkit: free ports: %v", err)
	}
	return ports
}

// ClosedAddr returns a loopback address ("127.0.0.1:port") that nothing
// listens on when it returns, for a test of a refused connection.
func ClosedAddr(tb testing.TB) string {
	tb.Helper()
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(FreePorts(tb, 1)[0]))
}
