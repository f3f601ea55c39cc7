package config

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"net/url"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/goccy/go-yaml/token"

	"github.com/sluice-gw/sluice/httplimit"
	"github.com/sluice-gw/sluice/ratelimit"
)

// Validate checks every rule of the configuration and reports every problem
// found, as [Errors] without file positions. It checks c as it is: for a
// Config built in Go, call [ApplyDefaults] first. On success it also
// compiles the policies, so that [Config.Policy] returns the same
// *ratelimit.Policy values on every call. Configs from [Load] and [Parse]
// are already validated.
func (c *Config) Validate() error {
	v := &validator{}
	compiled := v.validate(c)
	if len(v.errs) > 0 {
		return v.errs.sorted()
	}
	c.compiled = compiled
	v.headShadows(c)
	c.warnings = v.warns.sorted()
	return nil
}

// validator checks a decoded Config. With positions from the decoder it
// points each problem at the offending value and knows which fields the file
// set; without them (a Config built in Go) a field counts as set when it is
// not zero.
type validator struct {
	file   string
	pos    map[string]token.Position // nil for a Config built in Go
	parent map[string]string
	bad    map[string]bool // values the decoder already reported
	blank  map[string]bool // text values the file gives as ""
	errs   Errors
	warns  Errors // see Config.Warnings
}

// parentOf returns the path that contains path: it drops the last ".name",
// "[index]" or, through the decoder's record, `["quoted key"]`.
func (v *validator) parentOf(path string) string {
	if p, ok := v.parent[path]; ok {
		return p
	}
	if strings.HasSuffix(path, "]") {
		if i := strings.LastIndexByte(path, '['); i >= 0 {
			return path[:i]
		}
	}
	if i := strings.LastIndexByte(path, '.'); i >= 0 {
		return path[:i]
	}
	return ""
}

// errf records a problem with the value at path, at that value's position
// or, for a value not given, at the nearest enclosing one. Problems under a
// value the decoder already rejected are dropped: they would only describe
// the zero value left in its place.
func (v *validator) errf(path, format string, args ...any) {
	for p := path; ; p = v.parentOf(p) {
		if v.bad[p] {
			return
		}
		if p == "" {
			break
		}
	}
	e := &Error{File: v.file, Path: path, Message: fmt.Sprintf(format, args...)}
	if v.pos != nil {
		e.Line, e.Col = 1, 1
		for p := path; ; p = v.parentOf(p) {
			if at, ok := v.pos[p]; ok {
				e.Line, e.Col = at.Line, at.Column
				break
			}
			if p == "" {
				break
			}
		}
	}
	v.errs = append(v.errs, e)
}

// given reports whether the file set the value at path; for a Config built
// in Go, whether it is not zero.
func (v *validator) given(path string, zero bool) bool {
	if v.pos == nil {
		return !zero
	}
	_, ok := v.pos[path]
	return ok
}

// line returns the line of path for messages, or 0.
func (v *validator) line(path string) int {
	return v.pos[path].Line
}

// explicitZeros reports fields the file set to a zero value where zero is
// neither allowed nor a way to ask for the default. It runs before
// ApplyDefaults, which would otherwise replace those zeros unnoticed.
func (v *validator) explicitZeros(c *Config) {
	if v.pos == nil {
		return
	}
	zero := func(path string, isZero bool, msg string) {
		if _, ok := v.pos[path]; ok && isZero {
			v.errf(path, "%s", msg)
		}
	}
	positive := func(path string, d time.Duration) {
		zero(path, d == 0, "must be a positive duration, got 0 (leave it out for the default)")
	}
	zero("server.listen", c.Server.Listen == "", "is empty; give host:port (leave it out for "+DefaultListen+")")
	positive("server.shutdown_timeout", c.Server.ShutdownTimeout)
	positive("server.read_header_timeout", c.Server.ReadHeaderTimeout)
	positive("server.idle_timeout", c.Server.IdleTimeout)
	positive("reload.settle", c.Reload.Settle)
	zero("server.max_header_bytes", c.Server.MaxHeaderBytes == 0, "must be at least 1, got 0 (leave it out for 16384)")
	zero("server.max_conns", c.Server.MaxConns == 0, "must be at least 1, got 0 (leave it out for "+strconv.Itoa(DefaultMaxConns)+")")
	v.tlsZeros(&c.Server, zero)
	zero("admin.listen", c.Admin.Listen == "", "is empty; give host:port (leave it out for "+DefaultAdminListen+")")
	zero("store.type", c.Store.Type == "", `is empty (allowed: memory, redis)`)
	zero("store.prefix", c.Store.Prefix == "", `is empty (leave it out for "sluice")`)
	positive("store.timeout", c.Store.Timeout)
	zero("store.on_error", c.Store.OnError == "", "is empty (allowed: local, allow, deny)")
	zero("store.redis.mode", c.Store.Redis.Mode == "", "is empty (allowed: standalone, sentinel, cluster)")
	zero("store.memory.max_keys", c.Store.Memory.MaxKeys == 0,
		"must be at least 1, got 0 (leave it out for "+strconv.Itoa(DefaultMemoryMaxKeys)+")")
	zero("store.local_deny.max_keys", c.Store.LocalDeny.MaxKeys == 0,
		"must be at least 1, got 0 (leave it out for "+strconv.Itoa(DefaultLocalDenyMaxKeys)+")")
	for i, r := range c.Routes {
		p := fmt.Sprintf("routes[%d]", i)
		positive(p+".timeout", r.Timeout)
		if r.Respond != nil {
			zero(p+".respond.status", r.Respond.Status == 0, "must be an HTTP status from 200 to 599, got 0")
		}
		if r.Pool != nil {
			v.poolZeros(p, r.Pool, zero)
		}
		if r.ForwardAuth != nil {
			zero(p+".forward_auth.deny_status", r.ForwardAuth.DenyStatus == 0, "must be 429, 403 or 401, got 0 (leave it out for 429)")
		}
		for j, l := range r.Limits {
			lp := fmt.Sprintf("%s.limits[%d]", p, j)
			zero(lp+".cost", l.Cost == 0, "must be at least 1, got 0")
			zero(lp+".on_empty_key", v.blank[lp+".on_empty_key"], "is empty (allowed: deny, anonymous, skip)")
		}
	}
}

