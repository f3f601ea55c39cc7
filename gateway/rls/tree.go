package rls

import (
	"fmt"
	"strings"
	"time"

	commonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"

	"github.com/sluice-gw/sluice/gateway/config"
	"github.com/sluice-gw/sluice/httplimit"
	"github.com/sluice-gw/sluice/ratelimit"
)

// domain is one compiled domain: its descriptor tree and its limits.
type domain struct {
	name  string
	route string // the route-like label of metrics, stats and state keys
	root  node
	// limits are the tree's limits in file order; a limit's index is its
	// place in the admin API's view of the domain.
	limits []*limit
	store  ratelimit.Store
}

// node is one level of the descriptor tree.
type node struct {
	key, value string
	// prefix is a wildcard node's match key (config.RLSMatchKey) without
	// its final '*': an entry matches when its own match key starts with it.
	prefix    string
	share     bool   // share_threshold: one budget for every value prefix matches
	limit     *limit // nil: no limit ends here
	exact     map[[2]string]*node
	keyOnly   map[string]*node
	wildcards []*node // in file order
}

// limit is the limit of one node.
type limit struct {
	id        string // the node's path in the tree, unique in its domain
	policy    *ratelimit.Policy
	unlimited bool
	// banned is requests_per_unit 0: every descriptor that counts is over
	// the limit, and policy (a window of the unit) is never asked.
	banned    bool
	generated bool   // policy was made from a rate_limit block
	shadow    bool   // shadow_mode or quota_mode: never denies
	quota     bool   // quota_mode: an over-limit status has no duration_until_reset
	name      string // rate_limit.name, or the policy's name
	replaces  []string
	// current is the current_limit reported for the limit's own policy.
	current reportedLimit
	// key is the limit's key as the admin API matches key parts: const for
	// a fixed value, any for the others.
	key httplimit.Key
}

// reportedLimit is a RateLimit message's content.
type reportedLimit struct {
	requestsPerUnit uint32
	unitSeconds     int64 // 1, 60, 3600, 86400, ... as envoy's Unit
	multiplier      uint32
	name            string
}

// compile builds the domain of d. policy looks up the sluice policies that
// descriptors name.
func compile(d *config.RLSDomain, policy func(string) *ratelimit.Policy) (*domain, error) {
	dom := &domain{name: d.Domain, route: Route(d.Domain)}
	if err := dom.add(&dom.root, d.Descriptors, "", nil, policy); err != nil {
		return nil, fmt.Errorf("domain %q: %w", d.Domain, err)
	}
	return dom, nil
}

// Route returns the route-like name under which decisions of the domain
// are counted (the route label of sluice_decisions_total), shown on the
// dashboard and addressed in the admin API, and which starts its state
// keys: "rls:" followed by the domain.
func Route(domain string) string { return "rls:" + domain }

// add compiles ds as the children of n; path is n's path and key the key
// parts above it.
func (dom *domain) add(n *node, ds []config.RLSDescriptor, path string, key httplimit.Key, policy func(string) *ratelimit.Policy) error {
	for i := range ds {
		c := &ds[i]
		child := &node{key: c.Key, value: c.Value, share: c.ShareThreshold}
		id := c.Key
		if c.Value != "" {
			id += "_" + c.Value
		}
		if path != "" {
			id = path + "." + id
		}
		part := httplimit.KeyPart{Source: httplimit.SourceHeader, Name: "Descriptor-" + c.Key}
		switch mk := config.RLSMatchKey(c.Key, c.Value); {
		case strings.HasSuffix(mk, "*"):
			child.prefix = strings.TrimSuffix(mk, "*")
			n.wildcards = append(n.wildcards, child)
			if c.ShareThreshold {
				part = httplimit.KeyPart{Source: httplimit.SourceConst, Name: c.Value}
			}
		case c.Value != "":
			if n.exact == nil {
				n.exact = map[[2]string]*node{}
			}
			n.exact[[2]string{c.Key, c.Value}] = child
			part = httplimit.KeyPart{Source: httplimit.SourceConst, Name: c.Value}
		default:
			if n.keyOnly == nil {
				n.keyOnly = map[string]*node{}
			}
			n.keyOnly[c.Key] = child
		}
		ckey := append(append(httplimit.Key(nil), key...), part)
		l, err := dom.limitOf(c, id, ckey, policy)
		if err != nil {
			return err
		}
		child.limit = l
		if err := dom.add(child, c.Descriptors, id, ckey, policy); err != nil {
			return err
		}
	}
	return nil
}

