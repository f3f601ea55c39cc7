package config

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
)

// redacted replaces secrets in Effective's output.
const redacted = "<redacted>"

// Effective renders c as YAML with every default spelled out, for `sluice
// check` to show what is in force. Policies keep their file order and map
// keys are sorted. The rls section, when there is one, lists the domains
// read from its envoy_config files in comments; server.tls's files are
// shown as Parse resolved them. admin.token and store.redis.password, when
// set, are shown as "<redacted>". Apart from those, parsing the output
// gives back the same configuration: '$' is written as "$$" so nothing is
// expanded twice.
func (c *Config) Effective() string {
	w := &yamlWriter{}
	s := c.Server
	w.line(0, "server:")
	w.kv(1, "listen", quote(s.Listen))
	w.kv(1, "shutdown_timeout", duration(s.ShutdownTimeout))
	w.kv(1, "trusted_proxies", flowList(s.TrustedProxies))
	w.kv(1, "read_header_timeout", duration(s.ReadHeaderTimeout))
	w.kv(1, "read_timeout", duration(s.ReadTimeout))
	w.kv(1, "write_timeout", duration(s.WriteTimeout))
	w.kv(1, "idle_timeout", duration(s.IdleTimeout))
	w.kv(1, "max_header_bytes", strconv.Itoa(s.MaxHeaderBytes))
	w.kv(1, "max_conns", strconv.Itoa(s.MaxConns))
	w.kv(1, "max_conns_per_ip", strconv.Itoa(s.MaxConnsPerIP))
	w.kv(1, "access_log", accessLogFlow(s.AccessLog))
	w.tlsEffective(&s)

	w.line(0, "admin:")
	w.kv(1, "listen", quote(c.Admin.Listen))
	w.kv(1, "token", secret(c.Admin.Token))

	st := c.Store
	w.line(0, "store:")
	w.kv(1, "type", quote(st.Type))
	w.kv(1, "prefix", quote(st.Prefix))
	w.kv(1, "timeout", duration(st.Timeout))
	w.kv(1, "on_error", quote(string(st.OnError)))
	w.line(1, "redis:")
	w.kv(2, "mode", quote(string(st.Redis.Mode)))
	w.kv(2, "addrs", flowList(RedactAddresses(st.Redis.Addrs)))
	w.kv(2, "master_name", quote(st.Redis.MasterName))
	w.kv(2, "username", quote(st.Redis.Username))
	w.kv(2, "password", secret(st.Redis.Password))
	if st.Redis.SentinelUsername != "" || st.Redis.SentinelPassword != "" {
		w.kv(2, "sentinel_username", quote(st.Redis.SentinelUsername))
		w.kv(2, "sentinel_password", secret(st.Redis.SentinelPassword))
	}
	w.kv(2, "db", strconv.Itoa(st.Redis.DB))
	w.kv(2, "tls", strconv.FormatBool(st.Redis.TLS))
	w.line(1, "memory:")
	w.kv(2, "max_keys", strconv.Itoa(st.Memory.MaxKeys))
	w.line(1, "local_deny:")
	w.kv(2, "enabled", strconv.FormatBool(st.LocalDeny.On()))
	w.kv(2, "max_keys", strconv.Itoa(st.LocalDeny.MaxKeys))

	if len(c.Policies) == 0 {
		w.kv(0, "policies", "{}")
	} else {
		w.line(0, "policies:")
		for _, name := range c.PolicyNames() {
			w.kv(1, quote(name), policyFlow(c.Policies[name]))
		}
	}

	if len(c.Routes) == 0 {
		w.kv(0, "routes", "[]")
	} else {
		w.line(0, "routes:")
		for _, r := range c.Routes {
			w.route(r)
		}
	}
	w.rls(c.RLS)
	w.shedding(c.Shedding)
	w.observe(c)
	return w.String()
}

// match writes m's fields at indent level n.
func (w *yamlWriter) match(n int, m *Match) {
	w.kv(n, "path", quote(m.Path))
	w.kv(n, "methods", flowList(m.Methods))
	w.kv(n, "host", quote(m.Host))
	w.kv(n, "headers", flowMap(m.Headers))
	if len(m.Query) > 0 {
		w.kv(n, "query", flowMap(m.Query))
	}
	w.kv(n, "allow_encoded_slash", strconv.FormatBool(m.AllowEncodedSlash))
}

