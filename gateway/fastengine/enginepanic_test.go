package fastengine

import (
	"log/slog"
	"net/http"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	"github.com/sluice-gw/sluice/gateway/config"
	"github.com/sluice-gw/sluice/gateway/core"
	"github.com/sluice-gw/sluice/gateway/metrics"
)

// TestPanicInEngineHandler: a panic that the gateway's handler leaves
// unrecovered is recovered by the public server's own handler: answered
// 500 and counted; the server keeps serving.
func TestPanicInEngineHandler(t *testing.T) {
	reg := metrics.NewRegistry()
	m, err := metrics.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	addr := serveEngine(t, func(ctx *fasthttp.RequestCtx) {
		if len(ctx.Request.Header.Peek("X-Test-Panic")) > 0 {
			panic("test panic past the gateway's handler")
		}
		ctx.SetBodyString("ok")
	}, nil, config.Server{}, ServerOptions{Log: log, Metrics: m, Panics: core.NewPanics(m, log, nil)})
	get := func(panicking bool) *http.Response {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), "GET", "http://"+addr+"/", nil)
		if err != nil {
			t.Fatal(err)
		}
		if panicking {
			req.Header.Set("X-Test-Panic", "any")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	if resp := get(true); resp.StatusCode != http.StatusInternalServerError || resp.Header.Get("Content-Type") != "application/problem+json" {
		t.Errorf("a panicking request = %d %q, want 500 application/problem+json", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if resp := get(false); resp.StatusCode != http.StatusOK {
		t.Errorf("after the panic: %d, want 200", resp.StatusCode)
	}
	if got := panicCount(t, reg, "gateway"); got != 1 {
		t.Errorf(`sluice_panics_total{door="gateway"} = %v, want 1`, got)
	}
}

// panicCount reads sluice_panics_total{door} off reg, -1 when absent.
func panicCount(t *testing.T, reg *prometheus.Registry, door string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "sluice_panics_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "door" && l.GetValue() == door {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return -1
}
