package httplimit

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/sluice-gw/sluice/ratelimit"
)

// EmptyKey says what a limit does with a request whose key is empty: an
// absent header or query parameter, a value that is blank after trimming, or
// a list key with such a part.
type EmptyKey uint8

// The on_empty_key modes.
const (
	// EmptyKeyDeny answers 403 Forbidden without calling the next handler or
	// the store. It is the zero value and the default.
	EmptyKeyDeny EmptyKey = iota
	// EmptyKeyAnonymous puts every empty-key request into one shared budget
	// that no real key value can reach ([AnonymousStateKey]).
	EmptyKeyAnonymous
	// EmptyKeySkip leaves the limit out for that request.
	EmptyKeySkip
)

// parseEmptyKey parses an on_empty_key value: "deny" (or ""), "anonymous" or "skip".
func parseEmptyKey(s string) (EmptyKey, error) {
	switch s {
	case "", "deny":
		return EmptyKeyDeny, nil
	case "anonymous":
		return EmptyKeyAnonymous, nil
	case "skip":
		return EmptyKeySkip, nil
	}
	return 0, fmt.Errorf("unknown on_empty_key %q (allowed: deny, anonymous, skip)", s)
}

// UnmarshalText parses an on_empty_key value: "deny" (or ""),
// "anonymous" or "skip", so that an EmptyKey decodes from configuration
// files.
func (e *EmptyKey) UnmarshalText(text []byte) error {
	v, err := parseEmptyKey(string(text))
	if err != nil {
		return err
	}
	*e = v
	return nil
}

// MarshalText returns the configuration spelling, as String does. It fails
// for a value other than the three modes.
func (e EmptyKey) MarshalText() ([]byte, error) {
	if e > EmptyKeySkip {
		return nil, fmt.Errorf("unknown on_empty_key %s (allowed: deny, anonymous, skip)", e)
	}
	return []byte(e.String()), nil
}

// String returns the configuration spelling: "deny", "anonymous" or "skip".
func (e EmptyKey) String() string {
	switch e {
	case EmptyKeyDeny:
		return "deny"
	case EmptyKeyAnonymous:
		return "anonymous"
	case EmptyKeySkip:
		return "skip"
	}
	return "invalid(" + strconv.Itoa(int(e)) + ")"
}

// Plans chooses a limit's policy from another request value, such as a
// subscription tier in a header.
type Plans struct {
	// From is where the plan name is read; its value is trimmed.
	From KeyPart
	// Policies maps a plan name to its policy. A request whose plan is
	// missing or not in the map falls through to the limit's Policy.
	Policies map[string]*ratelimit.Policy
}

// Limit is one rate limit of a route: a policy applied to a key.
type Limit struct {
	// ID names the limit within its route and is part of every state key, so
	// it must stay the same across restarts and reloads. Empty means the
	// limit's index in Options.Limits ("0", "1", ...).
	ID string
	// Policy is the policy in force when no override or plan applies. Required.
	Policy *ratelimit.Policy
	// Key names the budget a request draws on. Required: at least one part.
	Key Key
	// Cost is the units one request takes; zero means 1. It must not exceed
	// the Max of Policy, of any Overrides policy or of any Plans policy.
	Cost int64
	// OnEmptyKey says what happens when Key is empty; the zero value denies.
	OnEmptyKey EmptyKey
	// Overrides gives fixed key values their own policy. Only a single-part
	// Key may have overrides; list keys get them through Options.Override.
	Overrides map[string]*ratelimit.Policy
	// Plans, if not nil, picks the policy from another request value when no
	// override applies.
	Plans *Plans
	// Shadow makes the limit evaluated, counted and reported to
	// Options.Observe, but never denying and absent from every header.
	Shadow bool
	// SCGHeaders adds the headers Spring Cloud Gateway's RedisRateLimiter
	// sends (SCGHeaderNames) for this limit: its tokens remaining, or -1
	// when no store decided and the request went through; its rate,
	// capacity and cost. The first evaluated limit with SCGHeaders gives
	// them.
	SCGHeaders bool
	// SCGRouteID is the id of the Spring Cloud Gateway route whose budgets
	// the limit shares under a policy with compat scg
	// ([ratelimit.CompatSCG]): SCG 4.2.0 and later name the route in their
	// keys ([ratelimit.SCGRouteKey]). Required when Policy, an Overrides
	// policy or a Plans policy has compat scg; it must be empty when one
	// has compat scg-4.1, whose keys do not name the route. A policy with
	// compat scg that Options.Override picks for a limit without it is
	// ignored ([CanUse]), as one whose Max is below the limit's cost is.
	SCGRouteID string

	// keyPrefix is the state key prefix of the limit under Policy, set by
	// New (appendStateKeyPrefix).
	keyPrefix []byte
}

