package config

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/sluice-gw/sluice/ratelimit"
)

// RLS configures Envoy's rate limit service (gRPC
// envoy.service.ratelimit.v3.RateLimitService), served on its own listener
// with the same policies and store as the routes (docs/envoy.md). Domains
// come from two places, which may be mixed: envoyproxy/ratelimit's own
// configuration files, read as they are (EnvoyConfig), and Domains, written
// in this file, whose descriptors may name any sluice policy.
type RLS struct {
	// Listen is the gRPC address, host:port. Default "127.0.0.1:8081".
	Listen string `yaml:"listen"`
	// EnvoyConfig lists envoyproxy/ratelimit configuration files, or
	// directories whose *.yaml and *.yml files are read (not recursively),
	// relative to this file's directory. Each file is one domain: domain,
	// descriptors (key, value, rate_limit {unit, requests_per_unit,
	// unlimited, name, replaces}, shadow_mode, quota_mode, detailed_metric,
	// value_to_metric, share_threshold, descriptors). They are read again on
	// every reload, and watched with the config file under reload.watch.
	EnvoyConfig []string `yaml:"envoy_config"`
	// Domains are domains written here, in the same shape as an
	// envoyproxy/ratelimit file, where a descriptor may give `policy: NAME`
	// (any policy of this file) instead of `rate_limit`. A domain may be
	// defined once, here or in one EnvoyConfig file.
	Domains []RLSDomain `yaml:"domains"`
	// MaxDescriptors caps the descriptors of one request; a request with
	// more is refused (INVALID_ARGUMENT). Default 64.
	MaxDescriptors int `yaml:"max_descriptors"`
	// MaxEntries caps the entries of one descriptor; a descriptor with more
	// is refused (INVALID_ARGUMENT). Default 16.
	MaxEntries int `yaml:"max_entries"`
	// MaxMessageBytes caps the size of one request message; a larger one is
	// refused (RESOURCE_EXHAUSTED) before it is decoded. Default 65536.
	MaxMessageBytes int `yaml:"max_message_bytes"`

	envoy []RLSDomain // read from EnvoyConfig by Load
}

// RLS defaults.
const (
	DefaultRLSListen          = "127.0.0.1:8081"
	DefaultRLSMaxDescriptors  = 64
	DefaultRLSMaxEntries      = 16
	DefaultRLSMaxMessageBytes = 64 << 10
)

// AllDomains returns the domains of Domains followed by those Load read
// from EnvoyConfig, each with File set to where it was defined.
func (r *RLS) AllDomains() []RLSDomain {
	return append(slices.Clone(r.Domains), r.envoy...)
}

// RLSDomain is one rate-limit domain: the descriptors Envoy sends under it.
type RLSDomain struct {
	// Domain is the name Envoy's rate limit filter sends (its `domain`).
	// Required; unique.
	Domain string `yaml:"domain"`
	// Descriptors are the top level of the descriptor tree.
	Descriptors []RLSDescriptor `yaml:"descriptors"`

	// File is the envoyproxy/ratelimit file the domain was read from, or ""
	// for a domain of the rls section.
	File string `yaml:"-"`
}

