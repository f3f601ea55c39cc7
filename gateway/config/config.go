package config

import (
	"maps"
	"net/netip"
	"net/url"
	"slices"
	"time"

	"github.com/sluice-gw/sluice/httplimit"
	"github.com/sluice-gw/sluice/ratelimit"
)

// Config is a whole sluice configuration file. The comments on its fields
// and on the types below are the configuration reference: each YAML key is
// the field's `yaml` tag. Times are Go durations ("50ms", "1h30m"). Any
// string may use ${NAME} or ${NAME:-default} (see [Parse]).
//
// Top-level fields whose names start with "x-" are ignored, so they can
// hold YAML anchors to reuse (x-limits: &limits [...]).
//
// A Config returned by [Load] or [Parse] is valid and has its defaults
// applied. It is plain data: safe for concurrent reads, and not to be
// modified once handed to a gateway.
type Config struct {
	// Server is the gateway's public listener.
	Server Server `yaml:"server"`
	// Admin is the listener for health, metrics, the admin API and the
	// dashboard (docs/operations.md, "The admin listener").
	Admin Admin `yaml:"admin"`
	// Store is where limit state lives.
	Store Store `yaml:"store"`
	// Policies are named, reusable limits, referred to by routes' limits,
	// overrides and plans. A name is letters, digits, '.', '_' and '-'.
	Policies map[string]PolicySpec `yaml:"policies"`
	// Routes are tried in file order; the first whose match holds wins. A
	// request no route matches gets 404. At least one route is required.
	Routes []Route `yaml:"routes"`
	// RLS, if set, serves Envoy's rate limit service (gRPC) on its own
	// listener, deciding with the same policies and store (docs/envoy.md).
	RLS *RLS `yaml:"rls"`
	// Shedding turns on load shedding by route priority (shedding.go);
	// nil when the file has no shedding section.
	Shedding *Shedding `yaml:"shedding"`
	// Log configures the process log and the access log's format; see [Log].
	Log Log `yaml:"log"`
	// Tracing configures OpenTelemetry tracing (default off); see [Tracing].
	Tracing Tracing `yaml:"tracing"`
	// Reload configures reloading on a file change (default off; SIGHUP
	// and POST /admin/v1/reload always work); see [Reload].
	Reload Reload `yaml:"reload"`

	policyOrder []string                     // policy names in file order
	compiled    map[string]*ratelimit.Policy // set by a successful validation
	warnings    Errors                       // set by a successful validation
}

// Server configures the public listener.
type Server struct {
	// Listen is the address to serve on, host:port. Default "127.0.0.1:8080";
	// use ":8080" to listen on every interface.
	Listen string `yaml:"listen"`
	// ShutdownTimeout bounds the drain on SIGTERM/SIGINT: requests still
	// running after it are cut off and logged. Default 15s.
	ShutdownTimeout time.Duration `yaml:"shutdown_timeout"`
	// TrustedProxies are the addresses (CIDR prefixes such as "10.0.0.0/8", or
	// single IPs) whose X-Forwarded-For is believed when working out the
	// client IP for `ip` keys. Default none: the TCP peer is the client.
	TrustedProxies []string `yaml:"trusted_proxies"`
	// ReadHeaderTimeout bounds reading a request's headers (slowloris
	// protection). Default 5s.
	ReadHeaderTimeout time.Duration `yaml:"read_header_timeout"`
	// ReadTimeout bounds reading a whole request, body included. Default 0:
	// no bound, so slow uploads work; set it if clients are untrusted.
	ReadTimeout time.Duration `yaml:"read_timeout"`
	// WriteTimeout bounds writing a response. Default 0: no bound, so
	// streaming responses work; routes' timeout bounds the upstream wait.
	WriteTimeout time.Duration `yaml:"write_timeout"`
	// IdleTimeout is how long an idle keep-alive connection stays open.
	// Default 60s.
	IdleTimeout time.Duration `yaml:"idle_timeout"`
	// MaxHeaderBytes bounds the request line and headers together; a larger
	// request gets 431. Default 16384 (16 KiB; docs/operations.md,
	// "Answers sluice gives itself").
	MaxHeaderBytes int `yaml:"max_header_bytes"`
	// MaxConns bounds the connections the public listener holds open at
	// once; past it, a new connection is answered 503 (problem+json,
	// Retry-After: 1) and closed. Default 4096: each open connection costs
	// memory (docs/operations.md, "Connections"). Takes effect on restart.
	MaxConns int `yaml:"max_conns"`
	// MaxConnsPerIP bounds the public connections open at once from one
	// client address (IPv6 grouped by /64); past it, a new connection is
	// answered 429 and closed. Default 0: no bound per address, because
	// clients behind a proxy, load balancer or ingress all share its
	// address. Takes effect on restart.
	MaxConnsPerIP int `yaml:"max_conns_per_ip"`
	// AccessLog configures the access log (default off); see [AccessLog].
	AccessLog AccessLog `yaml:"access_log"`
	// TLS, when set, serves HTTPS beside the cleartext listener; see [TLS].
	TLS *TLS `yaml:"tls"`
	// HTTP2 configures HTTP/2; see [HTTP2].
	HTTP2 HTTP2 `yaml:"http2"`
}

