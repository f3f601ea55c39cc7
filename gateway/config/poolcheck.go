package config

import (
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/sluice-gw/sluice/gateway/keysource"
	"github.com/sluice-gw/sluice/httplimit"
)

// Defaults of the pool section. Each is documented on its field.
const (
	DefaultPoolRetries        = 1
	DefaultPassiveFailures    = 3
	DefaultEjectFor           = 30 * time.Second
	DefaultHealthInterval     = 5 * time.Second
	DefaultHealthTimeout      = time.Second
	DefaultHealthyThreshold   = 2
	DefaultUnhealthyThreshold = 3
	// MaxPoolRetries bounds pool.retries.
	MaxPoolRetries = 5
	// MaxPoolTargets bounds a pool's targets.
	MaxPoolTargets = 64
)

// balances are pool.balance's allowed values.
var balances = []Balance{BalanceRoundRobin, BalanceLeastConn, BalanceHash}

// balanceNames lists balances for messages.
func balanceNames() string {
	names := make([]string, len(balances))
	for i, b := range balances {
		names[i] = string(b)
	}
	return strings.Join(names, ", ")
}

// RetryCount returns pool.retries, defaulted.
func (p *Pool) RetryCount() int {
	if p.Retries == nil {
		return DefaultPoolRetries
	}
	return *p.Retries
}

// FailureCount returns passive.failures, defaulted: the connection
// failures in a row that eject a target, 0 for never.
func (p *PassiveHealth) FailureCount() int {
	if p.Failures == nil {
		return DefaultPassiveFailures
	}
	return *p.Failures
}

// HashPart returns hash_key parsed as a key spec (keysource.Parse); the
// zero KeyPart and no error without a hash_key.
func (p *Pool) HashPart() (httplimit.KeyPart, error) {
	if p.HashKey == "" {
		return httplimit.KeyPart{}, nil
	}
	return keysource.Parse(p.HashKey)
}

// TargetURLs returns the route's upstream targets parsed: the pool's
// targets, in order, or its one upstream; nil for a route without either.
// A target that does not parse is nil ([Config.Validate] reports it).
func (r *Route) TargetURLs() []*url.URL {
	if r.Pool == nil {
		if u := r.UpstreamURL(); u != nil {
			return []*url.URL{u}
		}
		return nil
	}
	out := make([]*url.URL, len(r.Pool.Targets))
	for i, t := range r.Pool.Targets {
		if u, err := url.Parse(t); err == nil {
			out[i] = u
		}
	}
	return out
}

// Proxied reports whether the route forwards to an upstream: it has an
// upstream URL or a pool.
func (r *Route) Proxied() bool { return r.Upstream != "" || r.Pool != nil }

// applyPoolDefaults fills the unset fields of a route's pool.
func applyPoolDefaults(p *Pool) {
	if p == nil {
		return
	}
	setDefault(&p.Balance, BalanceRoundRobin)
	if p.Retries == nil {
		p.Retries = new(DefaultPoolRetries)
	}
	if p.Passive.Failures == nil {
		p.Passive.Failures = new(DefaultPassiveFailures)
	}
	setDefault(&p.Passive.EjectFor, DefaultEjectFor)
	if h := p.HealthCheck; h != nil {
		setDefault(&h.Interval, DefaultHealthInterval)
		setDefault(&h.Timeout, DefaultHealthTimeout)
		setDefault(&h.HealthyThreshold, DefaultHealthyThreshold)
		setDefault(&h.UnhealthyThreshold, DefaultUnhealthyThreshold)
	}
}

// poolZeros reports the pool fields of route path p the file set to a zero
// that is neither allowed nor a way to ask for the default (see
// explicitZeros).
func (v *validator) poolZeros(p string, pl *Pool, zero func(path string, isZero bool, msg string)) {
	pp := p + ".pool"
	zero(pp+".balance", pl.Balance == "", "is empty (allowed: "+balanceNames()+"; leave it out for round_robin)")
	zero(pp+".passive.eject_for", pl.Passive.EjectFor == 0, "must be a positive duration, got 0 (leave it out for the default)")
	if h := pl.HealthCheck; h != nil {
		hp := pp + ".health_check"
		zero(hp+".interval", h.Interval == 0, "must be a positive duration, got 0 (leave it out for the default)")
		zero(hp+".timeout", h.Timeout == 0, "must be a positive duration, got 0 (leave it out for the default)")
		zero(hp+".healthy_threshold", h.HealthyThreshold == 0, "must be at least 1, got 0 (leave it out for "+strconv.Itoa(DefaultHealthyThreshold)+")")
		zero(hp+".unhealthy_threshold", h.UnhealthyThreshold == 0, "must be at least 1, got 0 (leave it out for "+strconv.Itoa(DefaultUnhealthyThreshold)+")")
	}
}

