package gateway

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/sluice-gw/sluice/gateway/internal/tracing"
)

// tracedGateway serves route "api" (/up, proxied to a recording upstream,
// limit "three" on one constant key) with a tracer on an in-memory
// exporter at sample ratio sample.
func tracedGateway(t *testing.T, sample float64) (string, *tracetest.InMemoryExporter, func() string) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tr, err := tracing.New(tracing.Options{Exporter: exp, Sample: sample, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Shutdown(context.Background()) })
	up, last := recordingUpstream(t)
	rt := upstreamRoute("api", "/up", up.URL)
	rt.Limits = limitedRoute("", "", "").Limits
	g, err := New(testConfig(rt), Deps{Tracer: tr})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	_, base, _ := startServerURLs(t, g)
	upstreamTraceparent := func() string {
		if s := last.Load(); s != nil {
			return s.Header.Get("Traceparent")
		}
		return ""
	}
	return base, exp, upstreamTraceparent
}

// attrs returns a span's attributes by key.
func attrs(s tracetest.SpanStub) map[string]attribute.Value {
	m := map[string]attribute.Value{}
	for _, kv := range s.Attributes {
		m[string(kv.Key)] = kv.Value
	}
	return m
}

// TestTracingSpans checks the tracing: each request's span
// carries the route, each limit's decision and remaining count and the
// store; the upstream gets a traceparent in the span's trace whose parent is
// the span; an incoming traceparent is continued.
func TestTracingSpans(t *testing.T) {
	base, exp, upstream := tracedGateway(t, 1)
	const incoming = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	for i, c := range []struct {
		header    []string
		status    int
		result    string
		remaining int64
		decision  string
	}{
		{nil, 200, "allowed", 2, "admitted"},
		{[]string{"Traceparent", incoming}, 200, "allowed", 1, "admitted"},
		{nil, 200, "allowed", 0, "admitted"},
		{nil, 429, "denied", 0, "limited"},
	} {
		exp.Reset()
		if code, _, _ := get(t, base+"/up", c.header...); code != c.status {
			t.Fatalf("request %d: %d, want %d", i+1, code, c.status)
		}
		spans := exp.GetSpans()
		if len(spans) != 1 {
			t.Fatalf("request %d: %d spans, want 1", i+1, len(spans))
		}
		s := spans[0]
		a := attrs(s)
		if s.Name != "GET /up" || s.SpanKind.String() != "server" {
			t.Errorf("request %d: span %q (%v), want server span \"GET /up\"", i+1, s.Name, s.SpanKind)
		}
		got := map[string]any{
			"sluice.route": a["sluice.route"].AsString(), "http.route": a["http.route"].AsString(),
			"sluice.store": a["sluice.store"].AsString(), "sluice.decision": a["sluice.decision"].AsString(),
			"sluice.limit.policies": a["sluice.limit.policies"].AsStringSlice(), "sluice.limit.results": a["sluice.limit.results"].AsStringSlice(),
			"sluice.limit.remaining": a["sluice.limit.remaining"].AsInt64Slice(), "http.response.status_code": a["http.response.status_code"].AsInt64(),
		}
		want := map[string]any{
			"sluice.route": "api", "http.route": "/up", "sluice.store": "memory", "sluice.decision": c.decision,
			"sluice.limit.policies": []string{"three"}, "sluice.limit.results": []string{c.result},
			"sluice.limit.remaining": []int64{c.remaining}, "http.response.status_code": int64(c.status),
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("request %d: span attributes (-want +got):\n%s", i+1, d)
		}
		if c.header != nil {
			if s.SpanContext.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" || s.Parent.SpanID().String() != "00f067aa0ba902b7" {
				t.Errorf("request %d: span in trace %s under %s, want the incoming trace and parent", i+1, s.SpanContext.TraceID(), s.Parent.SpanID())
			}
		} else if s.Parent.IsValid() {
			t.Errorf("request %d without a traceparent: span has parent %s", i+1, s.Parent.SpanID())
		}
		if c.status != 200 {
			continue
		}
		want0 := "00-" + s.SpanContext.TraceID().String() + "-" + s.SpanContext.SpanID().String() + "-01"
		if got := upstream(); got != want0 {
			t.Errorf("request %d: upstream saw traceparent %q, want %q (the span's trace, the span as parent)", i+1, got, want0)
		}
	}
}

// TestTracingSampleZero: at sample 0 a request without a traceparent
// records no span, and the upstream is told the trace is not sampled.
func TestTracingSampleZero(t *testing.T) {
	base, exp, upstream := tracedGateway(t, 0)
	if code, _, _ := get(t, base+"/up"); code != 200 {
		t.Fatalf("request: %d", code)
	}
	if spans := exp.GetSpans(); len(spans) != 0 {
		t.Errorf("sample 0: %d spans recorded, want none", len(spans))
	}
	if tp := upstream(); !strings.HasSuffix(tp, "-00") {
		t.Errorf("sample 0: upstream saw traceparent %q, want one with the sampled flag off", tp)
	}
}

// TestTracingOff: without tracing an incoming traceparent reaches the
// upstream untouched and nothing else is added.
func TestTracingOff(t *testing.T) {
	up, last := recordingUpstream(t)
	g := newTestGateway(t, testConfig(upstreamRoute("api", "/up", up.URL)))
	_, base, _ := startServerURLs(t, g)
	const incoming = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	get(t, base+"/up", "Traceparent", incoming)
	if got := last.Load().Header.Get("Traceparent"); got != incoming {
		t.Errorf("tracing off: upstream saw traceparent %q, want the client's %q", got, incoming)
	}
	get(t, base+"/up")
	if got := last.Load().Header.Get("Traceparent"); got != "" {
		t.Errorf("tracing off: upstream saw traceparent %q, want none", got)
	}
}