// TrustedPrefixes returns TrustedProxies parsed; a single IP becomes a /32 or
// /128 prefix. Entries that do not parse are left out ([Config.Validate]
// reports them).
func (s Server) TrustedPrefixes() []netip.Prefix {
	var out []netip.Prefix
	for _, t := range s.TrustedProxies {
		if p, ok := parsePrefix(t); ok {
			out = append(out, p)
		}
	}
	return out
}

// parsePrefix parses a CIDR prefix (masked) or a single address.
func parsePrefix(s string) (netip.Prefix, bool) {
	if p, err := netip.ParsePrefix(s); err == nil {
		return p.Masked(), true
	}
	if a, err := netip.ParseAddr(s); err == nil && a.Zone() == "" {
		return netip.PrefixFrom(a, a.BitLen()), true
	}
	return netip.Prefix{}, false
}

// Admin configures the admin listener.
type Admin struct {
	// Listen is the admin address, host:port. Default "127.0.0.1:9090". It
	// serves /healthz, /readyz and /metrics without a token.
	Listen string `yaml:"listen"`
	// Token is the Bearer token (or HTTP Basic password) everything under
	// /admin/ needs. Empty, the default, turns the admin API and dashboard
	// off (404). Keep it out of the file: token: "${SLUICE_ADMIN_TOKEN}".
	Token string `yaml:"token"`
}

// Store types.
const (
	StoreMemory = "memory"
	StoreRedis  = "redis"
)

// OnError is store.on_error: what decides requests while the store is
// unavailable (docs/semantics.md §6.3). Its values are OnErrorLocal,
// OnErrorAllow and OnErrorDeny, spelled as store/fallback's Mode values;
// config does not import the store packages (docs/layout.md), so the
// gateway converts each one to its fallback.Mode. [Parse] refuses any other
// value at its line, and [Config.Validate] refuses it in a Config built in
// Go.
type OnError string

// The on_error modes.
const (
	// OnErrorLocal decides with this instance's in-memory store and the same
	// policies (docs/semantics.md §6.4); a memory store, having no store
	// more local, answers 503. It is the default.
	OnErrorLocal OnError = "local"
	// OnErrorAllow admits every request, uncounted.
	OnErrorAllow OnError = "allow"
	// OnErrorDeny answers 503.
	OnErrorDeny OnError = "deny"
)

// RedisMode is store.redis.mode: the Redis deployment the store talks to.
// Its values are RedisStandalone, RedisSentinel and RedisCluster, spelled
// as store/redis's Mode values; config does not import the store packages
// (docs/layout.md), so the gateway converts each one to its redis.Mode.
// When store.type is redis, [Parse] refuses any other value at its line,
// and [Config.Validate] refuses it in a Config built in Go.
type RedisMode string