// validate checks every rule and returns the policies that compiled.
func (v *validator) validate(c *Config) map[string]*ratelimit.Policy {
	v.server(&c.Server)
	v.accessLog(&c.Server.AccessLog)
	v.admin(&c.Admin, &c.Server)
	v.tls(c)
	v.http2(&c.Server.HTTP2)
	v.store(&c.Store)
	v.observe(c)
	compiled := make(map[string]*ratelimit.Policy, len(c.Policies))
	for _, name := range c.PolicyNames() {
		if p := v.policy(name, c.Policies[name]); p != nil {
			compiled[name] = p
		}
	}
	if len(c.Routes) == 0 && c.RLS == nil {
		v.errf("routes", "at least one route (or an rls section) is required")
	}
	firstID := map[string]int{}
	for i := range c.Routes {
		v.route(c, i, compiled, firstID)
	}
	if c.RLS != nil {
		v.rls(c)
	}
	v.scg(c, compiled)
	if c.Shedding != nil {
		v.shedding(c.Shedding)
	}
	return compiled
}

func (v *validator) server(s *Server) {
	if err := checkListen(s.Listen); err != nil {
		v.errf("server.listen", "%v", err)
	}
	for _, f := range []struct {
		path   string
		d      time.Duration
		zeroOK bool
	}{
		{"server.shutdown_timeout", s.ShutdownTimeout, false},
		{"server.read_header_timeout", s.ReadHeaderTimeout, false},
		{"server.read_timeout", s.ReadTimeout, true},
		{"server.write_timeout", s.WriteTimeout, true},
		{"server.idle_timeout", s.IdleTimeout, false},
	} {
		switch {
		case f.d < 0 && f.zeroOK:
			v.errf(f.path, "must be 0 (no bound) or a positive duration, got %v", f.d)
		case f.d < 0 || f.d == 0 && !f.zeroOK && v.given(f.path, true):
			v.errf(f.path, "must be a positive duration, got %v", f.d)
		}
	}
	if s.MaxHeaderBytes < 0 || s.MaxHeaderBytes > 64<<20 {
		v.errf("server.max_header_bytes", "must be from 1 to %d (64 MiB), got %d", 64<<20, s.MaxHeaderBytes)
	}
	if s.MaxConns < 0 {
		v.errf("server.max_conns", "must be at least 1, got %d", s.MaxConns)
	}
	if s.MaxConnsPerIP < 0 {
		v.errf("server.max_conns_per_ip", "must be 0 (no bound) or more, got %d", s.MaxConnsPerIP)
	}
	for i, t := range s.TrustedProxies {
		if _, ok := parsePrefix(t); !ok {
			v.errf(fmt.Sprintf("server.trusted_proxies[%d]", i), "%q is not an IP address or CIDR prefix (e.g. 10.0.0.0/8 or 192.0.2.7)", t)
		}
	}
}

// checkListen checks a listen address: host:port, the port a number from 0
// to 65535 (0 picks a free port).
func checkListen(s string) error {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return fmt.Errorf("%q is not host:port (e.g. 127.0.0.1:8080, or :8080 for every interface)", s)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("%q: port %q is not a number from 0 to 65535", s, port)
	}
	if strings.ContainsFunc(host, unicode.IsSpace) {
		return fmt.Errorf("%q: host contains whitespace", s)
	}
	return nil
}