func (w *yamlWriter) route(r Route) {
	w.kv(1, "- id", quote(r.ID))
	if r.Priority != "" {
		w.kv(2, "priority", quote(r.Priority))
	}
	w.line(2, "match:")
	w.match(3, &r.Match)
	switch {
	case r.ForwardAuth != nil:
		w.line(2, "forward_auth:")
		w.kv(3, "from", quote(r.ForwardAuth.From))
		if m := r.ForwardAuth.Match; m != nil {
			w.line(3, "match:")
			w.match(4, m)
		}
		w.kv(3, "deny_status", strconv.Itoa(r.ForwardAuth.DenyStatus))
		if r.ForwardAuth.From == FromRequest {
			w.kv(2, "strip_prefix", strconv.Itoa(r.StripPrefix))
		}
	case r.Respond == nil:
		if r.Pool != nil {
			w.poolEffective(r.Pool)
		} else {
			w.kv(2, "upstream", quote(RedactAddress(r.Upstream)))
		}
		w.kv(2, "strip_prefix", strconv.Itoa(r.StripPrefix))
		w.kv(2, "timeout", duration(r.Timeout))
		w.kv(2, "preserve_host", strconv.FormatBool(r.PreserveHost))
		w.upstreamTLSEffective(&r)
	default:
		w.line(2, "respond:")
		w.kv(3, "status", strconv.Itoa(r.Respond.Status))
		w.kv(3, "body", quote(r.Respond.Body))
		w.kv(3, "headers", flowMap(r.Respond.Headers))
	}
	if len(r.Limits) == 0 {
		w.kv(2, "limits", "[]")
		return
	}
	w.line(2, "limits:")
	for _, l := range r.Limits {
		w.kv(3, "- policy", quote(l.Policy))
		key := make([]string, len(l.Key))
		for i, p := range l.Key {
			key[i] = p.String()
		}
		if len(key) == 1 {
			w.kv(4, "key", quote(key[0]))
		} else {
			w.kv(4, "key", flowList(key))
		}
		w.kv(4, "cost", strconv.FormatInt(l.Cost, 10))
		w.kv(4, "on_empty_key", quote(l.OnEmptyKey.String()))
		w.kv(4, "overrides", flowMap(l.Overrides))
		if l.Plans != nil {
			w.line(4, "plans:")
			w.kv(5, "from", quote(l.Plans.From.String()))
			w.kv(5, "policies", flowMap(l.Plans.Policies))
		}
		w.kv(4, "shadow", strconv.FormatBool(l.Shadow))
		if l.Headers != "" {
			w.kv(4, "headers", quote(l.Headers))
		}
		if l.SCGRouteID != "" {
			w.kv(4, "scg_route_id", quote(l.SCGRouteID))
		}
	}
}

// policyFlow renders a policy as a flow mapping of the fields that are set.
func policyFlow(p PolicySpec) string {
	parts := []string{"algorithm: " + quote(string(p.Algorithm))}
	add := func(name, val string, set bool) {
		if set {
			parts = append(parts, name+": "+val)
		}
	}
	add("capacity", strconv.FormatInt(p.Capacity, 10), p.Capacity != 0)
	add("limit", strconv.FormatInt(p.Limit, 10), p.Limit != 0)
	add("burst", strconv.FormatInt(p.Burst, 10), p.Burst != 0)
	add("rate", strconv.FormatFloat(p.Rate, 'g', -1, 64), p.Rate != 0)
	add("window", duration(p.Window), p.Window != 0)
	add("mode", quote(string(p.Mode)), p.Mode != "")
	add("max_delay", duration(p.MaxDelay), p.MaxDelay != 0)
	add("compat", quote(string(p.Compat)), p.Compat != "")
	add("lease_ttl", duration(p.LeaseTTL), p.LeaseTTL != 0)
	return "{" + strings.Join(parts, ", ") + "}"
}

// yamlWriter builds indented YAML lines.
type yamlWriter struct{ strings.Builder }

func (w *yamlWriter) line(indent int, s string) {
	w.WriteString(strings.Repeat("  ", indent))
	w.WriteString(s)
	w.WriteByte('\n')
}

func (w *yamlWriter) kv(indent int, k, v string) { w.line(indent, k+": "+v) }

// quote renders s as a YAML double-quoted string in which '$' is escaped for
// Parse's expansion. Go's escapes (\n, \t, \x7f, \u2028…) are YAML escapes
// too.
func quote(s string) string {
	return strconv.Quote(strings.ReplaceAll(s, "$", "$$"))
}

// secret renders a secret: empty, or redacted.
func secret(s string) string {
	if s == "" {
		return `""`
	}
	return quote(redacted)
}

// duration renders d so that time.ParseDuration reads it back.
func duration(d time.Duration) string { return quote(d.String()) }

func flowList(items []string) string {
	q := make([]string, len(items))
	for i, s := range items {
		q[i] = quote(s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

func flowMap(m map[string]string) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, quote(k)+": "+quote(m[k]))
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// Summary returns the one line `sluice check` prints for a valid file, e.g.
// "sluice.yaml: ok: 2 routes, 10 policies, 3 limits, memory store".
func (c *Config) Summary(file string) string {
	limits := 0
	for _, r := range c.Routes {
		limits += len(r.Limits)
	}
	return fmt.Sprintf("%s: ok: %s, %s, %s, %s store", file,
		plural(len(c.Routes), "route"), plural(len(c.Policies), "policy"), plural(limits, "limit"), c.Store.Type)
}

// plural renders "1 route" or "2 routes".
func plural(n int, noun string) string {
	switch {
	case n == 1:
		return "1 " + noun
	case strings.HasSuffix(noun, "y"):
		return fmt.Sprintf("%d %sies", n, strings.TrimSuffix(noun, "y"))
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