// limitOf returns the limit configured on c, or nil.
func (dom *domain) limitOf(c *config.RLSDescriptor, id string, key httplimit.Key, policy func(string) *ratelimit.Policy) (*limit, error) {
	l := &limit{id: id, shadow: c.ShadowMode || c.QuotaMode, quota: c.QuotaMode && !c.ShadowMode, key: key}
	switch {
	case c.Policy != "":
		l.policy = policy(c.Policy)
		if l.policy == nil {
			return nil, fmt.Errorf("descriptor %s: unknown policy %q", id, c.Policy)
		}
		if l.policy.Compat() != "" {
			// The service has no Spring Cloud Gateway budget to share: a
			// compat policy decides as sluice's own, in the store's own
			// keys under its prefix (a store keeps a compat policy's state
			// in the other product's unprefixed keys).
			cfg := l.policy.Config()
			cfg.Compat = ""
			p, err := ratelimit.NewPolicy(cfg)
			if err != nil {
				return nil, fmt.Errorf("descriptor %s: %w", id, err)
			}
			l.policy = p
		}
		l.name = c.Policy
		l.current = reported(l.policy)
	case c.RateLimit != nil && c.RateLimit.Unlimited:
		l.unlimited, l.name = true, c.RateLimit.Name
	case c.RateLimit != nil:
		rl := c.RateLimit
		secs := config.RLSUnits[strings.ToLower(rl.Unit)]
		// A ban's policy only gives the window: it is never asked.
		p, err := ratelimit.NewPolicy(ratelimit.PolicyConfig{
			Name: dom.name + "." + id, Algorithm: ratelimit.FixedWindow,
			Limit: max(1, rl.RequestsPerUnit), Window: time.Duration(secs) * time.Second,
		})
		if err != nil {
			return nil, fmt.Errorf("descriptor %s: %w", id, err)
		}
		l.policy, l.name, l.generated, l.banned = p, rl.Name, true, rl.RequestsPerUnit == 0
		l.current = reportedLimit{requestsPerUnit: uint32(rl.RequestsPerUnit), unitSeconds: secs, multiplier: 1, name: rl.Name}
	default:
		return nil, nil
	}
	l.replaces = limitReplaces(c)
	dom.limits = append(dom.limits, l)
	return l, nil
}

func limitReplaces(c *config.RLSDescriptor) []string {
	if c.RateLimit == nil {
		return nil
	}
	out := make([]string, len(c.RateLimit.Replaces))
	for i, r := range c.RateLimit.Replaces {
		out[i] = r.Name
	}
	return out
}

// units are the RateLimit units from the longest, in seconds.
var units = [...]int64{365 * 86400, 30 * 86400, 7 * 86400, 86400, 3600, 60, 1}

// reported describes a sluice policy as a RateLimit: requests_per_unit is
// its Max, over its Period in the longest unit that divides it (with a
// multiplier), rounded up to whole seconds.
func reported(p *ratelimit.Policy) reportedLimit {
	secs := max(1, int64((p.Period()+time.Second-1)/time.Second))
	r := reportedLimit{requestsPerUnit: uint32(min(p.Max(), 1<<32-1)), name: p.Name()}
	for _, u := range units {
		if secs%u == 0 && secs/u <= 1<<32-1 {
			r.unitSeconds, r.multiplier = u, uint32(secs/u)
			break
		}
	}
	return r
}

// match finds the limit for a descriptor's entries, as envoyproxy/ratelimit
// does: the node reached by the last entry decides; at each level an exact
// key and value comes first, then a wildcard node in file order (the
// entry's key_value starts with the node's match key before its '*'), then
// the key alone. parts receives the key parts (each entry's value, or the
// pattern of a share_threshold node). It returns nil when no limit ends
// where the entries do.
func (dom *domain) match(entries []*commonv3.RateLimitDescriptor_Entry, parts []string) (*limit, []string) {
	n := &dom.root
	for i, e := range entries {
		key, value := e.GetKey(), e.GetValue()
		next := n.exact[[2]string{key, value}]
		if next == nil {
			mk := key + "_" + value
			for _, w := range n.wildcards {
				if strings.HasPrefix(mk, w.prefix) {
					next = w
					break
				}
			}
		}
		if next == nil {
			next = n.keyOnly[key]
		}
		if next == nil {
			return nil, parts
		}
		if next.share {
			parts = append(parts, next.value)
		} else {
			parts = append(parts, value)
		}
		if i == len(entries)-1 {
			return next.limit, parts
		}
		n = next
	}
	return nil, parts
}