// The Redis modes.
const (
	// RedisStandalone is one Redis server at exactly one address. It is the
	// default.
	RedisStandalone RedisMode = "standalone"
	// RedisSentinel is a master found through Sentinel by its master name.
	RedisSentinel RedisMode = "sentinel"
	// RedisCluster is a Redis Cluster, found through any of its nodes.
	RedisCluster RedisMode = "cluster"
)

// Store configures where limit state lives.
type Store struct {
	// Type is "memory" (the default: state in this process only) or "redis"
	// (state shared by every instance using the same Redis and prefix).
	Type string `yaml:"type"`
	// Prefix starts every Redis key. Default "sluice". It may not contain
	// '{', '}' or whitespace, which would change Cluster hash slots.
	Prefix string `yaml:"prefix"`
	// Timeout bounds one store call, retries included. Past it the call is a
	// store failure, handled by OnError. Default 50ms.
	Timeout time.Duration `yaml:"timeout"`
	// OnError is what happens while the store fails: "local" (default: each
	// instance decides with its own in-memory limiter), "allow" (admit
	// everything) or "deny" (answer 503).
	OnError OnError `yaml:"on_error"`
	// Redis is the Redis connection, used when Type is "redis" and ignored
	// otherwise.
	Redis Redis `yaml:"redis"`
	// Memory configures the in-process store: the store itself when Type is
	// "memory", and each instance's local fallback when Type is "redis" and
	// OnError is "local".
	Memory Memory `yaml:"memory"`
	// LocalDeny lets each instance answer requests for keys Redis has
	// denied, until the denial's Retry-After has passed, without asking
	// Redis (docs/semantics.md §6.6). Used when Type is "redis" and ignored
	// otherwise.
	LocalDeny LocalDeny `yaml:"local_deny"`
}

// LocalDeny configures the answers an instance gives itself for keys known
// denied.
type LocalDeny struct {
	// Enabled turns it on; nil (left out) means true. It never admits a
	// request Redis would deny; a key denied on an instance stays denied
	// there until its Retry-After has passed, even if another instance or
	// an admin reset frees budget sooner.
	Enabled *bool `yaml:"enabled"`
	// MaxKeys caps the keys each instance remembers as denied, at least 1.
	// Default 100000. Past it the remembered key that expires first makes
	// room. A remembered key costs about 100 bytes whatever its length.
	MaxKeys int `yaml:"max_keys"`
}

// On reports whether local denials are enabled: Enabled, or true when it
// is not set.
func (l LocalDeny) On() bool { return l.Enabled == nil || *l.Enabled }

// Memory configures the in-process store.
type Memory struct {
	// MaxKeys caps the number of keys tracked at once, at least 1. Default
	// 1048576. Past the cap, no tracked key is evicted: new keys share one
	// overflow budget per policy, which is stricter than their own budgets
	// and never unlimited, until idle keys expire and make room; the first
	// overflow is logged and every one counted (sluice_store_keys,
	// sluice_store_key_overflow_total). A tracked key costs about 85 bytes
	// whatever its length (docs/operations.md, "The key cap").
	MaxKeys int `yaml:"max_keys"`
}

// Redis configures the Redis connection.
type Redis struct {
	// Mode is "standalone" (default; exactly one address), "sentinel" (the
	// addresses are Sentinels; MasterName is required) or "cluster" (the
	// addresses are any nodes of the cluster, from which it learns the rest).
	Mode RedisMode `yaml:"mode"`
	// Addrs are host:port addresses. Required when store.type is redis.
	Addrs []string `yaml:"addrs"`
	// MasterName is the Sentinel master set name; sentinel mode only.
	MasterName string `yaml:"master_name"`
	// Username is the ACL user name; empty means the default user.
	Username string `yaml:"username"`
	// Password is the ACL or requirepass password; empty means none. Keep it
	// out of the file: password: "${REDIS_PASSWORD:-}".
	Password string `yaml:"password"`
	// SentinelUsername and SentinelPassword authenticate to the sentinels
	// themselves (their requirepass, or an ACL user); sentinel mode only.
	// Empty means none. Keep the password out of the file:
	// sentinel_password: "${REDIS_SENTINEL_PASSWORD:-}".
	SentinelUsername string `yaml:"sentinel_username"`
	SentinelPassword string `yaml:"sentinel_password"`
	// DB is the database number, ≥ 0. Cluster mode supports only 0.
	DB int `yaml:"db"`
	// TLS turns on TLS to Redis (system roots, server name from the address).
	TLS bool `yaml:"tls"`
}

