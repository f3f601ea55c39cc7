package core

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sluice-gw/sluice/gateway/admin"
	"github.com/sluice-gw/sluice/gateway/config"
	"github.com/sluice-gw/sluice/httplimit"
)

// accessEntry collects what one logged request's record needs; it travels
// in the request's context so that the middleware's Observe hook and the
// route's fallback hook (Gateway.fellBack) can fill it in.
type accessEntry struct {
	start    time.Time
	outcome  httplimit.Outcome
	policies []string
	keys     []string // raw or hashed, one per evaluated limit
	source   string   // "store", or the on_error mode that decided
}

type accessKey struct{}

func accessEntryOf(ctx context.Context) *accessEntry {
	e, _ := ctx.Value(accessKey{}).(*accessEntry)
	return e
}

// Begin starts the bookkeeping of r once the engine has Reset it: its
// access log entry when it is sampled (server.access_log.sample).
func (t *Table) Begin(r *Request) {
	if sampled(&t.cfg.Server.AccessLog) {
		r.entry = newAccessEntry()
	}
}

// Tracing reports whether requests are traced (StartSpan).
func (t *Table) Tracing() bool { return t.tracer != nil }

// StartSpan starts r's trace span at now, continuing the trace of its
// traceparent; path is the request's path as the engine reads it.
func (t *Table) StartSpan(r *Request, path string, now time.Time) {
	r.span = t.tracer.Start(r.method, path, func(name string) string {
		return string(r.wire.Peek(name))
	}, now)
	r.span.Store(t.cfg.Store.Type, "")
}

// Finish records r, answered with status (the one SetStatus recorded
// takes its place) by route (its id, "" for none): the request count, the
// span's end and the access log record.
func (t *Table) Finish(r *Request, route string, status int) {
	if r.status != 0 {
		status = r.status
	}
	t.metrics.Request(route, status)
	if r.span.On() {
		r.span.End(status)
	}
	if r.entry != nil {
		t.logAccess(r.Context(), r.method, r.entry, route, status)
	}
}

// sampled reports whether this request is logged (server.access_log.sample).
func sampled(a *config.AccessLog) bool {
	return a.Sample >= 1 || a.Sample > 0 && rand.Float64() < a.Sample
}

// newAccessEntry returns the entry of a sampled request, started now. The
// request's context carries it under accessKey{}.
func newAccessEntry() *accessEntry {
	return &accessEntry{start: time.Now()}
}

// observeAccess records the middleware's event in the request's entry.
func (t *Table) observeAccess(ctx context.Context, ev *httplimit.Event) {
	e := accessEntryOf(ctx)
	if e == nil {
		return
	}
	e.outcome = ev.Outcome
	if e.source == "" && (ev.Outcome == httplimit.OutcomeAdmitted || ev.Outcome == httplimit.OutcomeLimited) && len(ev.Verdicts) > 0 {
		e.source = "store"
	}
	for i := range ev.Verdicts {
		v := &ev.Verdicts[i]
		e.policies = append(e.policies, v.Policy.Name())
		switch {
		case v.Anonymous:
			e.keys = append(e.keys, "anonymous")
		case t.cfg.Server.AccessLog.RawKeys:
			e.keys = append(e.keys, clipLogField(strings.Join(v.Key, ",")))
		default:
			e.keys = append(e.keys, HashKey(v.Key))
		}
	}
}

// noteFallback marks the request's entry as decided without the store.
func noteFallback(ctx context.Context, mode string) {
	if e := accessEntryOf(ctx); e != nil {
		e.source = mode
	}
}

// HashKey returns the log form of a key unless server.access_log.raw_keys:
// 16 hex digits of the SHA-256 of its length-prefixed parts, which tell keys
// apart without holding them.
func HashKey(parts []string) string {
	sum := sha256.Sum256(admin.AppendField(nil, "", parts))
	return hex.EncodeToString(sum[:8])
}

// MaxLogField bounds each client-controlled field of an access record (the
// method, a raw key): a longer value is cut to this many bytes and marked.
const MaxLogField = 256

// clipLogField returns s, or its first MaxLogField bytes (cut back to a
// UTF-8 boundary) followed by "…[truncated, N bytes]" where N is len(s).
func clipLogField(s string) string {
	if len(s) <= MaxLogField {
		return s
	}
	cut := MaxLogField
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…[truncated, " + strconv.Itoa(len(s)) + " bytes]"
}

// logAccess writes the record of one request.
func (t *Table) logAccess(ctx context.Context, method string, e *accessEntry, route string, status int) {
	attrs := []slog.Attr{
		slog.String("method", clipLogField(method)),
		slog.String("route", route),
		slog.Int("status", status),
		slog.Float64("latency_ms", float64(time.Since(e.start).Microseconds())/1000),
	}
	if e.outcome != "" {
		attrs = append(attrs, slog.String("decision", string(e.outcome)))
	}
	if len(e.keys) > 0 {
		attrs = append(attrs, slog.Any("policies", e.policies), slog.Any("keys", e.keys))
	}
	if e.source != "" {
		attrs = append(attrs, slog.String("store", e.source))
	}
	t.accessLog.LogAttrs(ctx, slog.LevelInfo, "access", attrs...)
}