// pool checks the pool section of the route at p.
func (v *validator) pool(p string, pl *Pool) {
	pp := p + ".pool"
	if len(pl.Targets) == 0 && !v.bad[pp+".targets"] {
		v.errf(pp+".targets", "at least one target is required (upstream URLs, e.g. [http://10.0.0.1:8080, http://10.0.0.2:8080])")
	}
	if len(pl.Targets) > MaxPoolTargets {
		v.errf(pp+".targets", "at most %d targets, got %d", MaxPoolTargets, len(pl.Targets))
	}
	firstScheme := ""
	seen := map[string]int{}
	for j, t := range pl.Targets {
		tp := fmt.Sprintf("%s.targets[%d]", pp, j)
		if err := checkUpstream(t); err != nil {
			v.errf(tp, "%v", err)
			continue
		}
		u, _ := url.Parse(t)
		scheme := strings.ToLower(u.Scheme)
		if firstScheme == "" {
			firstScheme = scheme
		} else if scheme != firstScheme {
			v.errf(tp, "target %q is %s:// but the pool's first target is %s://; a pool's targets are all of one scheme", RedactAddress(t), scheme, firstScheme)
		}
		k := scheme + "://" + strings.ToLower(u.Host) + u.EscapedPath()
		if first, dup := seen[k]; dup {
			v.errf(tp, "target %q is listed twice (first as targets[%d])", RedactAddress(t), first)
			continue
		}
		seen[k] = j
	}
	switch {
	case pl.Balance == "": // the default, or an explicit "" reported by poolZeros
	case !slices.Contains(balances, pl.Balance):
		v.errf(pp+".balance", "unknown balance %q (allowed: %s)", pl.Balance, balanceNames())
	}
	switch {
	case pl.Balance == BalanceHash && pl.HashKey == "":
		v.errf(pp+".hash_key", "hash_key is required with balance: hash: the request value hashed (%s), e.g. header:X-User-Id", keyForms())
	case pl.Balance != BalanceHash && pl.HashKey != "":
		v.errf(pp+".hash_key", "hash_key applies only to balance: hash, not %s", orDefault(string(pl.Balance), string(BalanceRoundRobin)))
	case pl.HashKey != "":
		if _, err := keysource.Parse(pl.HashKey); err != nil {
			v.errf(pp+".hash_key", "%v", err)
		}
	}
	if n := pl.RetryCount(); n < 0 || n > MaxPoolRetries {
		v.errf(pp+".retries", "must be from 0 (no retry) to %d, got %d", MaxPoolRetries, n)
	}
	if n := pl.Passive.FailureCount(); n < 0 {
		v.errf(pp+".passive.failures", "must be 0 (no passive ejection) or more, got %d", n)
	}
	if d := pl.Passive.EjectFor; d < 0 {
		v.errf(pp+".passive.eject_for", "must be a positive duration, got %v", d)
	}
	if h := pl.HealthCheck; h != nil {
		v.healthCheck(pp+".health_check", h)
	}
}

// healthCheck checks pool.health_check at hp.
func (v *validator) healthCheck(hp string, h *HealthCheck) {
	switch {
	case h.Path == "":
		v.errf(hp+".path", "path is required: the path probed with GET, starting with / (e.g. /healthz)")
	case !strings.HasPrefix(h.Path, "/"):
		v.errf(hp+".path", "path %q must start with /", h.Path)
	case strings.ContainsAny(h.Path, "#") || strings.ContainsFunc(h.Path, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }):
		v.errf(hp+".path", "path %q must not contain a fragment, spaces or control characters", h.Path)
	default:
		if _, err := url.ParseRequestURI(h.Path); err != nil {
			v.errf(hp+".path", "path %q is not a valid request path: %v", h.Path, unwrapURLError(err))
		}
	}
	if h.Interval < 0 {
		v.errf(hp+".interval", "must be a positive duration, got %v", h.Interval)
	}
	switch {
	case h.Timeout < 0:
		v.errf(hp+".timeout", "must be a positive duration, got %v", h.Timeout)
	case h.Interval > 0 && h.Timeout >= h.Interval:
		v.errf(hp+".timeout", "timeout %v must be below interval %v: a probe ends before the next one starts", h.Timeout, h.Interval)
	}
	if h.HealthyThreshold < 0 {
		v.errf(hp+".healthy_threshold", "must be at least 1, got %d", h.HealthyThreshold)
	}
	if h.UnhealthyThreshold < 0 {
		v.errf(hp+".unhealthy_threshold", "must be at least 1, got %d", h.UnhealthyThreshold)
	}
}

// orDefault returns s, or def when s is empty.
func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// poolEffective writes a route's pool section at indent level 2.
func (w *yamlWriter) poolEffective(p *Pool) {
	w.line(2, "pool:")
	targets := make([]string, len(p.Targets))
	for i, t := range p.Targets {
		targets[i] = RedactAddress(t)
	}
	w.kv(3, "targets", flowList(targets))
	w.kv(3, "balance", quote(string(p.Balance)))
	if p.Balance == BalanceHash {
		w.kv(3, "hash_key", quote(p.HashKey))
	}
	w.kv(3, "retries", strconv.Itoa(p.RetryCount()))
	w.line(3, "passive:")
	w.kv(4, "failures", strconv.Itoa(p.Passive.FailureCount()))
	w.kv(4, "eject_for", duration(p.Passive.EjectFor))
	if h := p.HealthCheck; h != nil {
		w.line(3, "health_check:")
		w.kv(4, "path", quote(h.Path))
		w.kv(4, "interval", duration(h.Interval))
		w.kv(4, "timeout", duration(h.Timeout))
		w.kv(4, "healthy_threshold", strconv.Itoa(h.HealthyThreshold))
		w.kv(4, "unhealthy_threshold", strconv.Itoa(h.UnhealthyThreshold))
	}
}
