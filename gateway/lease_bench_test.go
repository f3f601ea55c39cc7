package gateway

import (
	"bufio"
	"net"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/sluice-gw/sluice/gateway/config"
	"github.com/sluice-gw/sluice/httplimit"
	"github.com/sluice-gw/sluice/internal/redistest"
	"github.com/sluice-gw/sluice/ratelimit"
)

// BenchmarkLeaseRoundTrip measures what a concurrency limit adds to a
// request: a fixed-answer route with a per-user rate limit, without and
// with a per-user concurrency limit (take the lease with the rate limit,
// release it when the response ends), on the memory store and on a local
// Redis. Requests run in parallel over 1024 users. Besides ns/op it
// reports cpu-ns/op, the process' CPU time (user and system) per request,
// and on Redis redis-cpu-ns/op, the Redis server's.
func BenchmarkLeaseRoundTrip(b *testing.B) {
	rate := config.Limit{Policy: "big", Key: httplimit.Key{{Source: httplimit.SourceHeader, Name: "X-User-Id"}}}
	inflight := config.Limit{Policy: "inflight", Key: httplimit.Key{{Source: httplimit.SourceHeader, Name: "X-User-Id"}}}
	srv := redistest.NewServer(b, redistest.ServerOptions{})
	for _, store := range []string{"memory", "redis"} {
		for _, c := range []struct {
			name   string
			limits []config.Limit
		}{{"rate", []config.Limit{rate}}, {"rate+concurrency", []config.Limit{rate, inflight}}} {
			b.Run(store+"/"+c.name, func(b *testing.B) {
				rc := config.Route{ID: "r", Match: config.Match{Path: "/api/**"}, Respond: &config.Respond{Status: 200, Body: "ok"}, Limits: c.limits}
				cfg := testConfig(rc)
				cfg.Policies["big"] = config.PolicySpec{Algorithm: ratelimit.TokenBucket, Capacity: 1 << 40, Rate: 1e6}
				cfg.Policies["inflight"] = config.PolicySpec{Algorithm: ratelimit.Concurrency, Limit: 1 << 20, LeaseTTL: 30 * time.Second}
				var redisCPU func() time.Duration
				if store == "redis" {
					cfg.Store.Type, cfg.Store.Timeout = config.StoreRedis, time.Second
					cfg.Store.Redis = config.Redis{Mode: config.RedisStandalone, Addrs: []string{srv.Addr()}}
					redisCPU = func() time.Duration { return redisServerCPU(b, srv.Addr()) }
				}
				g, err := New(cfg, Deps{})
				if err != nil {
					b.Fatal(err)
				}
				defer g.Close()
				reqs := make([]fasthttp.Request, 1024)
				for i := range reqs {
					raw := "GET /api/items HTTP/1.1\r\nHost: gw.test\r\nX-User-Id: user-" + strconv.Itoa(i) + "\r\n\r\n"
					if err := reqs[i].Read(bufio.NewReader(strings.NewReader(raw))); err != nil {
						b.Fatal(err)
					}
				}
				addr := &net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 1234}
				var r0 time.Duration
				if redisCPU != nil {
					r0 = redisCPU()
				}
				c0 := processCPU()
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					var ctx fasthttp.RequestCtx
					i := 0
					for pb.Next() {
						i++
						ctx.Init(&reqs[i%len(reqs)], addr, nil)
						g.engine.Serve(&ctx)
						if ctx.Response.StatusCode() != 200 {
							b.Errorf("status %d: %s", ctx.Response.StatusCode(), ctx.Response.Body())
							return
						}
						ctx.Response.Reset()
					}
				})
				b.StopTimer()
				b.ReportMetric(float64(processCPU()-c0)/float64(b.N), "cpu-ns/op")
				if redisCPU != nil {
					b.ReportMetric(float64(redisCPU()-r0)/float64(b.N), "redis-cpu-ns/op")
				}
			})
		}
	}
}

// processCPU returns the CPU time (user and system) this process used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// redisServerCPU returns the CPU time the Redis server at addr used
// (INFO cpu: used_cpu_user + used_cpu_sys).
func redisServerCPU(b *testing.B, addr string) time.Duration {
	c, err := redistest.Dial(b.Context(), addr, "")
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	v, err := c.Do("INFO", "cpu")
	if err != nil {
		b.Fatal(err)
	}
	var info string
	switch x := v.(type) {
	case string:
		info = x
	case []byte:
		info = string(x)
	}
	var total float64
	for _, line := range strings.Split(info, "\n") {
		for _, k := range []string{"used_cpu_user:", "used_cpu_sys:"} {
			if s, ok := strings.CutPrefix(strings.TrimSpace(line), k); ok {
				f, _ := strconv.ParseFloat(s, 64)
				total += f
			}
		}
	}
	return time.Duration(total * float64(time.Second))
}