// ErrInvalidOptions is wrapped by every error New returns.
var ErrInvalidOptions = errors.New("invalid httplimit options")

// Options configures a Middleware. Only Store and, for each limit, Policy
// and Key are required.
type Options struct {
	// Route is the route's id. It is part of every state key, so two
	// Middlewares on one store must use different Routes to keep separate
	// budgets, and it is the value of a `route` key part (empty makes that
	// part, and so the key, empty).
	Route string
	// Limits are the route's limits. A request is admitted when all admit,
	// and then every one consumes; a denied request consumes from none.
	// No limits makes the middleware a pass-through.
	Limits []Limit
	// Store decides the limits. Required.
	Store ratelimit.Store
	// Leases is the store the leases of concurrency limits are released and
	// renewed on; nil means Store. The leases held on one Leases value, by any
	// number of Middlewares, are renewed in one call per renewal (see
	// [Lease]), so Middlewares sharing a store should share this value
	// (a comparable one, such as a pointer). It must reach the leases Store
	// takes.
	Leases ratelimit.LeaseStore
	// Clock turns a Decision's Reset into the Unix time of X-RateLimit-Reset.
	// Nil means the system clock. The store keeps its own clock for decisions.
	Clock ratelimit.Clock
	// IP resolves the client address of `ip` key parts. Nil trusts no proxy:
	// the client is the TCP peer.
	IP *IPResolver
	// Override, if not nil, is consulted first for every limit of every
	// request with the limit's resolved key parts; a non-nil result is the
	// policy in force (the admin API's per-key overrides). It must be fast
	// and must not keep key. It is not consulted for anonymous requests, and
	// a policy whose Max is below the limit's Cost is ignored.
	Override func(ctx context.Context, route string, key []string) *ratelimit.Policy
	// OnStoreError decides what a store error does. It returns nil to let
	// the request through anyway (no rate-limit headers are set), or the
	// answer to give instead, which is written with a problem body. Nil
	// means 503 Service Unavailable with Retry-After: 1.
	OnStoreError func(r Request, err error) *Problem
	// Observe, if not nil, is called once per request that went through the
	// middleware (never when Limits is empty), after the decision (and after a shape-mode hold) and before
	// the next handler, for metrics and logs. The Event is only valid during
	// the call.
	Observe func(r Request, ev *Event)
}

// Outcome is what the middleware did with a request.
type Outcome string

// The outcomes of a request.
const (
	// OutcomeAdmitted: the next handler was called.
	OutcomeAdmitted Outcome = "admitted"
	// OutcomeLimited: 429 Too Many Requests was written.
	OutcomeLimited Outcome = "limited"
	// OutcomeForbidden: a limit's key was empty under EmptyKeyDeny; 403 was written.
	OutcomeForbidden Outcome = "forbidden"
	// OutcomeStoreError: the store failed; OnStoreError decided what followed.
	OutcomeStoreError Outcome = "store_error"
	// OutcomeAbandoned: the client went away while shape mode held the
	// request; the next handler was not called.
	OutcomeAbandoned Outcome = "abandoned"
)

// Verdict is one limit's part in a decision.
type Verdict struct {
	// LimitID is the limit's ID.
	LimitID string
	// Policy is the policy that was in force: an override's, a plan's or the
	// limit's own.
	Policy *ratelimit.Policy
	// Key holds the resolved key parts, raw (hash them before logging if
	// they are sensitive); nil when Anonymous.
	Key []string
	// Anonymous reports an empty key evaluated under EmptyKeyAnonymous.
	Anonymous bool
	// Shadow reports a shadow limit.
	Shadow bool
	// Result is the limit's own verdict.
	Result ratelimit.Verdict
	// Decision is the store's decision for this limit.
	Decision ratelimit.Decision
}

// Event describes the handling of one request, for Options.Observe.
type Event struct {
	// Route is Options.Route.
	Route string
	// Outcome is what the middleware did.
	Outcome Outcome
	// Verdicts has one entry per evaluated limit, in limit order; skipped
	// limits have none, and a forbidden request or a store error has none.
	Verdicts []Verdict
	// Delay is how long shape mode held the request.
	Delay time.Duration
	// Err is the store's error for OutcomeStoreError, else nil.
	Err error
	// ForbiddenLimit, for OutcomeForbidden, is the ID of the limit whose key
	// was empty.
	ForbiddenLimit string
}
