package config

import (
	"math"
	"net/url"
	"strconv"
	"time"
)

// Log formats and levels (log.format, log.level).
const (
	LogText  = "text"
	LogJSON  = "json"
	LogDebug = "debug"
	LogInfo  = "info"
	LogWarn  = "warn"
	LogError = "error"
)

// Log configures the process log: what sluice writes to standard error
// (startup, reloads, store failures, warnings) and the access log
// (server.access_log), which goes to the same place in the same format.
// docs/operations.md, "Logs", shows both formats.
type Log struct {
	// Format is "text" (the default: logfmt-style key=value lines, as
	// Go's log/slog writes them) or "json" (one JSON object per line, with
	// the keys "time", "level" and "msg" and one key per attribute), for log
	// collectors. Changing it takes effect at the next start, not on reload.
	Format string `yaml:"format"`
	// Level is the least severe message written: "debug", "info" (the
	// default), "warn" or "error". It filters the process log only: the
	// access log's records are written whatever the level, and
	// server.access_log.sample alone turns them on or off. A reload applies
	// a new level at once.
	Level string `yaml:"level"`
}

// Tracing configures OpenTelemetry tracing of the public listener's
// requests (docs/operations.md, "Tracing"). It is off unless OTLPEndpoint is
// set. Each traced request gets one server span carrying the route, the
// decision of each limit and what decided it, and the span's W3C
// traceparent header is sent upstream; a request that arrives with a
// traceparent continues that trace.
type Tracing struct {
	// OTLPEndpoint is the URL of an OpenTelemetry collector's OTLP/HTTP
	// receiver, such as "http://otel-collector:4318" (spans are posted to
	// its /v1/traces unless the URL has a path of its own) or an https://
	// URL. Default empty: tracing is off and costs nothing. The standard
	// OTEL_EXPORTER_OTLP_* environment variables (headers, certificates,
	// compression) apply as the OpenTelemetry SDK defines them; this
	// setting wins over OTEL_EXPORTER_OTLP_ENDPOINT.
	OTLPEndpoint string `yaml:"otlp_endpoint"`
	// Sample is the fraction of traces recorded, from 0 to 1, chosen by
	// trace id. Default 1: every request. A request whose incoming
	// traceparent says its trace is sampled (or not) follows that decision
	// instead, so one trace is never half recorded.
	Sample *float64 `yaml:"sample"`
}

// On reports whether tracing is enabled.
func (t Tracing) On() bool { return t.OTLPEndpoint != "" }

// SampleRatio returns Sample, or its default 1 when unset.
func (t Tracing) SampleRatio() float64 {
	if t.Sample == nil {
		return 1
	}
	return *t.Sample
}

// Reload configures how a running gateway picks up a changed file besides
// SIGHUP and POST /admin/v1/reload (docs/operations.md, "Reloading the
// configuration").
type Reload struct {
	// Watch reloads the configuration when its file changes. Default false.
	// sluice watches the file's directory (and, when the file is a symlink,
	// the directory it resolves to), so the atomic swap of a Kubernetes
	// ConfigMap volume (its "..data" symlink is replaced) is seen; changes
	// are debounced for half a second, and an event that leaves the file's
	// content as it was reloads nothing. Changing watch takes effect at the
	// next start. The envoyproxy/ratelimit files of rls.envoy_config are
	// watched too.
	Watch bool `yaml:"watch"`
	// Settle is how long a changed file's size and modification time must
	// stay the same before the watch reads it, so that a file written in
	// several steps is not read half-written. A writer that pauses longer
	// than Settle mid-file can still be read half-written: write the file
	// atomically (to a temporary name, then rename). Default 2s.
	Settle time.Duration `yaml:"settle"`
}

// observe checks log and tracing.
func (v *validator) observe(c *Config) {
	switch c.Log.Format {
	case LogText, LogJSON:
	default:
		v.errf("log.format", "unknown format %q (allowed: text, json)", c.Log.Format)
	}
	switch c.Log.Level {
	case LogDebug, LogInfo, LogWarn, LogError:
	default:
		v.errf("log.level", "unknown level %q (allowed: debug, info, warn, error)", c.Log.Level)
	}
	if e := c.Tracing.OTLPEndpoint; e != "" {
		u, err := url.Parse(e)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			v.errf("tracing.otlp_endpoint", "must be an http:// or https:// URL such as \"http://otel-collector:4318\", got %q", e)
		}
	}
	if c.Reload.Settle < 0 {
		v.errf("reload.settle", "must be a positive duration, got %v", c.Reload.Settle)
	}
	if s := c.Tracing.Sample; s != nil && (math.IsNaN(*s) || *s < 0 || *s > 1) {
		v.errf("tracing.sample", "must be from 0 (none) to 1 (every trace), got %s", strconv.FormatFloat(*s, 'g', -1, 64))
	}
}

// observeDefaults applies the defaults of log and tracing.
func observeDefaults(c *Config) {
	setDefault(&c.Log.Format, LogText)
	setDefault(&c.Log.Level, LogInfo)
	if c.Tracing.Sample == nil {
		c.Tracing.Sample = new(1.0)
	}
	setDefault(&c.Reload.Settle, DefaultReloadSettle)
}

// observeEffective renders log, tracing and reload for Effective.
func (w *yamlWriter) observe(c *Config) {
	w.line(0, "log:")
	w.kv(1, "format", quote(c.Log.Format))
	w.kv(1, "level", quote(c.Log.Level))
	w.line(0, "tracing:")
	w.kv(1, "otlp_endpoint", quote(RedactAddress(c.Tracing.OTLPEndpoint)))
	w.kv(1, "sample", strconv.FormatFloat(c.Tracing.SampleRatio(), 'g', -1, 64))
	w.line(0, "reload:")
	w.kv(1, "watch", strconv.FormatBool(c.Reload.Watch))
	w.kv(1, "settle", c.Reload.Settle.String())
}