// RLSDescriptor is one node of a domain's descriptor tree. A request's
// descriptor (a list of key/value entries) walks the tree one entry per
// level; the node reached by its last entry decides, if it has a limit.
// At each level an entry matches, first, a node with the same key and
// value; then a wildcard node, in file order: one whose value ends in '*'
// matches every value that starts with what comes before the '*' (a '*'
// anywhere else is an ordinary character), as envoyproxy/ratelimit
// matches; then a node with the key and no value, which keeps one budget
// per distinct value.
type RLSDescriptor struct {
	// Key is the entry's key. Required.
	Key string `yaml:"key"`
	// Value, if given, is the entry's value, or a prefix followed by '*'.
	Value string `yaml:"value"`
	// Policy names a sluice policy for descriptors ending here (rls section
	// only; at most one of Policy and RateLimit).
	Policy string `yaml:"policy"`
	// RateLimit is envoyproxy/ratelimit's limit: a fixed window of Unit
	// (second, minute, hour, day, week, month = 30 days, year = 365 days)
	// admitting RequestsPerUnit, or Unlimited.
	RateLimit *RLSRateLimit `yaml:"rate_limit"`
	// ShadowMode counts and reports the limit but never denies: a
	// descriptor over it is OK.
	ShadowMode bool `yaml:"shadow_mode"`
	// DetailedMetric and ValueToMetric are accepted for compatibility;
	// sluice's metrics never carry descriptor values (docs/envoy.md).
	DetailedMetric bool `yaml:"detailed_metric"`
	ValueToMetric  bool `yaml:"value_to_metric"`
	// ShareThreshold makes every value a wildcard Value matches share one
	// budget, instead of one budget per value. Value must end in '*'.
	ShareThreshold bool `yaml:"share_threshold"`
	// QuotaMode, like ShadowMode, counts the limit and never denies; a
	// descriptor over it is OK with limit_remaining 0 and no
	// duration_until_reset, as envoyproxy/ratelimit answers. sluice sends
	// no dynamic metadata (docs/envoy.md).
	QuotaMode bool `yaml:"quota_mode"`
	// Descriptors are the next level.
	Descriptors []RLSDescriptor `yaml:"descriptors"`
}

// RLSRateLimit is an envoyproxy/ratelimit rate_limit block.
type RLSRateLimit struct {
	// Unit is second, minute, hour, day, week, month or year, in any case.
	Unit string `yaml:"unit"`
	// RequestsPerUnit is the window's limit; 0 bans: every request that
	// counts (hits_addend above 0) is over the limit.
	RequestsPerUnit int64 `yaml:"requests_per_unit"`
	// Unlimited makes descriptors ending here never limited; Unit must then
	// be left out.
	Unlimited bool `yaml:"unlimited"`
	// Name names the limit for Replaces and is sent back as current_limit's
	// name.
	Name string `yaml:"name"`
	// Replaces lists limits (by Name) that this one switches off when both
	// match descriptors of one request.
	Replaces []RLSReplace `yaml:"replaces"`
}

// RLSReplace is one entry of rate_limit.replaces.
type RLSReplace struct {
	// Name is the replaced limit's name. Required.
	Name string `yaml:"name"`
}

// RLSUnits are the accepted rate_limit units and their length in seconds,
// as envoyproxy/ratelimit counts them.
var RLSUnits = map[string]int64{
	"second": 1, "minute": 60, "hour": 3600, "day": 86400,
	"week": 7 * 86400, "month": 30 * 86400, "year": 365 * 86400,
}

// RLSMatchKey is the string envoyproxy/ratelimit matches a descriptor
// node by: its key, then "_" and its value when it has one. A node whose
// match key ends in '*' is a wildcard node.
func RLSMatchKey(key, value string) string {
	if value == "" {
		return key
	}
	return key + "_" + value
}

// applyRLSDefaults fills in r's defaults.
func applyRLSDefaults(r *RLS) {
	if r == nil {
		return
	}
	setDefault(&r.Listen, DefaultRLSListen)
	setDefault(&r.MaxDescriptors, DefaultRLSMaxDescriptors)
	setDefault(&r.MaxEntries, DefaultRLSMaxEntries)
	setDefault(&r.MaxMessageBytes, DefaultRLSMaxMessageBytes)
}