func (v *validator) admin(a *Admin, s *Server) {
	if err := checkListen(a.Listen); err != nil {
		v.errf("admin.listen", "%v", err)
		return
	}
	if a.Listen == s.Listen && !strings.HasSuffix(a.Listen, ":0") {
		v.errf("admin.listen", "%q is also server.listen; the admin listener needs its own address", a.Listen)
	}
}

func (v *validator) store(s *Store) {
	switch s.Type {
	case StoreMemory, StoreRedis:
	default:
		v.errf("store.type", "unknown store type %q (allowed: memory, redis)", s.Type)
	}
	if s.Prefix == "" || strings.ContainsFunc(s.Prefix, func(r rune) bool {
		return r == '{' || r == '}' || unicode.IsSpace(r) || unicode.IsControl(r)
	}) {
		v.errf("store.prefix", "prefix %q must be non-empty, without '{', '}', spaces or control characters", s.Prefix)
	}
	if s.Timeout < 0 || s.Timeout == 0 && v.given("store.timeout", true) {
		v.errf("store.timeout", "must be a positive duration, got %v", s.Timeout)
	}
	switch s.OnError {
	case OnErrorLocal, OnErrorAllow, OnErrorDeny:
	default:
		v.errf("store.on_error", "unknown on_error %q (allowed: local, allow, deny)", s.OnError)
	}
	// Checked whatever the type: it also sizes the local fallback of a
	// Redis store.
	if s.Memory.MaxKeys < 0 || s.Memory.MaxKeys == 0 && v.given("store.memory.max_keys", true) {
		v.errf("store.memory.max_keys", "must be at least 1, got %d", s.Memory.MaxKeys)
	}
	// Checked whatever the type, as store.memory is, though only a Redis
	// store uses it.
	if s.LocalDeny.MaxKeys < 0 || s.LocalDeny.MaxKeys == 0 && v.given("store.local_deny.max_keys", true) {
		v.errf("store.local_deny.max_keys", "must be at least 1, got %d", s.LocalDeny.MaxKeys)
	}
	if s.Type != StoreRedis {
		return // the redis section is ignored
	}
	r := &s.Redis
	switch r.Mode {
	case RedisStandalone, RedisSentinel, RedisCluster:
	default:
		v.errf("store.redis.mode", "unknown redis mode %q (allowed: standalone, sentinel, cluster)", r.Mode)
	}
	switch {
	case len(r.Addrs) == 0:
		v.errf("store.redis.addrs", "at least one address is required when store.type is redis (e.g. [\"127.0.0.1:6379\"])")
	case r.Mode == RedisStandalone && len(r.Addrs) > 1:
		v.errf("store.redis.addrs", "standalone mode takes exactly one address, got %d (use mode sentinel or cluster for several)", len(r.Addrs))
	}
	for i, a := range r.Addrs {
		host, port, err := net.SplitHostPort(a)
		n, perr := strconv.Atoi(port)
		switch {
		case strings.Contains(a, "@") || strings.Contains(a, "://"):
			v.errf(fmt.Sprintf("store.redis.addrs[%d]", i), "%q is not host:port: give the address alone, and credentials in store.redis.username and store.redis.password", RedactAddress(a))
		case err != nil || host == "" || perr != nil || n < 1 || n > 65535:
			v.errf(fmt.Sprintf("store.redis.addrs[%d]", i), "%q is not host:port with a port from 1 to 65535 (e.g. 127.0.0.1:6379)", a)
		}
	}
	switch {
	case r.Mode == RedisSentinel && r.MasterName == "":
		v.errf("store.redis.master_name", "is required in sentinel mode (the name of the master set)")
	case r.Mode != RedisSentinel && r.MasterName != "":
		v.errf("store.redis.master_name", "applies only to mode sentinel, not %s", r.Mode)
	}
	if r.Mode != RedisSentinel {
		if r.SentinelUsername != "" {
			v.errf("store.redis.sentinel_username", "applies only to mode sentinel, not %s (username is for the Redis servers)", r.Mode)
		}
		if r.SentinelPassword != "" {
			v.errf("store.redis.sentinel_password", "applies only to mode sentinel, not %s (password is for the Redis servers)", r.Mode)
		}
	}
	if r.SentinelUsername != "" && r.SentinelPassword == "" {
		v.errf("store.redis.sentinel_username", "needs sentinel_password (an ACL user authenticates with both)")
	}
	switch {
	case r.DB < 0:
		v.errf("store.redis.db", "must be 0 or more, got %d", r.DB)
	case r.DB != 0 && r.Mode == RedisCluster:
		v.errf("store.redis.db", "must be 0 in cluster mode (Redis Cluster has only database 0), got %d", r.DB)
	}
}

// nameRE is the syntax of route ids and policy names, which appear in
// metrics, headers, admin URLs and state keys.
var nameRE = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)

