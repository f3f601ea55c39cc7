package fastengine

import (
	"bufio"
	"net"
	"net/url"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/sluice-gw/sluice/gateway/config"
	"github.com/sluice-gw/sluice/gateway/core"
)

// BenchmarkOutbound measures rewriting a typical client request (no
// hop-by-hop headers but keep-alive) into the upstream request, in place;
// each round first restores the client's headers with a copy, as the
// upgrade path does.
func BenchmarkOutbound(b *testing.B) {
	target, _ := url.Parse("http://127.0.0.1:9/base")
	h := newProxyHandler(proxyConfig{route: "r", target: target}, newUpstreams(), nil, nil)
	var req fasthttp.Request
	raw := "GET /api/items?page=2 HTTP/1.1\r\nHost: gw.test\r\nUser-Agent: bench\r\nAccept: */*\r\nX-User-Id: user-1\r\n\r\n"
	if err := req.Read(bufio.NewReader(strings.NewReader(raw))); err != nil {
		b.Fatal(err)
	}
	var ctx fasthttp.RequestCtx
	ctx.Init(&req, &net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 1234}, nil)
	x := &exchange{ctx: &ctx}
	x.Req.Reset(x, core.MethodString(req.Header.Method()), req.Header.Host(), req.Header.RequestURI(), peerOf(ctx.RemoteAddr()))
	// The core parses the request's target as it decides it: a table whose
	// one route forwards the request parses it once, outside the loop.
	table, err := core.New(&config.Config{Routes: []config.Route{{ID: "r", Match: config.Match{Path: "/api/**"}, Upstream: target.String()}}}, core.Options{})
	if err != nil {
		b.Fatal(err)
	}
	if out := table.Decide(&x.Exchange); !out.Forward || x.Req.EscapedPath() != "/api/items" || x.Req.RawQuery() != "page=2" {
		b.Fatalf("decided %+v, path %q, query %q; want the request forwarded, its target parsed", out, x.Req.EscapedPath(), x.Req.RawQuery())
	}
	var out fasthttp.RequestHeader
	b.ReportAllocs()
	for b.Loop() {
		req.Header.CopyTo(&out)
		h.outbound(&ctx, x, &out, "", &h.targets[0])
	}
}
