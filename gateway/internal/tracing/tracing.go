// Package tracing traces the gateway's public requests with OpenTelemetry
// (docs/operations.md, "Tracing"): one server span per request, exported
// over OTLP/HTTP, with W3C Trace Context (traceparent, tracestate) read
// from the request and written on the request sent upstream. It is the one
// package that imports OpenTelemetry; the gateway sees only [Tracer] and
// [Span].
package tracing

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Options configure a Tracer.
type Options struct {
	// Endpoint is the URL of an OTLP/HTTP receiver. Spans are posted to
	// its path, or to /v1/traces when it has none. Required unless
	// Exporter is set.
	Endpoint string
	// Sample is the fraction of new traces recorded, from 0 to 1; a
	// request that carries a traceparent follows its sampled flag.
	Sample float64
	// Version is the service.version resource attribute; the service.name
	// is "sluice".
	Version string
	// Exporter, if not nil, receives each span as it ends, instead of the
	// OTLP exporter batching them (for tests: tracetest's in-memory
	// exporter).
	Exporter sdktrace.SpanExporter
}

// Tracer starts the spans of public requests. It is safe for concurrent
// use. Shutdown flushes the spans not yet exported.
type Tracer struct {
	tp     *sdktrace.TracerProvider
	tracer trace.Tracer
	prop   propagation.TraceContext
}

// New returns a Tracer. It connects to nothing: the exporter sends its
// first batch when spans end. It returns an error for an endpoint that is
// not an http:// or https:// URL.
func New(o Options) (*Tracer, error) {
	exp := o.Exporter
	var batch bool
	if exp == nil {
		u, err := url.Parse(o.Endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("tracing: endpoint %q is not an http(s) URL", o.Endpoint)
		}
		if u.Path == "" || u.Path == "/" {
			u.Path = "/v1/traces"
		}
		exp, err = otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(u.String()))
		if err != nil {
			return nil, fmt.Errorf("tracing: OTLP exporter: %w", err)
		}
		batch = true
	}
	res := resource.NewSchemaless(attribute.String("service.name", "sluice"), attribute.String("service.version", o.Version))
	opts := []sdktrace.TracerProviderOption{
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(o.Sample))),
	}
	if batch {
		opts = append(opts, sdktrace.WithBatcher(exp))
	} else {
		opts = append(opts, sdktrace.WithSyncer(exp))
	}
	tp := sdktrace.NewTracerProvider(opts...)
	return &Tracer{tp: tp, tracer: tp.Tracer("github.com/sluice-gw/sluice/gateway")}, nil
}

// Shutdown exports the spans still buffered, within ctx, and stops the
// Tracer: spans started afterwards are not recorded.
func (t *Tracer) Shutdown(ctx context.Context) error {
	if err := t.tp.Shutdown(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("tracing: shutdown: %w", err)
	}
	return nil
}

// Span is one request's server span. The zero Span is off: its methods do
// nothing and cost nothing. A Span is used by one goroutine at a time.
type Span struct {
	s trace.Span
	// limits collect each limit's verdict; End sets them as attributes.
	policies, results []string
	remaining         []int64
}

// headers is a propagation carrier over a request's header values.
type headers struct {
	get func(string) string
	set func(string, string)
}

func (h headers) Get(key string) string {
	if h.get == nil {
		return ""
	}
	return h.get(key)
}

func (h headers) Set(key, value string) {
	if h.set != nil {
		h.set(key, value)
	}
}

func (headers) Keys() []string { return []string{"traceparent", "tracestate"} }

// Start starts the span of a request that began at start, with the method
// and the URL path it asked for. header returns the request's header value
// of a name (traceparent and tracestate are read), so a request that
// carries a trace continues it.
func (t *Tracer) Start(method, path string, header func(string) string, start time.Time) Span {
	ctx := t.prop.Extract(context.Background(), headers{get: header})
	_, s := t.tracer.Start(ctx, method, trace.WithSpanKind(trace.SpanKindServer), trace.WithTimestamp(start),
		trace.WithAttributes(attribute.String("http.request.method", method), attribute.String("url.path", path)))
	return Span{s: s}
}

// On reports whether there is a span: tracing is on for this request. A
// span that is on but not sampled records nothing, but its context still
// goes upstream (Inject), so the upstream knows the trace was not sampled.
func (s *Span) On() bool { return s.s != nil }

// recording reports whether the span records attributes.
func (s *Span) recording() bool { return s.s != nil && s.s.IsRecording() }

// Route names the route that matched: its id and its match path, which
// also names the span ("GET /api/**").
func (s *Span) Route(id, pattern, method string) {
	if !s.recording() {
		return
	}
	s.s.SetName(method + " " + pattern)
	s.s.SetAttributes(attribute.String("sluice.route", id), attribute.String("http.route", pattern))
}

// Limit records one limit's verdict: the policy in force, its result
// (allowed, denied or shadow_denied) and the remaining count.
func (s *Span) Limit(policy, result string, remaining int64) {
	if !s.recording() {
		return
	}
	s.policies = append(s.policies, policy)
	s.results = append(s.results, result)
	s.remaining = append(s.remaining, remaining)
}

// Store records what decided the limits: the store type, and, when it was
// unavailable, the on_error mode that decided instead ("" when the store
// did).
func (s *Span) Store(store, fallback string) {
	if !s.recording() {
		return
	}
	s.s.SetAttributes(attribute.String("sluice.store", store))
	if fallback != "" {
		s.s.SetAttributes(attribute.String("sluice.store.fallback", fallback))
	}
}

// Decision records the request's overall outcome (admitted, limited,
// forbidden, ...).
func (s *Span) Decision(outcome string) {
	if !s.recording() {
		return
	}
	s.s.SetAttributes(attribute.String("sluice.decision", outcome))
}

// Inject writes the span's traceparent (and tracestate, if any) through
// set, for the request sent upstream.
func (s *Span) Inject(set func(name, value string)) {
	if s.s == nil {
		return
	}
	var prop propagation.TraceContext
	prop.Inject(trace.ContextWithSpan(context.Background(), s.s), headers{set: set})
}

// End ends the span with the response's status: a 5xx marks it an error.
func (s *Span) End(status int) {
	if s.s == nil {
		return
	}
	if len(s.policies) > 0 {
		s.s.SetAttributes(attribute.StringSlice("sluice.limit.policies", s.policies),
			attribute.StringSlice("sluice.limit.results", s.results),
			attribute.Int64Slice("sluice.limit.remaining", s.remaining))
	}
	s.s.SetAttributes(attribute.Int("http.response.status_code", status))
	if status >= 500 {
		s.s.SetStatus(codes.Error, "")
	}
	s.s.End()
	*s = Span{}
}
