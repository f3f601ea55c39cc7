package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/valyala/fasthttp"
)

// Environment variables that turn this binary into a child server (see
// runChild): which one, and for the proxy, the upstream's host:port.
const (
	childModeEnv     = "PEERBENCH_CHILD"
	childUpstreamEnv = "PEERBENCH_UPSTREAM"
)

// The child modes.
const (
	modeUpstream  = "upstream"  // the Go upstream every cell forwards to
	modeFastProxy = "fastproxy" // the bare fasthttp reverse proxy (the floor)
)

// listeningPrefix starts the one line a child prints once it accepts
// connections, followed by its host:port.
const listeningPrefix = "peerbench child listening "

// upstreamBody is what the upstream answers: small, so that the figures
// describe per-request overhead rather than copying.
var upstreamBody = []byte("hello from the peerbench upstream\n")

// runChild serves mode on a free loopback port until SIGTERM or SIGINT and
// returns the exit code.
func runChild(mode string) int {
	var h fasthttp.RequestHandler
	switch mode {
	case modeGoTLS:
		return runGoTLSChild()
	case modeUpstream:
		h = upstreamHandler
	case modeFastProxy:
		addr := os.Getenv(childUpstreamEnv)
		if addr == "" {
			fmt.Fprintf(os.Stderr, "peerbench %s: %s is not set\n", mode, childUpstreamEnv)
			return 2
		}
		h = fastProxy(addr)
	default:
		fmt.Fprintf(os.Stderr, "peerbench: unknown child mode %q\n", mode)
		return 2
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintf(os.Stderr, "peerbench %s: listen: %v\n", mode, err)
		return 1
	}
	srv := &fasthttp.Server{Handler: h, Name: "peerbench", IdleTimeout: time.Minute}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	go func() {
		<-ctx.Done()
		srv.Shutdown()
	}()
	fmt.Println(listeningPrefix + ln.Addr().String())
	if err := srv.Serve(ln); err != nil {
		fmt.Fprintf(os.Stderr, "peerbench %s: serve: %v\n", mode, err)
		return 1
	}
	return 0
}

// upstreamHandler answers every request with 200 and upstreamBody.
func upstreamHandler(ctx *fasthttp.RequestCtx) {
	ctx.SetContentType("text/plain; charset=utf-8")
	ctx.SetBody(upstreamBody)
}

// fastProxy is the floor: a reverse proxy with no limits and no header
// rewriting beyond the hop-by-hop Connection header, forwarding every
// request to addr over kept-alive connections and streaming nothing (the
// bodies here are small).
func fastProxy(addr string) fasthttp.RequestHandler {
	hc := &fasthttp.HostClient{Addr: addr, MaxConns: 1024, ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second}
	return func(ctx *fasthttp.RequestCtx) {
		req := &ctx.Request
		req.Header.Del("Connection")
		if err := hc.Do(req, &ctx.Response); err != nil {
			ctx.ResetBody()
			ctx.Error("bad gateway: "+err.Error(), fasthttp.StatusBadGateway)
			return
		}
		ctx.Response.Header.Del("Connection")
	}
}

// startSelfChild runs this binary in mode (with upstream for the proxies,
// and extraEnv, "NAME=value" entries, added to its environment) and waits
// up to 10 s for its listening line.
func startSelfChild(mode, upstream string, extraEnv ...string) (*child, string, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, "", fmt.Errorf("find this binary: %w", err)
	}
	env := append(os.Environ(), childModeEnv+"="+mode, childUpstreamEnv+"="+upstream)
	env = append(env, extraEnv...)
	lines := make(chan string, 16)
	c, err := startChild(mode, self, nil, env, "", syscall.SIGKILL, lines)
	if err != nil {
		return nil, "", err
	}
	timeout := time.After(10 * time.Second)
	for {
		select {
		case l := <-lines:
			if addr, ok := strings.CutPrefix(l, listeningPrefix); ok {
				return c, addr, nil
			}
		case <-c.exited:
			return nil, "", fmt.Errorf("%s %w before listening: %s", mode, errExited, c.log)
		case <-timeout:
			c.stop(syscall.SIGKILL, time.Second)
			return nil, "", fmt.Errorf("%s did not listen within 10s: %s", mode, c.log)
		}
	}
}
