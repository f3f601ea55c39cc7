package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// Environment variables of the Go TLS proxy child: its certificate and key
// files (PEM).
const (
	childCertEnv = "PEERBENCH_CERT"
	childKeyEnv  = "PEERBENCH_KEY"
)

// modeGoTLS is the Go floor of the TLS cells: net/http's reverse proxy
// served over TLS 1.3, HTTP/2 and HTTP/1.1 by ALPN.
const modeGoTLS = "gotls"

// goProxyMaxStreams is the HTTP/2 streams a client may have open at once
// on one connection, on every TLS server of the run (sluice's default).
const goProxyMaxStreams = 100

// goProxy returns the Go floor's handler: httputil.ReverseProxy forwarding
// every request unchanged (no X-Forwarded-* headers) to upstream over
// kept-alive HTTP/1.1 connections.
func goProxy(upstream string) (http.Handler, error) {
	target, err := url.Parse("http://" + upstream)
	if err != nil {
		return nil, fmt.Errorf("upstream %q: %w", upstream, err)
	}
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        1024,
		MaxIdleConnsPerHost: 1024,
		IdleConnTimeout:     time.Minute,
	}
	return &httputil.ReverseProxy{
		Rewrite:   func(r *httputil.ProxyRequest) { r.SetURL(target); r.Out.Host = r.In.Host },
		Transport: tr,
		ErrorLog:  log.New(os.Stderr, "peerbench gotls: ", 0),
	}, nil
}

// runGoTLSChild serves the Go floor on a free loopback port until SIGTERM
// or SIGINT, announcing the port as the other children do, and returns the
// exit code.
func runGoTLSChild() int {
	upstream, certFile, keyFile := os.Getenv(childUpstreamEnv), os.Getenv(childCertEnv), os.Getenv(childKeyEnv)
	if upstream == "" || certFile == "" || keyFile == "" {
		fmt.Fprintf(os.Stderr, "peerbench %s: %s, %s and %s must be set\n", modeGoTLS, childUpstreamEnv, childCertEnv, childKeyEnv)
		return 2
	}
	h, err := goProxy(upstream)
	if err != nil {
		fmt.Fprintf(os.Stderr, "peerbench %s: %v\n", modeGoTLS, err)
		return 2
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintf(os.Stderr, "peerbench %s: listen: %v\n", modeGoTLS, err)
		return 1
	}
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	protocols.SetHTTP2(true)
	srv := &http.Server{
		Handler:           h,
		TLSConfig:         &tls.Config{MinVersion: tls.VersionTLS13},
		Protocols:         &protocols,
		HTTP2:             &http.HTTP2Config{MaxConcurrentStreams: goProxyMaxStreams},
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       time.Minute,
		ErrorLog:          log.New(os.Stderr, "peerbench gotls: ", 0),
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
	}()
	fmt.Println(listeningPrefix + ln.Addr().String())
	if err := srv.ServeTLS(ln, certFile, keyFile); !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintf(os.Stderr, "peerbench %s: serve: %v\n", modeGoTLS, err)
		return 1
	}
	return 0
}