// algorithmNames lists the algorithms for messages.
func algorithmNames() string {
	names := make([]string, len(ratelimit.Algorithms), len(ratelimit.Algorithms)+1)
	for i, a := range ratelimit.Algorithms {
		names[i] = string(a)
	}
	return strings.Join(append(names, string(ratelimit.Concurrency)), ", ")
}

// maxName is the name of a policy's limit (capacity, limit or burst).
func maxName(a ratelimit.Algorithm) string {
	switch a {
	case ratelimit.TokenBucket, ratelimit.LeakyBucket:
		return "capacity"
	case ratelimit.GCRA:
		return "burst"
	}
	return "limit"
}

// policy compiles one policy and reports each problem [ratelimit.NewPolicy]
// finds at the line of the field at fault. It returns nil if the policy is
// invalid.
func (v *validator) policy(name string, s PolicySpec) *ratelimit.Policy {
	path := mapPath("policies", name)
	nameOK := nameRE.MatchString(name)
	if !nameOK {
		v.errf(path, "policy name %q may contain only letters, digits, '.', '_' and '-'", name)
	}
	p, err := ratelimit.NewPolicy(s.config(name))
	probs := policyErrors(err)
	for _, pe := range probs {
		if pe.Field == "algorithm" {
			// Without a known algorithm no other field can be judged.
			v.errf(joinPath(path, "algorithm"), "%s", algorithmMessage(pe))
			return nil
		}
	}
	reported := map[string]bool{}
	var whole []*ratelimit.PolicyError
	for _, pe := range probs {
		if pe.Field == "" {
			whole = append(whole, pe)
			continue
		}
		reported[pe.Field] = true
		fp := joinPath(path, pe.Field)
		v.errf(fp, "%s", policyMessage(pe, s, v.given(fp, isZero(pe.Value))))
	}
	// A field the file sets to its zero value looks left out to NewPolicy.
	// Ask NewPolicy about it as if it were set, so that one given where the
	// algorithm does not take it is reported as for any other value.
	for _, pe := range policyErrors(v.givenZeros(path, s, reported)) {
		if pe.Field != "" && !reported[pe.Field] {
			reported[pe.Field] = true
			v.errf(joinPath(path, pe.Field), "%s", policyMessage(pe, s, true))
		}
	}
	// max_delay written as 0 would mean the same as left out (no bound
	// beyond the capacity), the opposite of how it reads; so like every
	// duration in the file it must be > 0.
	if fp := joinPath(path, "max_delay"); s.MaxDelay == 0 && v.given(fp, true) && !reported["max_delay"] {
		reported["max_delay"] = true
		v.errf(fp, "max_delay must be a positive duration, got %v (leave it out to bound the wait only by the capacity)", s.MaxDelay)
	}
	if !nameOK || len(reported) > 0 {
		return nil
	}
	for _, pe := range whole {
		// Rules on the policy as a whole, such as gcra's bound on
		// burst/rate, land on the policy itself.
		v.errf(path, "%v", pe)
	}
	return p
}

// givenZeros returns what NewPolicy says about s with every field the file
// sets to zero, and that is not already reported, set to a non-zero value.
// It returns nil when there is no such field.
func (v *validator) givenZeros(path string, s PolicySpec, reported map[string]bool) error {
	probe, any := s, false
	set := func(field string, zero bool, apply func()) {
		if zero && !reported[field] && v.pos != nil && v.given(joinPath(path, field), true) {
			apply()
			any = true
		}
	}
	set("capacity", s.Capacity == 0, func() { probe.Capacity = 1 })
	set("limit", s.Limit == 0, func() { probe.Limit = 1 })
	set("burst", s.Burst == 0, func() { probe.Burst = 1 })
	set("rate", s.Rate == 0, func() { probe.Rate = 1 })
	set("window", s.Window == 0, func() { probe.Window = time.Second })
	set("mode", s.Mode == "", func() { probe.Mode = ratelimit.Police })
	set("max_delay", s.MaxDelay == 0, func() { probe.MaxDelay = time.Second })
	set("lease_ttl", s.LeaseTTL == 0, func() { probe.LeaseTTL = time.Second })
	if !any {
		return nil
	}
	_, err := ratelimit.NewPolicy(probe.config(""))
	return err
}

// policyErrors returns the *ratelimit.PolicyError values in err, which
// NewPolicy joins.
func policyErrors(err error) []*ratelimit.PolicyError {
	if err == nil {
		return nil
	}
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	var out []*ratelimit.PolicyError
	for _, e := range errs {
		var pe *ratelimit.PolicyError
		if errors.As(e, &pe) {
			out = append(out, pe)
		}
	}
	return out
}

// isZero reports whether a PolicyError's Value is its type's zero value.
func isZero(v any) bool {
	return v == nil || reflect.ValueOf(v).IsZero()
}

