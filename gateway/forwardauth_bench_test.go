package gateway

import (
	"bufio"
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/sluice-gw/sluice/gateway/config"
	"github.com/sluice-gw/sluice/httplimit"
	"github.com/sluice-gw/sluice/ratelimit"
)

// BenchmarkForwardAuth measures one decision per request past the
// engine's parsing, as BenchmarkServePublic does: the gateway's own limit
// step on a respond route ("respond+limit", the reference), and the same
// limit on a forward_auth route reading the original request from
// X-Forwarded-* headers ("x-forwarded") or from the auth request itself
// ("request", Envoy's ext_authz HTTP). Users rotate over 1024 keys; the
// limit admits everything, so every request is one store decision.
func BenchmarkForwardAuth(b *testing.B) {
	perUser := []config.Limit{{Policy: "big", Key: httplimit.Key{{Source: httplimit.SourceHeader, Name: "X-User-Id"}}}}
	envoy := config.Route{ID: "r", Match: config.Match{Path: "/_sluice/**"}, StripPrefix: 1,
		ForwardAuth: &config.ForwardAuth{From: config.FromRequest}}
	for _, c := range []struct {
		name  string
		route config.Route
		// line is the request line and headers before X-User-Id.
		line string
	}{
		{"respond+limit", config.Route{ID: "r", Match: config.Match{Path: "/api/**"}, Respond: &config.Respond{Status: 200}},
			"GET /api/items?page=2 HTTP/1.1\r\nHost: gw.test\r\nUser-Agent: bench\r\n"},
		{"x-forwarded", config.Route{ID: "r", Match: config.Match{Path: "/auth"}, ForwardAuth: &config.ForwardAuth{From: config.FromXForwarded}},
			"GET /auth HTTP/1.1\r\nHost: sluice.test\r\nUser-Agent: bench\r\nX-Forwarded-Method: GET\r\n" +
				"X-Forwarded-Uri: /api/items?page=2\r\nX-Forwarded-Host: gw.test\r\nX-Forwarded-Proto: http\r\nX-Forwarded-For: 198.51.100.7\r\n"},
		{"request", envoy, "GET /_sluice/api/items?page=2 HTTP/1.1\r\nHost: gw.test\r\nUser-Agent: bench\r\n"},
	} {
		b.Run(c.name, func(b *testing.B) {
			rc := c.route
			rc.Limits = perUser
			cfg := testConfig(rc)
			cfg.Policies["big"] = config.PolicySpec{Algorithm: ratelimit.TokenBucket, Capacity: 1 << 40, Rate: 1e6}
			g, err := New(cfg, Deps{})
			if err != nil {
				b.Fatal(err)
			}
			defer g.Close()
			reqs := make([]fasthttp.Request, 1024)
			for i := range reqs {
				raw := c.line + "X-User-Id: user-" + strconv.Itoa(i) + "\r\n\r\n"
				if err := reqs[i].Read(bufio.NewReader(strings.NewReader(raw))); err != nil {
					b.Fatal(err)
				}
			}
			addr := &net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 1234}
			var ctx fasthttp.RequestCtx
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				ctx.Init(&reqs[i%len(reqs)], addr, nil)
				g.engine.Serve(&ctx)
				if ctx.Response.StatusCode() != 200 || len(ctx.Response.Header.Peek("X-Ratelimit-Remaining")) == 0 {
					b.Fatalf("status %d: %s", ctx.Response.StatusCode(), ctx.Response.Body())
				}
				ctx.Response.Reset()
			}
		})
	}
}