// PolicySpec is one named policy as written in the file; [Config.Policy]
// returns it compiled. Which fields apply depends on the algorithm:
//
//	token_bucket    capacity, rate
//	leaky_bucket    capacity, rate, mode, max_delay (shape only)
//	fixed_window    limit, window
//	sliding_log     limit, window
//	sliding_window  limit, window
//	gcra            burst, rate
//
// The others must be left out.
type PolicySpec struct {
	// Algorithm is token_bucket, leaky_bucket, fixed_window, sliding_log,
	// sliding_window or gcra (docs/semantics.md §2), or concurrency: at most
	// limit requests of a key in flight at once (docs/algorithms.md).
	// Required.
	Algorithm ratelimit.Algorithm `yaml:"algorithm"`
	// Capacity is the bucket size (token_bucket, leaky_bucket): an integer
	// from 1 to 2^53.
	Capacity int64 `yaml:"capacity"`
	// Limit is the number of units per window (window algorithms), or of
	// requests in flight (concurrency): an integer from 1 to 2^53.
	Limit int64 `yaml:"limit"`
	// Burst is gcra's burst: an integer from 1 to 2^53.
	Burst int64 `yaml:"burst"`
	// Rate is in units per second: tokens added (token_bucket), units leaked
	// (leaky_bucket) or emission rate (gcra). A positive number (0.001 is one
	// per 1000 s) or a string "N/PERIOD" such as "100/1m", "5/s" or "1000/h".
	// From 0.000001 to 1000000 per second; it may exceed capacity.
	Rate float64 `yaml:"rate,rate"`
	// Window is the window length (window algorithms), a duration > 0 of at
	// most 366 days, in whole microseconds. Windows are aligned to the Unix
	// epoch.
	Window time.Duration `yaml:"window"`
	// Mode is leaky_bucket's mode: "police" (default; admit or deny at once)
	// or "shape" (hold each admitted request until its turn, so the
	// upstream sees an even rate).
	Mode ratelimit.Mode `yaml:"mode"`
	// MaxDelay bounds how long shape mode holds a request; a longer wait is a
	// denial. A duration > 0; left out, the wait is bounded only by the
	// capacity.
	MaxDelay time.Duration `yaml:"max_delay"`
	// Compat, on a token_bucket with a whole rate, keeps the budget in
	// Spring Cloud Gateway's own Redis keys and arithmetic (whole seconds),
	// so that SCG instances and sluice share it during a migration
	// (docs/migrating-from-scg.md): "scg" for SCG 4.2.0 and later, whose
	// keys name the route (request_rate_limiter.{<route id>.<key>}.tokens
	// and .timestamp; each limit names the SCG route in scg_route_id),
	// "scg-4.1" for SCG up to 4.1.x (request_rate_limiter.{<key>}.tokens
	// and .timestamp). It needs store.type redis; a limit using it needs a
	// single-part key and no on_empty_key anonymous. Default empty:
	// sluice's own state.
	Compat ratelimit.Compat `yaml:"compat"`
	// LeaseTTL is how long a concurrency lease lives when the instance
	// holding it stops renewing it (it died mid-request); the gateway
	// renews the leases of longer requests. A whole number of milliseconds,
	// at least 100ms. Concurrency only; default 30s.
	LeaseTTL time.Duration `yaml:"lease_ttl"`
}

