package rls

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	commonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/sluice-gw/sluice/gateway/config"
	"github.com/sluice-gw/sluice/httplimit"
	"github.com/sluice-gw/sluice/ratelimit"
)

// Options are what a Service takes besides its configuration. Store is
// required; the other fields' zero values work.
type Options struct {
	// Store returns the store a domain decides on, given the domain's
	// route-like name ([Route]); store.on_error is applied inside it, as
	// for the gateway's routes. Required.
	Store func(route string) ratelimit.Store
	// Policy returns the sluice policy a descriptor names. Required when a
	// descriptor names one.
	Policy func(name string) *ratelimit.Policy
	// Clock is the time of X-RateLimit-Reset; nil means the system clock.
	Clock ratelimit.Clock
	// Override, if not nil, is consulted for every matched limit but a ban
	// (requests_per_unit 0) with the domain's route and the descriptor's
	// values (the admin API's per-key overrides); a policy whose Max is
	// below the cost is ignored.
	Override func(ctx context.Context, route string, key []string) *ratelimit.Policy
	// Observe, if not nil, is called once per decided request with a
	// domain, after the decision, as [httplimit.Options.Observe] is: for
	// metrics, the dashboard's statistics and logs. The Event is valid only
	// during the call.
	Observe func(ctx context.Context, ev *httplimit.Event)
	// UnknownDomain, if not nil, is called once per request whose domain
	// the configuration does not define (answered OK without a limit), with
	// that domain: for a metric.
	UnknownDomain func(ctx context.Context, domain string)
	// Logger receives store failures; nil discards them.
	Logger *slog.Logger
}

// Service decides ShouldRateLimit requests against the domains of one
// configuration. Create one with New; it is safe for concurrent use.
type Service struct {
	rlsv3.UnimplementedRateLimitServiceServer

	domains        map[string]*domain
	order          []*domain
	maxDescriptors int
	maxEntries     int
	o              Options
}

var _ rlsv3.RateLimitServiceServer = (*Service)(nil)

