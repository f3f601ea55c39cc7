package gateway

import (
	"bufio"
	"net"
	"net/url"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
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
	r := &publicRequest{ctx: &ctx}
	if err := r.parseTarget(req.Header.Host(), req.Header.RequestURI(), ctx.RemoteAddr()); err != nil {
		b.Fatal(err)
	}
	var out fasthttp.RequestHeader
	b.ReportAllocs()
	for b.Loop() {
		req.Header.CopyTo(&out)
		h.outbound(&ctx, r, &out, "")
	}
}