// config returns the spec as a ratelimit.PolicyConfig named name.
func (s PolicySpec) config(name string) ratelimit.PolicyConfig {
	return ratelimit.PolicyConfig{
		Name: name, Algorithm: s.Algorithm,
		Capacity: s.Capacity, Limit: s.Limit, Burst: s.Burst,
		Rate: s.Rate, Window: s.Window, Mode: s.Mode, MaxDelay: s.MaxDelay,
		Compat:   s.Compat,
		LeaseTTL: s.LeaseTTL,
	}
}

// Route is one route: which requests it takes, where they go, and the limits
// they pass first.
type Route struct {
	// ID names the route in metrics, the admin API and limit state. Required
	// and unique; letters, digits, '.', '_' and '-'.
	ID string `yaml:"id"`
	// Match says which requests the route takes.
	Match Match `yaml:"match"`
	// Upstream is the URL requests are forwarded to: http or https
	// (HTTP/1.1), h2c (HTTP/2 by prior knowledge) or h2 (HTTP/2 over TLS),
	// a host, optionally a port and a base path (the forwarded path is
	// base + request path). No query or fragment. Exactly one of
	// Upstream, Pool, Respond and ForwardAuth is required.
	Upstream string `yaml:"upstream"`
	// Pool forwards to several targets instead of one; see [Pool].
	Pool *Pool `yaml:"pool"`
	// UpstreamTLS configures TLS to the upstream (https and h2 targets);
	// see [UpstreamTLS].
	UpstreamTLS *UpstreamTLS `yaml:"upstream_tls"`
	// StripPrefix is the number of leading path segments removed before
	// forwarding (stripping every segment leaves "/"). On a forward_auth
	// route with from: request, the segments removed from the auth
	// request's path to get the original path. Default 0.
	StripPrefix int `yaml:"strip_prefix"`
	// Priority is critical, high, normal or low: the order in which load
	// shedding (the shedding section) spares requests. Default normal.
	// forward_auth routes take none and are never shed.
	Priority string `yaml:"priority"`
	// Timeout is the upstream answer deadline; past it the client gets 504.
	// For a gRPC request it bounds the whole call, streams included, and
	// the shorter of it and the client's grpc-timeout is sent upstream;
	// past it the call ends with DEADLINE_EXCEEDED (docs/operations.md,
	// "gRPC"). Upstream routes only. Default 30s.
	Timeout time.Duration `yaml:"timeout"`
	// PreserveHost forwards the client's Host header instead of the
	// upstream's host. Upstream routes only. Default false.
	PreserveHost bool `yaml:"preserve_host"`
	// Respond makes the gateway answer itself, with no upstream.
	Respond *Respond `yaml:"respond"`
	// ForwardAuth makes the route a decision endpoint for a forward-auth
	// proxy (Traefik ForwardAuth, Caddy forward_auth, nginx auth_request,
	// Envoy ext_authz HTTP): Match selects the proxy's auth requests, the
	// limits decide the original request the proxy describes, and the
	// answer is 200 with the rate-limit headers or the denial
	// (docs/forward-auth.md).
	ForwardAuth *ForwardAuth `yaml:"forward_auth"`
	// Limits must all admit a request; a denied request consumes from none.
	// A route may have no limits (a plain proxy route).
	Limits []Limit `yaml:"limits"`
}

// UpstreamURL returns Upstream parsed, or nil when the route has no
// upstream or it does not parse ([Config.Validate] reports that).
func (r *Route) UpstreamURL() *url.URL {
	if r.Upstream == "" {
		return nil
	}
	u, err := url.Parse(r.Upstream)
	if err != nil {
		return nil
	}
	return u
}

