package scgimport

import (
	"fmt"
	"strconv"
	"strings"
)

// quote writes s as a YAML double-quoted string.
func quote(s string) string { return strconv.Quote(s) }

// lit quotes a literal value: sluice reads ${...} in every string, so a
// '$' is written "$$".
func lit(s string) string { return quote(strings.ReplaceAll(s, "$", "$$")) }

// write renders the translation as a sluice configuration.
func (t *translator) write() string {
	var b strings.Builder
	w := func(indent int, format string, args ...any) {
		b.WriteString(strings.Repeat("  ", indent))
		fmt.Fprintf(&b, format, args...)
		b.WriteByte('\n')
	}
	w(0, "# Translated by `sluice import scg` from %s.", strings.Join(t.files, ", "))
	if len(t.profiles) > 0 {
		w(0, "# Active profiles: %s.", strings.Join(t.profiles, ", "))
	}
	compat := "scg"
	switch {
	case t.o.Native || len(t.policies) == 0:
	case t.legacy:
		compat = "scg-4.1"
		w(0, "# Budgets shared with SCG up to 4.1.x: keys request_rate_limiter.{<key>} (compat scg-4.1).")
	default:
		w(0, "# Budgets shared with SCG 4.2.0 and later: keys request_rate_limiter.{<scg_route_id>.<key>} (compat scg).")
	}
	if t.listen != "" {
		w(0, "server:")
		w(1, "listen: %s", quote(t.listen))
	}
	if len(t.policies) > 0 {
		s := t.store
		w(0, "store:")
		w(1, "type: redis")
		w(1, "on_error: allow                 # as SCG: admit while Redis fails (X-RateLimit-Remaining: -1)")
		w(1, "redis:")
		w(2, "mode: %s", s.mode)
		addrs := make([]string, len(s.addrs))
		for i, a := range s.addrs {
			addrs[i] = quote(a)
		}
		w(2, "addrs: [%s]", strings.Join(addrs, ", "))
		if s.master != "" {
			w(2, "master_name: %s", quote(s.master))
		}
		if s.username != "" {
			w(2, "username: %s", quote(s.username))
		}
		if s.password != "" {
			w(2, "password: %s", quote(s.password))
		}
		if s.sentinelUser != "" {
			w(2, "sentinel_username: %s", quote(s.sentinelUser))
		}
		if s.sentinelPass != "" {
			w(2, "sentinel_password: %s", quote(s.sentinelPass))
		}
		if s.db != 0 {
			w(2, "db: %d", s.db)
		}
		if s.tls {
			w(2, "tls: true")
		}
		w(0, "policies:")
		for _, p := range t.policies {
			if t.o.Native {
				w(1, "%s: {algorithm: token_bucket, capacity: %d, rate: %d}", p.name, p.burst, p.rate)
			} else {
				w(1, "%s: {algorithm: token_bucket, capacity: %d, rate: %d, compat: %s}", p.name, p.burst, p.rate, compat)
			}
		}
	}
	w(0, "routes:")
	if len(t.routes) == 0 {
		w(1, "[]")
	}
	for _, r := range t.routes {
		if r.comment != "" {
			w(1, "# %s", r.comment)
		}
		w(1, "- id: %s", quote(r.id))
		w(2, "match:")
		w(3, "path: %s", lit(r.path))
		if len(r.methods) > 0 {
			w(3, "methods: [%s]", strings.Join(r.methods, ", "))
		}
		if r.host != "" {
			w(3, "host: %s", lit(r.host))
		}
		if len(r.headers) > 0 {
			hs := make([]string, len(r.headers))
			for i, h := range r.headers {
				hs[i] = lit(h[0]) + ": " + lit(h[1])
			}
			w(3, "headers: {%s}", strings.Join(hs, ", "))
		}
		if len(r.query) > 0 {
			qs := make([]string, len(r.query))
			for i, q := range r.query {
				qs[i] = lit(q[0]) + ": " + lit(q[1])
			}
			w(3, "query: {%s}", strings.Join(qs, ", "))
		}
		if r.lb != "" {
			w(2, "# lb://%s: sluice has no service discovery; list the service's instances as targets, or set %s", r.lb, r.lbVar)
			w(2, "pool:")
			w(3, "balance: round_robin")
			w(3, "targets: [%s]", quote("${"+r.lbVar+"}"+strings.ReplaceAll(r.upstream, "$", "$$")))
		} else {
			w(2, "upstream: %s", lit(r.upstream))
		}
		if r.strip > 0 {
			w(2, "strip_prefix: %d", r.strip)
		}
		if len(r.limits) > 0 {
			w(2, "limits:")
		}
		for _, l := range r.limits {
			w(3, "# %s", l.comment)
			w(3, "- policy: %s", l.policy)
			w(4, "key: %s", lit(l.key))
			w(4, "cost: %d", l.cost)
			w(4, "on_empty_key: %s", l.onEmpty)
			if l.headers {
				w(4, "headers: scg")
			}
			if !t.o.Native && !t.legacy {
				w(4, "scg_route_id: %s", lit(l.scgRoute))
			}
		}
	}
	return b.String()
}
