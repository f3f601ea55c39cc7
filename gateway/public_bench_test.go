package gateway

import (
	"bufio"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/sluice-gw/sluice/gateway/config"
	"github.com/sluice-gw/sluice/httplimit"
	"github.com/sluice-gw/sluice/internal/testkit"
	"github.com/sluice-gw/sluice/ratelimit"
)

// BenchmarkServePublic measures the public handler per request, past the
// engine's parsing: a fixed answer and a proxied request to a loopback
// upstream, each without limits and with a per-user limit that admits
// everything (users rotate over 1024 keys), and with that limit and a
// global one, as the gateway benchmarks against nginx carry.
func BenchmarkServePublic(b *testing.B) {
	up := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) { ctx.SetBodyString("ok") }}
	upAddr := testkit.Serve(b, up.Serve)
	defer up.Shutdown()
	perUser := []config.Limit{{Policy: "big", Key: httplimit.Key{{Source: httplimit.SourceHeader, Name: "X-User-Id"}}}}
	perUserGlobal := append(perUser[:1:1], config.Limit{Policy: "global", Key: httplimit.Key{{Source: httplimit.SourceConst, Name: "global"}}})
	respond := &config.Respond{Status: 200, Body: "ok"}
	for _, c := range []struct {
		name   string
		route  config.Route
		limits []config.Limit
	}{
		{"respond", config.Route{ID: "r", Match: config.Match{Path: "/api/**"}, Respond: respond}, nil},
		{"respond+limit", config.Route{ID: "r", Match: config.Match{Path: "/api/**"}, Respond: respond}, perUser},
		{"respond+2limits", config.Route{ID: "r", Match: config.Match{Path: "/api/**"}, Respond: respond}, perUserGlobal},
		{"proxy", upstreamRoute("r", "/api/**", "http://"+upAddr), nil},
		{"proxy+limit", upstreamRoute("r", "/api/**", "http://"+upAddr), perUser},
	} {
		b.Run(c.name, func(b *testing.B) {
			rc := c.route
			rc.Limits = c.limits
			cfg := testConfig(rc)
			cfg.Policies["big"] = config.PolicySpec{Algorithm: ratelimit.TokenBucket, Capacity: 1 << 40, Rate: 1e6}
			cfg.Policies["global"] = config.PolicySpec{Algorithm: ratelimit.FixedWindow, Limit: 1 << 50, Window: time.Hour}
			g, err := New(cfg, Deps{})
			if err != nil {
				b.Fatal(err)
			}
			defer g.Close()
			reqs := make([]fasthttp.Request, 1024)
			for i := range reqs {
				raw := "GET /api/items?page=2 HTTP/1.1\r\nHost: gw.test\r\nUser-Agent: bench\r\nX-User-Id: user-" + strconv.Itoa(i) + "\r\n\r\n"
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
				if ctx.Response.StatusCode() != 200 {
					b.Fatalf("status %d: %s", ctx.Response.StatusCode(), ctx.Response.Body())
				}
				ctx.Response.Body() // reads a streamed body to its end
				ctx.Response.Reset()
			}
		})
	}
}