// rls checks the rls section.
func (v *validator) rls(c *Config) {
	r := c.RLS
	policies := map[string]bool{} // false: a concurrency policy, which RLS cannot use
	for name, p := range c.Policies {
		policies[name] = p.Algorithm != ratelimit.Concurrency
	}
	if err := checkListen(r.Listen); err != nil {
		v.errf("rls.listen", "%v", err)
	} else if !strings.HasSuffix(r.Listen, ":0") && (r.Listen == c.Server.Listen || r.Listen == c.Admin.Listen) {
		v.errf("rls.listen", "%q is already server.listen or admin.listen", r.Listen)
	}
	for _, f := range []struct {
		name string
		n    int
	}{{"max_descriptors", r.MaxDescriptors}, {"max_entries", r.MaxEntries}, {"max_message_bytes", r.MaxMessageBytes}} {
		if f.n < 1 {
			v.errf("rls."+f.name, "must be at least 1, got %d", f.n)
		}
	}
	if r.MaxMessageBytes > 0 && r.MaxMessageBytes < 1024 {
		v.errf("rls.max_message_bytes", "must be at least 1024, got %d", r.MaxMessageBytes)
	}
	for i, p := range r.EnvoyConfig {
		if strings.TrimSpace(p) == "" {
			v.errf(fmt.Sprintf("rls.envoy_config[%d]", i), "is empty; give a file or directory")
		}
	}
	seen := map[string]string{}
	for i := range r.Domains {
		p := fmt.Sprintf("rls.domains[%d]", i)
		d := &r.Domains[i]
		switch {
		case d.Domain == "":
			v.errf(p+".domain", "is required")
		case seen[d.Domain] != "":
			v.errf(p+".domain", "domain %q is already defined at %s", d.Domain, seen[d.Domain])
		default:
			seen[d.Domain] = p
		}
		v.rlsDescriptors(p, d.Descriptors, policies, true)
	}
}

// rlsDescriptors checks one level of a descriptor tree at path p. own is
// true in the rls section, where `policy` is allowed; policies holds the
// names of the valid policies.
func (v *validator) rlsDescriptors(p string, ds []RLSDescriptor, policies map[string]bool, own bool) {
	seen := map[string]int{}
	for i := range ds {
		d := &ds[i]
		dp := fmt.Sprintf("descriptors[%d]", i)
		if p != "" {
			dp = p + "." + dp
		}
		if d.Key == "" {
			v.errf(dp+".key", "is required")
		}
		composite := d.Key + "_" + d.Value
		if j, dup := seen[composite]; dup && d.Key != "" {
			v.errf(dp, "duplicate descriptor key %q value %q (also descriptors[%d])", d.Key, d.Value, j)
		} else {
			seen[composite] = i
		}
		if d.Policy != "" {
			switch {
			case !own:
				v.errf(dp+".policy", "policy is a sluice field; an envoyproxy/ratelimit file gives rate_limit")
			case d.RateLimit != nil:
				v.errf(dp+".policy", "give policy or rate_limit, not both")
			case !policies[d.Policy]:
				if _, ok := policies[d.Policy]; ok {
					v.errf(dp+".policy", "concurrency policy %q: the rate limit service is not told when a request ends, so it cannot hold a slot", d.Policy)
					break
				}
				v.errf(dp+".policy", "unknown policy %q", d.Policy)
			}
		}
		if rl := d.RateLimit; rl != nil {
			v.rlsRateLimit(dp+".rate_limit", rl)
		}
		if d.ShareThreshold && !strings.HasSuffix(RLSMatchKey(d.Key, d.Value), "*") {
			v.errf(dp+".share_threshold", "needs a wildcard value (one ending in '*'), got %q", d.Value)
		}
		v.rlsDescriptors(dp, d.Descriptors, policies, own)
	}
}

func (v *validator) rlsRateLimit(p string, rl *RLSRateLimit) {
	_, unit := RLSUnits[strings.ToLower(rl.Unit)]
	switch {
	case rl.Unlimited && rl.Unit != "":
		v.errf(p+".unit", "should not be given when unlimited is true")
	case !rl.Unlimited && !unit:
		v.errf(p+".unit", "invalid rate limit unit %q (allowed: second, minute, hour, day, week, month, year)", rl.Unit)
	}
	if !rl.Unlimited && (rl.RequestsPerUnit < 0 || rl.RequestsPerUnit > 1<<32-1) {
		v.errf(p+".requests_per_unit", "must be from 0 (every request over the limit) to 4294967295, got %d", rl.RequestsPerUnit)
	}
	for j, r := range rl.Replaces {
		rp := fmt.Sprintf("%s.replaces[%d].name", p, j)
		switch {
		case r.Name == "":
			v.errf(rp, "should not be empty")
		case r.Name == rl.Name:
			v.errf(rp, "should not name this limit itself (%q)", r.Name)
		}
	}
}