// algorithmMessage words a problem with a policy's algorithm.
func algorithmMessage(pe *ratelimit.PolicyError) string {
	if pe.Reason == ratelimit.ReasonMissing {
		return fmt.Sprintf("algorithm is required (allowed: %s)", algorithmNames())
	}
	return fmt.Sprintf("unknown algorithm %q (allowed: %s)", pe.Value, algorithmNames())
}

// policyMessage words a problem with one field of policy s for the file:
// given says whether the file sets the field. Where the file's reader needs
// more than NewPolicy says (what to write instead, what the algorithm
// takes), it says more.
func policyMessage(pe *ratelimit.PolicyError, s PolicySpec, given bool) string {
	f, a := pe.Field, s.Algorithm
	switch {
	case pe.Reason == ratelimit.ReasonNotApplicable && f == "mode":
		return fmt.Sprintf("mode does not apply to %s (only to leaky_bucket)", a)
	case pe.Reason == ratelimit.ReasonNotApplicable && f == "max_delay":
		return fmt.Sprintf("max_delay does not apply to %s (only to leaky_bucket in mode shape)", a)
	case pe.Reason == ratelimit.ReasonNotApplicable:
		return fmt.Sprintf("%s does not apply to %s (it takes %s)", f, a, strings.Join(pe.Takes, ", "))
	case !given && isZero(pe.Value):
		switch f {
		case "rate":
			return fmt.Sprintf("rate is required for %s (units per second, e.g. 10, 0.5 or \"100/1m\")", a)
		case "window":
			return fmt.Sprintf("window is required for %s (a duration such as 1m)", a)
		}
		return fmt.Sprintf("%s is required for %s (an integer from 1 to 2^53)", f, a)
	}
	switch {
	case pe.Reason == ratelimit.ReasonUnknown && f == "mode":
		return fmt.Sprintf("unknown mode %q (allowed: police, shape)", pe.Value)
	case pe.Reason == ratelimit.ReasonShapeOnly:
		return fmt.Sprintf("max_delay applies only to mode shape, not %q", s.Mode)
	case pe.Reason == ratelimit.ReasonNotPositive && f == "window":
		return fmt.Sprintf("window must be a positive duration, got %v", pe.Value)
	case pe.Reason == ratelimit.ReasonTooLarge && f == "window":
		return fmt.Sprintf("window must be at most 366 days (%v), got %v", ratelimit.MaxWindow, pe.Value)
	case pe.Reason == ratelimit.ReasonTooLarge && f == "max_delay":
		return fmt.Sprintf("max_delay must be at most 366 days, got %v", pe.Value)
	case pe.Reason == ratelimit.ReasonTooSmall && f == "rate":
		return fmt.Sprintf("rate must be at least %v per second (one per 11.6 days), got %v", ratelimit.MinRate, pe.Value)
	}
	return pe.Detail
}

// route checks routes[i]. firstID maps each id seen so far to its index.
func (v *validator) route(c *Config, i int, compiled map[string]*ratelimit.Policy, firstID map[string]int) {
	r := &c.Routes[i]
	p := fmt.Sprintf("routes[%d]", i)
	v.priority(c, i)
	switch first, dup := firstID[r.ID]; {
	case r.ID == "":
		v.errf(p+".id", "id is required (letters, digits, '.', '_' and '-')")
	case !nameRE.MatchString(r.ID):
		v.errf(p+".id", "id %q may contain only letters, digits, '.', '_' and '-'", r.ID)
	case dup:
		fp := fmt.Sprintf("routes[%d].id", first)
		if l := v.line(fp); l > 0 {
			v.errf(p+".id", "duplicate route id %q (first used by routes[%d] at line %d)", r.ID, first, l)
		} else {
			v.errf(p+".id", "duplicate route id %q (first used by routes[%d])", r.ID, first)
		}
	default:
		firstID[r.ID] = i
	}
	v.match(p+".match", &r.Match)

	v.answers(p, r)
	if r.ForwardAuth != nil {
		v.forwardAuth(p, r)
	}
	if r.Upstream != "" {
		if err := checkUpstream(r.Upstream); err != nil {
			v.errf(p+".upstream", "%v", err)
		}
	}
	if r.Pool != nil {
		v.pool(p, r.Pool)
	}
	if r.Proxied() && (r.Timeout < 0 || r.Timeout == 0 && v.given(p+".timeout", true)) {
		v.errf(p+".timeout", "must be a positive duration, got %v", r.Timeout)
	}
	v.upstreamTLS(c, p, r)
	if r.StripPrefix < 0 {
		v.errf(p+".strip_prefix", "must be 0 or more path segments, got %d", r.StripPrefix)
	}
	if r.Respond != nil {
		v.upstreamOnly(p, r, true)
		v.respond(p+".respond", r.Respond)
	}
	for j := range r.Limits {
		v.limit(c, fmt.Sprintf("%s.limits[%d]", p, j), &r.Limits[j], compiled)
		if pol := compiled[r.Limits[j].Policy]; r.ForwardAuth != nil && pol != nil && pol.IsConcurrency() {
			v.errf(fmt.Sprintf("%s.limits[%d].policy", p, j), "concurrency policy %q on a forward_auth route: sluice answers the auth request before the original request runs, so it cannot hold its slot until it ends", r.Limits[j].Policy)
		}
	}
}