// Match is a route's request matcher. Every given condition must hold.
type Match struct {
	// Path is an exact path ("/hello") or a glob where "*" is exactly one
	// segment and "**", only as the last segment, any rest: "/api/**"
	// matches /api, /api/ and everything below. Required; starts with "/".
	// It is compared segment by segment with the decoded request path. A
	// request path with a "." or ".." segment, an empty segment (a trailing
	// slash aside) or a ";" matches no route (docs/operations.md, "Path
	// rules"), so the pattern has none either.
	Path string `yaml:"path"`
	// Methods are the accepted methods, uppercase (GET, HEAD, POST, PUT,
	// PATCH, DELETE, OPTIONS, CONNECT, TRACE). Empty means any. GET takes
	// HEAD too, as nginx's limit_except GET does: a HEAD runs the
	// upstream's GET handler, so it counts against the same limits
	// ([Config.Warnings] reports a later HEAD route this leaves unreached).
	Methods []string `yaml:"methods"`
	// Host is the required Host, compared without the port, ignoring case
	// and one trailing dot. Empty means any.
	Host string `yaml:"host"`
	// Headers are required header values, compared exactly. Empty means none.
	// A "Host" entry is compared with the request's host as Host is.
	Headers map[string]string `yaml:"headers"`
	// Query are required query parameters: name → value, compared with
	// each of the parameter's values decoded; an empty value requires only
	// that the parameter is present. Empty means none. (Spring Cloud
	// Gateway's Query predicate with a literal value, or none.)
	Query map[string]string `yaml:"query"`
	// AllowEncodedSlash lets the route take paths holding an encoded "/" or
	// "\" (%2F, %5C, any case; or a literal "\"), which no route takes
	// otherwise. The escape stays part of its segment for Path and for
	// StripPrefix alike, and is forwarded as it came: allow it only when
	// the upstream treats %2F as data (such as "group%2Fproject"), not as a
	// separator. Default false.
	AllowEncodedSlash bool `yaml:"allow_encoded_slash"`
}

// ForwardAuth is a forward-auth route's reading of the original request
// (docs/forward-auth.md). Its limits' keys read the original request: its
// path, query and host, the auth request's headers (the proxies pass the
// original request's headers on), and the client IP from X-Forwarded-For
// through server.trusted_proxies, as for proxied traffic.
type ForwardAuth struct {
	// From names where the original method, URI and host are read.
	// Required, one of:
	//   - "x-forwarded": X-Forwarded-Method, X-Forwarded-Uri and
	//     X-Forwarded-Host (Traefik, Caddy, or nginx setting them);
	//   - "x-original": X-Original-Method, X-Original-URI and
	//     X-Forwarded-Host (nginx's auth_request convention);
	//   - "request": the auth request itself, its path after strip_prefix
	//     segments (Envoy ext_authz HTTP, which sends the original method,
	//     path_prefix + path, and Host).
	// With a header source, each of the three headers must be present
	// exactly once, else the answer is 400: the proxy must set them, and
	// the endpoint must be reachable only from the proxy.
	From string `yaml:"from"`
	// Match, when given, must also hold for the original request. When it
	// does not, the next forward_auth route is tried (never an upstream or
	// respond route); past the last, the answer is 404. Default: any
	// original request that passes the path rules.
	Match *Match `yaml:"match"`
	// DenyStatus is the status of a rate-limited answer: 429 (default),
	// or 403 or 401 for nginx's auth_request, which passes on only 401
	// and 403 (docs/forward-auth.md maps it back to 429).
	DenyStatus int `yaml:"deny_status"`
}

// Forward-auth sources, ForwardAuth.From's values.
const (
	FromXForwarded = "x-forwarded"
	FromXOriginal  = "x-original"
	FromRequest    = "request"
)

// Respond is a fixed answer given by the gateway itself.
type Respond struct {
	// Status is the HTTP status, 200 to 599. Default 200.
	Status int `yaml:"status"`
	// Body is the response body, sent as is. It must be empty with status
	// 204 or 304, which have no body.
	Body string `yaml:"body"`
	// Headers are response headers to set. Default none. Values may not
	// contain control characters other than tab (no CR or LF).
	Headers map[string]string `yaml:"headers"`
}

