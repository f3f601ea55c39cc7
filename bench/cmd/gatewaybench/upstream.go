package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"
)

// upstreamBody is what the upstream answers: small, so that the figures
// describe per-request overhead rather than copying.
var upstreamBody = []byte("hello from the benchmark upstream\n")

// upstream is the benchmark's backend: an in-process HTTP/1.1 server on a
// loopback port that answers every request with upstreamBody.
type upstream struct {
	addr string
	srv  *http.Server
	done chan struct{}
}

// startUpstream listens on a free loopback port and serves in the background.
func startUpstream() (*upstream, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("upstream: listen: %w", err)
	}
	length := strconv.Itoa(len(upstreamBody))
	h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header()["Content-Type"] = []string{"text/plain; charset=utf-8"}
		w.Header()["Content-Length"] = []string{length}
		w.Write(upstreamBody)
	})
	u := &upstream{
		addr: ln.Addr().String(),
		srv:  &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, IdleTimeout: time.Minute},
		done: make(chan struct{}),
	}
	go func() {
		defer close(u.done)
		if err := u.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			panic(fmt.Sprintf("upstream: serve: %v", err)) // a listener that fails on loopback is a broken machine
		}
	}()
	return u, nil
}

// close stops the server, dropping idle connections.
func (u *upstream) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := u.srv.Shutdown(ctx); err != nil {
		u.srv.Close()
	}
	<-u.done
}