// rls writes the rls section, when there is one, for Effective: every
// field of the section and of the domains written in it. The domains read
// from envoy_config are listed in comments (domain, file, descriptors), as
// the files stay where they are.
func (w *yamlWriter) rls(r *RLS) {
	if r == nil {
		return
	}
	w.line(0, "rls:")
	w.kv(1, "listen", quote(r.Listen))
	w.kv(1, "envoy_config", flowList(r.EnvoyConfig))
	for _, d := range r.envoy {
		w.line(1, fmt.Sprintf("# domain %s from %s: %s", strconv.Quote(d.Domain), strconv.Quote(d.File), plural(countDescriptors(d.Descriptors), "descriptor")))
	}
	w.kv(1, "max_descriptors", strconv.Itoa(r.MaxDescriptors))
	w.kv(1, "max_entries", strconv.Itoa(r.MaxEntries))
	w.kv(1, "max_message_bytes", strconv.Itoa(r.MaxMessageBytes))
	if len(r.Domains) == 0 {
		w.kv(1, "domains", "[]")
		return
	}
	w.line(1, "domains:")
	for _, d := range r.Domains {
		w.kv(2, "- domain", quote(d.Domain))
		w.rlsDescriptors(3, d.Descriptors)
	}
}

// rlsDescriptors writes a descriptor tree's level at indent n: key, value,
// policy or rate_limit, the flags that are set, and the next level.
func (w *yamlWriter) rlsDescriptors(n int, ds []RLSDescriptor) {
	if len(ds) == 0 {
		w.kv(n, "descriptors", "[]")
		return
	}
	w.line(n, "descriptors:")
	for _, d := range ds {
		w.kv(n+1, "- key", quote(d.Key))
		if d.Value != "" {
			w.kv(n+2, "value", quote(d.Value))
		}
		if d.Policy != "" {
			w.kv(n+2, "policy", quote(d.Policy))
		}
		if rl := d.RateLimit; rl != nil {
			w.kv(n+2, "rate_limit", rateLimitFlow(rl))
		}
		for _, f := range []struct {
			name string
			on   bool
		}{{"shadow_mode", d.ShadowMode}, {"quota_mode", d.QuotaMode}, {"detailed_metric", d.DetailedMetric}, {"value_to_metric", d.ValueToMetric}, {"share_threshold", d.ShareThreshold}} {
			if f.on {
				w.kv(n+2, f.name, "true")
			}
		}
		if len(d.Descriptors) > 0 {
			w.rlsDescriptors(n+2, d.Descriptors)
		}
	}
}

// rateLimitFlow renders a rate_limit block as a flow mapping of the fields
// that are set.
func rateLimitFlow(rl *RLSRateLimit) string {
	var parts []string
	if rl.Unit != "" {
		parts = append(parts, "unit: "+quote(rl.Unit))
	}
	if rl.RequestsPerUnit != 0 || !rl.Unlimited {
		parts = append(parts, "requests_per_unit: "+strconv.FormatInt(rl.RequestsPerUnit, 10))
	}
	if rl.Unlimited {
		parts = append(parts, "unlimited: true")
	}
	if rl.Name != "" {
		parts = append(parts, "name: "+quote(rl.Name))
	}
	if len(rl.Replaces) > 0 {
		names := make([]string, len(rl.Replaces))
		for i, r := range rl.Replaces {
			names[i] = "{name: " + quote(r.Name) + "}"
		}
		parts = append(parts, "replaces: ["+strings.Join(names, ", ")+"]")
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// countDescriptors returns the nodes of a descriptor tree.
func countDescriptors(ds []RLSDescriptor) int {
	n := len(ds)
	for _, d := range ds {
		n += countDescriptors(d.Descriptors)
	}
	return n
}
