package config

import (
	"math"
	"strconv"
)

// AccessLog configures the access log: one structured record (log/slog, on
// the process log) per sampled request on the public listener, with the
// route, the hashed key, the decision, the status, the latency and what
// decided (the store, or the on_error mode while it was down).
type AccessLog struct {
	// Sample is the fraction of requests logged, from 0 to 1. Default 0: the
	// access log is off. 1 logs every request; 0.01 about one in a hundred,
	// chosen at random.
	Sample float64 `yaml:"sample"`
	// RawKeys logs rate-limit key values as they are. Default false: each
	// key is logged as a 16-hex-digit SHA-256 hash, which tells keys apart
	// without holding them (but a guessable key, such as an IP address, can
	// be found by trying every value).
	RawKeys bool `yaml:"raw_keys"`
}

// accessLog checks server.access_log.
func (v *validator) accessLog(a *AccessLog) {
	if math.IsNaN(a.Sample) || a.Sample < 0 || a.Sample > 1 {
		v.errf("server.access_log.sample", "must be from 0 (off) to 1 (every request), got %s", strconv.FormatFloat(a.Sample, 'g', -1, 64))
	}
}

// accessLogFlow renders a for Effective.
func accessLogFlow(a AccessLog) string {
	return "{sample: " + strconv.FormatFloat(a.Sample, 'g', -1, 64) + ", raw_keys: " + strconv.FormatBool(a.RawKeys) + "}"
}