// Limit is one limit on a route.
type Limit struct {
	// Policy is the name of the policy in force for keys that no override or
	// plan picks. Required.
	Policy string `yaml:"policy"`
	// Key picks the budget: header:NAME | query:NAME | ip | route | path |
	// const:TEXT | cookie:NAME | client_cert:FIELD (every source package
	// keysource knows), or a list of these whose values together form the
	// key. Required.
	Key httplimit.Key `yaml:"key"`
	// Cost is what one request consumes, an integer ≥ 1. It may not exceed
	// the limit (capacity, limit or burst) of any policy this limit can use.
	// Default 1.
	Cost int64 `yaml:"cost"`
	// OnEmptyKey is what happens to a request whose key is empty (absent or
	// blank): "deny" (default; 403), "anonymous" (one budget shared by all
	// such requests) or "skip" (this limit does not apply).
	OnEmptyKey httplimit.EmptyKey `yaml:"on_empty_key"`
	// Overrides give a fixed policy to some key values: {demo1234: vip}. They
	// match single-part keys only; list keys get overrides through the admin
	// API.
	Overrides map[string]string `yaml:"overrides"`
	// Plans picks the policy from another request value, e.g. a plan header.
	Plans *Plans `yaml:"plans"`
	// Shadow evaluates, counts and reports the limit but never denies;
	// shadow limits appear in no response header. Default false.
	Shadow bool `yaml:"shadow"`
	// Headers "scg" adds the headers Spring Cloud Gateway's rate limiter
	// sends: X-RateLimit-Remaining (-1 when the store failed and the
	// request went through), X-RateLimit-Replenish-Rate,
	// X-RateLimit-Burst-Capacity and X-RateLimit-Requested-Tokens
	// (docs/migrating-from-scg.md). The first such limit of a route gives
	// them. Default empty: sluice's headers only.
	Headers string `yaml:"headers"`
	// SCGRouteID is the id of the Spring Cloud Gateway route whose budgets
	// the limit shares, for a policy with compat scg (SCG 4.2.0 and later,
	// whose keys name the route: request_rate_limiter.{<route id>.<key>}).
	// Required when the limit's policy, an override or a plan has compat
	// scg; not allowed with compat scg-4.1 (docs/migrating-from-scg.md).
	SCGRouteID string `yaml:"scg_route_id"`
}

// Plans picks a limit's policy from a request value. Precedence, first match
// wins: an override set through the admin API, Overrides, Plans, Policy.
type Plans struct {
	// From is the request value naming the plan: header:NAME | query:NAME |
	// ip | route | path | cookie:NAME | client_cert:FIELD. Required.
	From httplimit.KeyPart `yaml:"from"`
	// Policies maps plan values to policy names: {free: free-tier, pro:
	// pro-tier}. A value not listed falls back to the limit's policy.
	// Required, not empty.
	Policies map[string]string `yaml:"policies"`
}

// CompiledPolicies returns every valid policy compiled, by name: a new map
// each call, sharing the immutable *ratelimit.Policy values. For a Config
// from [Load] or [Parse] these are the policies built during validation.
func (c *Config) CompiledPolicies() map[string]*ratelimit.Policy {
	if c.compiled != nil {
		return maps.Clone(c.compiled)
	}
	out := make(map[string]*ratelimit.Policy, len(c.Policies))
	for name, spec := range c.Policies {
		if p, err := ratelimit.NewPolicy(spec.config(name)); err == nil {
			out[name] = p
		}
	}
	return out
}

// Policy returns the compiled policy called name, or nil if there is no
// valid policy of that name.
func (c *Config) Policy(name string) *ratelimit.Policy {
	if c.compiled != nil {
		return c.compiled[name]
	}
	spec, ok := c.Policies[name]
	if !ok {
		return nil
	}
	p, err := ratelimit.NewPolicy(spec.config(name))
	if err != nil {
		return nil
	}
	return p
}

// PolicyNames returns the policy names in file order (sorted for a Config
// built in Go).
func (c *Config) PolicyNames() []string {
	if len(c.policyOrder) == len(c.Policies) {
		ok := true
		for _, n := range c.policyOrder {
			if _, found := c.Policies[n]; !found {
				ok = false
				break
			}
		}
		if ok {
			return slices.Clone(c.policyOrder)
		}
	}
	return slices.Sorted(maps.Keys(c.Policies))
}