// answers checks that route r at p has exactly one of upstream, pool,
// respond and forward_auth.
func (v *validator) answers(p string, r *Route) {
	type answer struct {
		name  string
		given bool
	}
	all := []answer{
		{"upstream", r.Upstream != ""}, {"pool", r.Pool != nil},
		{"respond", r.Respond != nil}, {"forward_auth", r.ForwardAuth != nil},
	}
	var given []string
	for _, a := range all {
		if v.bad[p+"."+a.name] {
			return // the decoder reported it
		}
		if a.given {
			given = append(given, a.name)
		}
	}
	switch len(given) {
	case 0:
		v.errf(p, "route %q needs an upstream URL, a pool, a respond answer or forward_auth", r.ID)
	case 1:
	default:
		// Reported at the second, as the file reads.
		v.errf(p+"."+given[1], "route %q has both %s and %s; give one", r.ID, given[0], given[1])
	}
}

// forwardSources are ForwardAuth.From's allowed values.
var forwardSources = []string{FromXForwarded, FromXOriginal, FromRequest}

// forwardAuth checks the forward_auth section of route r at p, and the
// route fields that do not apply to it.
func (v *validator) forwardAuth(p string, r *Route) {
	fa := r.ForwardAuth
	fp := p + ".forward_auth"
	switch {
	case fa.From == "" && !v.bad[fp+".from"]:
		v.errf(fp+".from", "from is required (allowed: %s; see docs/forward-auth.md)", strings.Join(forwardSources, ", "))
	case fa.From != "" && !slices.Contains(forwardSources, fa.From):
		v.errf(fp+".from", "unknown source %q (allowed: %s)", fa.From, strings.Join(forwardSources, ", "))
	}
	if fa.Match != nil {
		v.match(fp+".match", fa.Match)
	}
	switch fa.DenyStatus {
	case 0, 401, 403, 429:
	default:
		v.errf(fp+".deny_status", "must be 429, 403 or 401, got %d", fa.DenyStatus)
	}
	if fa.From != FromRequest && v.given(p+".strip_prefix", r.StripPrefix == 0) {
		v.errf(p+".strip_prefix", "strip_prefix applies to a forward_auth route only with from: request, not %q", fa.From)
	}
	v.upstreamOnly(p, r, false)
}

// upstreamOnly reports the fields of route r at p that apply only to routes
// with an upstream when r has none; strip_prefix among them when
// stripPrefix is true.
func (v *validator) upstreamOnly(p string, r *Route, stripPrefix bool) {
	if r.Proxied() {
		return
	}
	type upField struct {
		name string
		zero bool
	}
	fields := []upField{{"timeout", r.Timeout == 0}, {"preserve_host", !r.PreserveHost}}
	if stripPrefix {
		fields = append([]upField{{"strip_prefix", r.StripPrefix == 0}}, fields...)
	}
	for _, f := range fields {
		if fp := p + "." + f.name; v.given(fp, f.zero) {
			v.errf(fp, "%s applies only to routes with an upstream", f.name)
		}
	}
}

// methods are the methods a route may match.
var methods = []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "CONNECT", "TRACE"}