// New compiles the domains of c (a validated, defaulted rls section, with
// the envoy_config files [config.Load] read) into a Service.
func New(c *config.RLS, o Options) (*Service, error) {
	if c == nil {
		return nil, errors.New("rls: no rls section")
	}
	if o.Store == nil {
		return nil, errors.New("rls: Options.Store is required")
	}
	if o.Policy == nil {
		o.Policy = func(string) *ratelimit.Policy { return nil }
	}
	if o.Clock == nil {
		o.Clock = ratelimit.SystemClock{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Service{domains: map[string]*domain{}, maxDescriptors: c.MaxDescriptors, maxEntries: c.MaxEntries, o: o}
	var errs []error
	for _, dc := range c.AllDomains() {
		d, err := compile(&dc, o.Policy)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		d.store = o.Store(d.route)
		s.domains[d.name] = d
		s.order = append(s.order, d)
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("rls: %w", errors.Join(errs...))
	}
	return s, nil
}

// match is one descriptor of a request and the limit it matched.
type match struct {
	index int // of the descriptor in the request
	limit *limit
	parts []string
	cost  int64
	req   ratelimit.Request
}

// ShouldRateLimit decides req: every descriptor that matches a limit is
// decided in one store call, all-or-nothing (a request is OVER_LIMIT when
// any non-shadow limit denies, and then no limit consumes). A domain the
// configuration does not define, and a descriptor that matches no limit,
// are OK without a limit, as envoyproxy/ratelimit answers. An empty
// domain, no descriptors, or more descriptors or entries than the caps
// allow are INVALID_ARGUMENT; a request whose context ends first gets the
// context's status.
func (s *Service) ShouldRateLimit(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	if err := s.check(req); err != nil {
		return nil, err
	}
	descs := req.GetDescriptors()
	resp := &rlsv3.RateLimitResponse{OverallCode: rlsv3.RateLimitResponse_OK, Statuses: make([]*rlsv3.RateLimitResponse_DescriptorStatus, len(descs))}
	for i := range resp.Statuses {
		resp.Statuses[i] = &rlsv3.RateLimitResponse_DescriptorStatus{Code: rlsv3.RateLimitResponse_OK}
	}
	dom := s.domains[req.GetDomain()]
	if dom == nil {
		if s.o.UnknownDomain != nil {
			s.o.UnknownDomain(ctx, req.GetDomain())
		}
		return resp, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, status.FromContextError(err).Err()
	}
	ms := s.resolve(ctx, dom, req, resp)
	if len(ms) == 0 {
		return resp, nil
	}
	return s.decide(ctx, dom, ms, resp)
}

// check refuses requests the service does not decide.
func (s *Service) check(req *rlsv3.RateLimitRequest) error {
	descs := req.GetDescriptors()
	switch {
	case req.GetDomain() == "":
		return status.Error(codes.InvalidArgument, "rate limit domain must not be empty")
	case len(descs) == 0:
		return status.Error(codes.InvalidArgument, "rate limit descriptor list must not be empty")
	case len(descs) > s.maxDescriptors:
		return status.Errorf(codes.InvalidArgument, "%d descriptors, more than the %d allowed (rls.max_descriptors)", len(descs), s.maxDescriptors)
	}
	for i, d := range descs {
		if n := len(d.GetEntries()); n == 0 || n > s.maxEntries {
			return status.Errorf(codes.InvalidArgument, "descriptor %d has %d entries; from 1 to %d are allowed (rls.max_entries)", i, n, s.maxEntries)
		}
	}
	return nil
}

// resolve matches each descriptor to its limit, applies replaces and
// unlimited, and returns the descriptors left to decide.
func (s *Service) resolve(ctx context.Context, dom *domain, req *rlsv3.RateLimitRequest, resp *rlsv3.RateLimitResponse) []match {
	var ms []match
	var replaced map[string]bool
	for i, d := range req.GetDescriptors() {
		l, parts := dom.match(d.GetEntries(), nil)
		if l == nil {
			continue
		}
		for _, r := range l.replaces {
			if replaced == nil {
				replaced = map[string]bool{}
			}
			replaced[r] = true
		}
		if l.unlimited {
			resp.Statuses[i].LimitRemaining = math.MaxUint32
			continue
		}
		ms = append(ms, match{index: i, limit: l, parts: parts, cost: cost(req, d)})
	}
	kept := ms[:0]
	for _, m := range ms {
		if m.limit.name != "" && replaced[m.limit.name] {
			continue
		}
		p := m.limit.policy
		if s.o.Override != nil && !m.limit.banned {
			if op := s.o.Override(ctx, dom.route, m.parts); op != nil && max(1, m.cost) <= op.Max() {
				p = op
			}
		}
		m.req = ratelimit.Request{Key: httplimit.StateKey(dom.route, m.limit.id, p.Name(), m.parts), Policy: p, Cost: m.cost, Shadow: m.limit.shadow}
		kept = append(kept, m)
	}
	return kept
}

// cost is a descriptor's hits: its own hits_addend when set (0 means only
// check), else the request's, where 0 means 1.
func cost(req *rlsv3.RateLimitRequest, d *commonv3.RateLimitDescriptor) int64 {
	if h := d.GetHitsAddend(); h != nil {
		return int64(min(h.GetValue(), math.MaxInt64))
	}
	return max(1, int64(req.GetHitsAddend()))
}

// decide asks the store and writes the answer into resp. The store's
// decisions are settled as the gateway settles its own
// ([httplimit.Evaluated]): the same headers, verdicts, outcome and
// shape-mode hold.
func (s *Service) decide(ctx context.Context, dom *domain, ms []match, resp *rlsv3.RateLimitResponse) (*rlsv3.RateLimitResponse, error) {
	reqs := make([]ratelimit.Request, len(ms))
	out := make([]ratelimit.Decision, len(ms))
	verdicts := make([]httplimit.Verdict, len(ms))
	var banned []bool
	peek := false
	for i := range ms {
		reqs[i] = ms[i].req
		verdicts[i] = httplimit.Verdict{LimitID: ms[i].limit.id, Key: ms[i].parts}
		if c := ms[i].cost; c == 0 || c > reqs[i].Policy.Max() {
			peek = true
		}
		if ms[i].limit.banned {
			if banned == nil {
				banned = make([]bool, len(ms))
			}
			banned[i], peek = true, true
		}
	}
	before := s.o.Clock.Now().Truncate(time.Microsecond)
	admitted, err := s.evaluate(ctx, dom.store, reqs, out, peek, banned)
	if err != nil && ctx.Err() != nil {
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	e := httplimit.Evaluated{Requests: reqs, Decisions: out, Verdicts: verdicts, Admitted: admitted, Err: err, At: before}
	ev := httplimit.Event{Route: dom.route}
	var res httplimit.Result
	e.Settle(ctx, nil, &res, &ev, func(ev *httplimit.Event) { s.emit(ctx, ev) })
	switch ev.Outcome {
	case httplimit.OutcomeStoreError:
		s.o.Logger.Debug("rls: store failed, denied", "domain", dom.name, "error", err)
		return storeDenied(resp, ms), nil
	case httplimit.OutcomeAbandoned:
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	for i := range ms {
		resp.Statuses[ms[i].index] = descriptorStatus(&ms[i], reqs[i].Policy, out[i], verdicts[i].Result)
	}
	resp.ResponseHeadersToAdd = headers(&res)
	if !admitted {
		resp.OverallCode = rlsv3.RateLimitResponse_OVER_LIMIT
	}
	return resp, nil
}

// evaluate decides reqs in one store call. With peek (some descriptor
// only checks, hits_addend 0, asks more than its policy can ever admit, or
// is banned) it first peeks at every limit: a check-only limit with
// nothing left, a cost above the policy's Max, or a banned limit
// (banned[i], requests_per_unit 0) asked for more than 0 denies the
// request without consuming; otherwise the counted limits are evaluated.
func (s *Service) evaluate(ctx context.Context, st ratelimit.Store, reqs []ratelimit.Request, out []ratelimit.Decision, peek bool, banned []bool) (bool, error) {
	if !peek {
		return st.Evaluate(ctx, reqs, out)
	}
	probe := make([]ratelimit.Request, len(reqs))
	for i, r := range reqs {
		probe[i] = r
		probe[i].Cost = min(max(1, r.Cost), r.Policy.Max())
	}
	if err := st.Peek(ctx, probe, out); err != nil {
		return false, err
	}
	denied := false
	var counted []int
	for i, r := range reqs {
		switch {
		case banned != nil && banned[i]:
			out[i] = bannedDecision(s.o.Clock.Now(), r)
			denied = denied || !r.Shadow
		case r.Cost > r.Policy.Max():
			out[i].Allowed, out[i].RetryAfter = false, r.Policy.Period()
			denied = denied || !r.Shadow
		case r.Cost == 0:
			denied = denied || !out[i].Allowed && !r.Shadow
		default:
			counted = append(counted, i)
		}
	}
	if denied || len(counted) == 0 {
		return !denied, nil
	}
	sub := make([]ratelimit.Request, len(counted))
	subOut := make([]ratelimit.Decision, len(counted))
	for j, i := range counted {
		sub[j] = reqs[i]
	}
	admitted, err := st.Evaluate(ctx, sub, subOut)
	if err != nil {
		return false, err
	}
	for j, i := range counted {
		out[i] = subOut[j]
	}
	return admitted, nil
}

// bannedDecision is the decision of a banned limit (requests_per_unit 0)
// at now: denied, a check (cost 0) too, as nothing is ever left, until the
// end of the policy's window, aligned to the Unix epoch as
// envoyproxy/ratelimit aligns it.
func bannedDecision(now time.Time, r ratelimit.Request) ratelimit.Decision {
	w := r.Policy.Period()
	left := w - time.Duration(now.UnixNano()%int64(w))
	return ratelimit.Decision{Reset: left, RetryAfter: left}
}

// storeDenied is the answer when the store could not decide and on_error
// denies (deny, or local with nothing local to decide): OVER_LIMIT for
// every limited descriptor, with Retry-After: 1 as the gateway's 503 has.
func storeDenied(resp *rlsv3.RateLimitResponse, ms []match) *rlsv3.RateLimitResponse {
	resp.OverallCode = rlsv3.RateLimitResponse_OVER_LIMIT
	for _, m := range ms {
		resp.Statuses[m.index].Code = rlsv3.RateLimitResponse_OVER_LIMIT
	}
	resp.ResponseHeadersToAdd = []*corev3.HeaderValue{{Key: "Retry-After", Value: "1"}}
	return resp
}

// descriptorStatus is one limited descriptor's status.
func descriptorStatus(m *match, p *ratelimit.Policy, d ratelimit.Decision, v ratelimit.Verdict) *rlsv3.RateLimitResponse_DescriptorStatus {
	ds := &rlsv3.RateLimitResponse_DescriptorStatus{Code: rlsv3.RateLimitResponse_OK}
	if v == ratelimit.Denied {
		ds.Code = rlsv3.RateLimitResponse_OVER_LIMIT
	}
	if d.Uncounted {
		// No store counted it (on_error allow): there is no budget to report.
		return ds
	}
	r := m.limit.current
	if p != m.limit.policy {
		r = reported(p) // an admin override is in force
	}
	ds.CurrentLimit = &rlsv3.RateLimitResponse_RateLimit{RequestsPerUnit: r.requestsPerUnit, Unit: unit(r.unitSeconds), Name: r.name}
	if r.multiplier > 1 {
		ds.CurrentLimit.UnitMultiplier = wrapperspb.UInt32(r.multiplier)
	}
	if v == ratelimit.Allowed {
		// A limit over its budget reports none left, as envoyproxy/ratelimit
		// does, even when a cost above the budget was refused whole.
		ds.LimitRemaining = uint32(min(max(0, d.Remaining), math.MaxUint32))
	}
	if v == ratelimit.ShadowDenied && m.limit.quota {
		// quota_mode: an over-limit status is reported without a reset.
		return ds
	}
	ds.DurationUntilReset = durationpb.New(d.Reset)
	return ds
}

// unit converts a unit in seconds to its enum.
func unit(secs int64) rlsv3.RateLimitResponse_RateLimit_Unit {
	switch secs {
	case 1:
		return rlsv3.RateLimitResponse_RateLimit_SECOND
	case 60:
		return rlsv3.RateLimitResponse_RateLimit_MINUTE
	case 3600:
		return rlsv3.RateLimitResponse_RateLimit_HOUR
	case 86400:
		return rlsv3.RateLimitResponse_RateLimit_DAY
	case 7 * 86400:
		return rlsv3.RateLimitResponse_RateLimit_WEEK
	case 30 * 86400:
		return rlsv3.RateLimitResponse_RateLimit_MONTH
	case 365 * 86400:
		return rlsv3.RateLimitResponse_RateLimit_YEAR
	}
	return rlsv3.RateLimitResponse_RateLimit_UNKNOWN
}

// headers returns the headers the gateway would send with res: the
// rate-limit headers and, on a denial, Retry-After.
func headers(res *httplimit.Result) []*corev3.HeaderValue {
	var hs []*corev3.HeaderValue
	if res.HasRateLimitHeaders() {
		hs = make([]*corev3.HeaderValue, 0, len(httplimit.RateLimitHeaderNames)+1)
		for i, name := range httplimit.RateLimitHeaderNames {
			hs = append(hs, &corev3.HeaderValue{Key: name, Value: string(res.RateLimitHeader(i))})
		}
	}
	if !res.Forward && res.RetryAfter > 0 {
		hs = append(hs, &corev3.HeaderValue{Key: "Retry-After", Value: strconv.FormatInt(res.RetryAfter, 10)})
	}
	return hs
}

func (s *Service) emit(ctx context.Context, ev *httplimit.Event) {
	if s.o.Observe != nil {
		s.o.Observe(ctx, ev)
	}
}
