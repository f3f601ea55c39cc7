package fastengine

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/sluice-gw/sluice/gateway/metrics"
	"github.com/sluice-gw/sluice/internal/testkit"
)

// timeoutErr is a net.Error that timed out.
type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

// TestUpstreamFailuresCarryStatus: each way a round trip fails comes back
// as a *proxyError carrying the status the proxy answers with.
func TestUpstreamFailuresCarryStatus(t *testing.T) {
	for _, tt := range []struct {
		name   string
		err    error
		status int
	}{
		{"refused", errors.New("connection refused"), 502},
		{"transport timeout", timeoutErr{}, 504},
		{"engine timeout", fasthttp.ErrTimeout, 504},
	} {
		if pe := upstreamFailed(tt.err); pe.Status != tt.status {
			t.Errorf("%s: status %d, want %d", tt.name, pe.Status, tt.status)
		}
	}
	// The route's timeout on a real upstream that accepts and never answers.
	ln := testkit.Listen(t)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	m, err := metrics.New(metrics.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	target := &url.URL{Scheme: "http", Host: ln.Addr().String()}
	h := newProxyHandler(proxyConfig{route: "r", target: target, timeout: 200 * time.Millisecond}, newUpstreams(), m, slog.New(slog.DiscardHandler))
	out, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	out.Header.SetHost("up")
	out.Header.SetRequestURI("/")
	start := time.Now()
	_, _, err = h.roundTrip(&h.targets[0], &out.Header, resp, nil, 0, 0, nil)
	pe, ok := errors.AsType[*proxyError](err)
	if !ok || pe.Status != http.StatusGatewayTimeout {
		t.Errorf("route timeout: error %#v, want a *proxyError with status 504", err)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("route timeout of 200ms answered after %v", took)
	}
}

// nopDeadliner is a connection whose deadline changes nothing.
type nopDeadliner struct{}

func (nopDeadliner) SetReadDeadline(time.Time) error { return nil }

// TestBodyReadErrorIs400: a request body that fails to read returns a
// *proxyError with status 400, and the round trip it broke off answers
// with the body's error, whatever the engine then reports.
func TestBodyReadErrorIs400(t *testing.T) {
	broken := io.MultiReader(strings.NewReader("ab"), iotest.ErrReader(errors.New("malformed chunk")))
	b := newBodyReader(broken, nopDeadliner{}, -1)
	_, err := io.ReadAll(b)
	if pe, ok := errors.AsType[*proxyError](err); !ok || pe.Status != http.StatusBadRequest {
		t.Fatalf("reading a broken body: error %#v, want a *proxyError with status 400", err)
	}
	m, err := metrics.New(metrics.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	up := newHostileListener(t)
	target := &url.URL{Scheme: "http", Host: up}
	h := newProxyHandler(proxyConfig{route: "r", target: target}, newUpstreams(), m, slog.New(slog.DiscardHandler))
	b = newBodyReader(io.MultiReader(strings.NewReader("ab"), iotest.ErrReader(errors.New("malformed chunk"))), nopDeadliner{}, -1)
	out, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	out.Header.SetHost("up")
	out.Header.SetRequestURI("/")
	out.Header.SetMethod("POST")
	if _, _, err := h.roundTrip(&h.targets[0], &out.Header, resp, b, -1, 0, nil); err != b.failure() {
		t.Errorf("roundTrip with a broken body = %v, want the body's error", err)
	}
}

// newHostileListener returns the address of a listener that reads whatever
// comes and never answers.
func newHostileListener(t *testing.T) string {
	return testkit.ServeConns(t, func(c net.Conn) { io.Copy(io.Discard, c) })
}