func (v *validator) match(p string, m *Match) {
	if m.Path == "" {
		v.errf(p+".path", "path is required (e.g. /api/** or /hello)")
	} else if err := checkPathPattern(m.Path); err != nil {
		v.errf(p+".path", "%v", err)
	} else if strings.Contains(m.Path, `\`) && !m.AllowEncodedSlash {
		v.errf(p+".path", `path %q never matches: a request path with a backslash matches only a route with allow_encoded_slash: true`, m.Path)
	}
	seen := map[string]bool{}
	for i, meth := range m.Methods {
		mp := fmt.Sprintf("%s.methods[%d]", p, i)
		switch {
		case slices.Contains(methods, meth):
			if seen[meth] {
				v.errf(mp, "method %s is listed twice", meth)
			}
			seen[meth] = true
		case slices.Contains(methods, strings.ToUpper(meth)):
			v.errf(mp, "method %q must be uppercase: %s", meth, strings.ToUpper(meth))
		default:
			v.errf(mp, "unknown method %q (allowed: %s)", meth, strings.Join(methods, ", "))
		}
	}
	if h := m.Host; h != "" {
		v.bareHost(p+".host", h)
	}
	for name, h := range m.Headers {
		if strings.EqualFold(name, "Host") {
			// The gateway compares a Host entry as it compares match.host.
			v.bareHost(mapPath(p+".headers", name), h)
		}
	}
	v.headerNames(p+".headers", m.Headers)
	v.headerValues(p+".headers", m.Headers, "%q never matches: a request header value cannot contain a control character other than tab")
	v.query(p+".query", m.Query)
}

// bareHost checks a host to match: a name or address without port, scheme
// or path, since the request's host is compared without its port.
func (v *validator) bareHost(p, h string) {
	if _, _, err := net.SplitHostPort(h); err == nil || strings.ContainsAny(h, "/@ \t") {
		v.errf(p, "host %q must be a bare host name without port, scheme or path (it is compared without the port)", h)
	}
}

// headerNames checks that every key of h is a valid header name.
func (v *validator) headerNames(p string, h map[string]string) {
	for name := range h {
		if !httplimit.ValidHeaderName(name) {
			v.errf(mapPath(p, name), "%q is not a valid HTTP header name", name)
		}
	}
}

// checkPathPattern checks a route path: absolute, no query, no "." or ".."
// segment, and "*" or "**" only as whole segments, "**" only last.
func checkPathPattern(s string) error {
	if !strings.HasPrefix(s, "/") {
		return fmt.Errorf("path %q must start with /", s)
	}
	if strings.ContainsAny(s, "?#") || strings.ContainsFunc(s, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) {
		return fmt.Errorf("path %q must not contain a query, a fragment, spaces or control characters", s)
	}
	if strings.Contains(s, ";") {
		return fmt.Errorf(`path %q never matches: a request path with a ";" matches no route`, s)
	}
	segs := strings.Split(s[1:], "/")
	for i, seg := range segs {
		switch {
		case seg == "" && i < len(segs)-1:
			return fmt.Errorf(`path %q never matches: a request path with an empty segment ("//") matches no route`, s)
		case seg == "." || seg == "..":
			// The gateway turns away every request whose decoded path has
			// such a segment, so a pattern that needs one is dead.
			return fmt.Errorf(`path %q: segment %q never matches: a request path with a "." or ".." segment matches no route`, s, seg)
		case !strings.Contains(seg, "*"), seg == "*":
		case seg == "**":
			if i != len(segs)-1 {
				return fmt.Errorf("path %q: ** may only be the last segment", s)
			}
		default:
			return fmt.Errorf("path %q: segment %q mixes * with text; * matches one whole segment and ** any rest", s, seg)
		}
	}
	return nil
}

// checkUpstream checks an upstream URL (a route's upstream, a pool's
// target): http, https, h2c or h2, a host, an optional port and base path,
// no credentials, query or fragment. Its messages quote the URL with any
// password redacted.
func checkUpstream(s string) error {
	u, err := url.Parse(s)
	q := RedactAddress(s)
	if err != nil {
		return fmt.Errorf("upstream %q is not a valid URL: %v", q, unwrapURLError(err))
	}
	switch {
	case u.Scheme != SchemeHTTP && u.Scheme != SchemeHTTPS && u.Scheme != SchemeH2C && u.Scheme != SchemeH2:
		return fmt.Errorf("upstream %q must be an http://, https://, h2c:// or h2:// URL", q)
	case u.Host == "" || u.Hostname() == "":
		return fmt.Errorf("upstream %q has no host", q)
	case u.User != nil:
		return fmt.Errorf("upstream %q must not carry credentials", q)
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		return fmt.Errorf("upstream %q must not have a query or fragment", q)
	}
	if port := u.Port(); port != "" {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("upstream %q: port %q is not from 1 to 65535", q, port)
		}
	} else if strings.HasSuffix(u.Host, ":") {
		return fmt.Errorf("upstream %q has an empty port", q)
	}
	return nil
}

// unwrapURLError drops url.Error's repetition of the URL.
func unwrapURLError(err error) error {
	if ue, ok := err.(*url.Error); ok {
		return ue.Err
	}
	return err
}

// respond checks a fixed answer. Go's server would not send what the file
// asks for in each case rejected here: a 1xx status is not a final answer, a
// body with 204 or 304 is dropped, and CR or LF in a header value is turned
// into a space.
func (v *validator) respond(p string, r *Respond) {
	switch {
	case r.Status < 200 || r.Status > 599:
		v.errf(p+".status", "must be an HTTP status from 200 to 599, got %d", r.Status)
	case r.Body != "" && (r.Status == 204 || r.Status == 304):
		v.errf(p+".body", "must be empty with status %d: a %d response has no body, so it would be dropped", r.Status, r.Status)
	}
	v.headerNames(p+".headers", r.Headers)
	v.headerValues(p+".headers", r.Headers, "%q is not a valid HTTP header value: it contains a control character (CR, LF and other control characters are not allowed; tab is)")
}

// headerValues reports each value of h that is not a valid header value
// (isHeaderValue) with format, which gets the value, in name order.
func (v *validator) headerValues(p string, h map[string]string, format string) {
	for _, name := range slices.Sorted(maps.Keys(h)) {
		if val := h[name]; !isHeaderValue(val) {
			v.errf(mapPath(p, name), format, val)
		}
	}
}

// isHeaderValue reports whether s may be sent as an HTTP header value (RFC
// 9110 field-value): no control characters but tab. Bytes from 0x80 up
// (UTF-8 text) are allowed.
func isHeaderValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

// unknownPolicy words the error for a policy name that is not defined.
func unknownPolicy(c *Config, name string) string {
	if len(c.Policies) == 0 {
		return fmt.Sprintf("unknown policy %q (no policies are defined)", name)
	}
	return fmt.Sprintf("unknown policy %q (defined: %s)", name, strings.Join(c.PolicyNames(), ", "))
}

func (v *validator) limit(c *Config, p string, l *Limit, compiled map[string]*ratelimit.Policy) {
	// usable checks that name is a policy and that this limit's cost fits it.
	usable := func(at, name, what string) {
		pol := compiled[name]
		switch _, defined := c.Policies[name]; {
		case !defined:
			v.errf(at, "%s", unknownPolicy(c, name))
		case pol == nil: // invalid; reported under policies
		case pol.IsConcurrency() && l.Cost != 1:
			v.errf(p+".cost", "cost %d on concurrency policy %q: a request in flight holds one slot, so cost must be 1 (or left out)", l.Cost, name)
		case l.Cost > pol.Max() && what == "":
			v.errf(p+".cost", "cost %d is above the %s %d of policy %q, so no request could ever be admitted", l.Cost, maxName(pol.Algorithm()), pol.Max(), name)
		case l.Cost > pol.Max():
			v.errf(at, "policy %q (%s) has %s %d, below this limit's cost %d, so no request could ever be admitted", name, what, maxName(pol.Algorithm()), pol.Max(), l.Cost)
		}
	}
	switch {
	case l.Cost < 1:
		v.errf(p+".cost", "cost must be at least 1, got %d", l.Cost)
	case l.Cost > ratelimit.MaxAmount:
		v.errf(p+".cost", "cost must be at most 2^53, got %d", l.Cost)
	}
	if l.Policy == "" {
		v.errf(p+".policy", "policy is required (defined: %s)", strings.Join(c.PolicyNames(), ", "))
	} else {
		usable(p+".policy", l.Policy, "")
	}
	if len(l.Key) == 0 {
		v.errf(p+".key", "key is required (%s, or a list of these)", keyForms())
	}
	// A decoded key is always valid; one built in Go may not be.
	for i, part := range l.Key {
		if _, err := part.MarshalText(); err != nil {
			v.errf(fmt.Sprintf("%s.key[%d]", p, i), "%v", err)
		}
	}
	if l.Plans != nil && l.Plans.From != (httplimit.KeyPart{}) {
		if _, err := l.Plans.From.MarshalText(); err != nil {
			v.errf(p+".plans.from", "%v", err)
		}
	}
	if _, err := l.OnEmptyKey.MarshalText(); err != nil {
		v.errf(p+".on_empty_key", "%v", err)
	}
	if len(l.Overrides) > 0 && len(l.Key) > 1 {
		v.errf(p+".overrides", "overrides match single-part keys only, and this key has %d parts; set overrides for list keys through the admin API", len(l.Key))
	}
	for _, k := range slices.Sorted(maps.Keys(l.Overrides)) {
		kp := mapPath(p+".overrides", k)
		if k == "" {
			v.errf(kp, "an override's key value is empty; empty keys are handled by on_empty_key")
		}
		usable(kp, l.Overrides[k], "override for "+strconv.Quote(k))
	}
	if l.Plans != nil {
		v.plans(p+".plans", l.Plans, usable)
	}
}

func (v *validator) plans(p string, pl *Plans, usable func(at, name, what string)) {
	switch {
	case pl.From == httplimit.KeyPart{}:
		v.errf(p+".from", "from is required: the request value naming the plan (e.g. header:X-Plan)")
	case pl.From.Source == httplimit.SourceConst:
		v.errf(p+".from", "from %q is a constant; it must read the request (header:NAME, query:NAME, ip, route or path)", pl.From)
	}
	if len(pl.Policies) == 0 {
		v.errf(p+".policies", "policies is required: map plan values to policy names (e.g. {free: free-tier, pro: pro-tier})")
	}
	for _, k := range slices.Sorted(maps.Keys(pl.Policies)) {
		kp := mapPath(p+".policies", k)
		if k == "" {
			v.errf(kp, "a plan value is empty")
		}
		usable(kp, pl.Policies[k], "plan "+strconv.Quote(k))
	}
}
