package core

import (
	"strconv"
	"strings"
	"testing"

	"github.com/sluice-gw/sluice/gateway/config"
)

func TestIsGRPC(t *testing.T) {
	for ct, want := range map[string]bool{
		"application/grpc":               true,
		"application/grpc+proto":         true,
		"application/grpc+json":          true,
		"Application/GRPC":               true,
		"application/grpc;charset=utf-8": true,
		"application/grpc-web":           false,
		"application/grpc-web+proto":     false,
		"application/grpc-web-text":      false,
		"application/grpcx":              false,
		"application/json":               false,
		"":                               false,
	} {
		if got := IsGRPC(ct); got != want {
			t.Errorf("IsGRPC(%q) = %v, want %v", ct, got, want)
		}
		if got := IsGRPC([]byte(ct)); got != want {
			t.Errorf("IsGRPC([]byte(%q)) = %v, want %v", ct, got, want)
		}
	}
}

func TestGRPCStatus(t *testing.T) {
	for _, tt := range []struct {
		status int
		code   int
		name   string
	}{
		{429, 8, "RESOURCE_EXHAUSTED"},
		{403, 7, "PERMISSION_DENIED"},
		{401, 16, "UNAUTHENTICATED"},
		{404, 12, "UNIMPLEMENTED"},
		{502, 14, "UNAVAILABLE"},
		{503, 14, "UNAVAILABLE"},
		{504, 4, "DEADLINE_EXCEEDED"},
		{408, 4, "DEADLINE_EXCEEDED"},
		{400, 13, "INTERNAL"},
		{431, 13, "INTERNAL"},
		{500, 13, "INTERNAL"},
		{200, 2, "UNKNOWN"},
		{308, 2, "UNKNOWN"},
		{505, 2, "UNKNOWN"},
	} {
		t.Run(strconv.Itoa(tt.status), func(t *testing.T) {
			code, name := GRPCStatus(tt.status)
			if code != tt.code || name != tt.name {
				t.Errorf("GRPCStatus(%d) = %d %s, want %d %s", tt.status, code, name, tt.code, tt.name)
			}
		})
	}
}

// TestDecideHTTP2Upstream: a request an engine cannot forward to its
// route's HTTP/2-only upstream (no SetHTTP2Upstreams) is answered 505
// before the limits run, so it consumes nothing; one it can is forwarded.
func TestDecideHTTP2Upstream(t *testing.T) {
	for _, up := range []string{"h2c://127.0.0.1:1", "h2://127.0.0.1:1"} {
		cfg := decideConfig(proxyRoute("grpc", config.Match{Path: "/**"}, up, limitOn(t, "three", "ip")))
		cfg.Server.HTTP2.H2C = true
		tab := newDecideTable(t, cfg)
		for range 5 {
			out := decide(tab, req{target: "/pkg.Svc/Call"})
			if out.Status != 505 || out.Forward || routeID(out) != "grpc" || out.Result != nil {
				t.Fatalf("%s over HTTP/1.1: %+v", up, out)
			}
			if d := detail(t, out); !strings.Contains(d, "HTTP/2") || !strings.Contains(d, "HTTPS") {
				t.Errorf("detail %q", d)
			}
		}
		h2 := func(x *Exchange) { x.Req.SetHTTP2Upstreams() }
		for i := range 4 {
			out := decideWith(tab, req{target: "/pkg.Svc/Call"}, h2)
			out.Lease.Release()
			if want := i < 3; out.Forward != want {
				t.Errorf("%s over HTTP/2, request %d: forward %v, want %v (status %d)", up, i, out.Forward, want, out.Status)
			}
		}
	}
}
