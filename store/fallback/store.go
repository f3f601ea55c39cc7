package fallback

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sony/gobreaker/v2"

	"github.com/sluice-gw/sluice/ratelimit"
)

// Mode is what decides requests while the primary store is unavailable. The
// string values are those of the configuration's store.on_error.
type Mode string

// Modes (docs/semantics.md §6.3).
const (
	// Local decides with the Local store, using the same policies.
	Local Mode = "local"
	// Allow admits every request.
	Allow Mode = "allow"
	// Deny fails every request with an error wrapping ErrUnavailable.
	Deny Mode = "deny"
)

// Defaults applied by New to zero Options fields.
const (
	DefaultTimeout             = 50 * time.Millisecond
	DefaultOpenTimeout         = 500 * time.Millisecond
	DefaultConsecutiveFailures = 5
	DefaultMaxDebtKeys         = 1 << 16
	// MaxOpenTimeout bounds Options.OpenTimeout: the breaker probes again
	// after at most one second (docs/semantics.md §6.2).
	MaxOpenTimeout = time.Second
)

// ErrUnavailable is wrapped by the error Evaluate returns in Deny mode while
// the primary store is unavailable, and by Peek's when there is no Local
// store to fall back to. Test for it with errors.Is.
var ErrUnavailable = errors.New("store unavailable")

// Options configures a Store. Primary is required, and Local too in Local
// mode; every other zero field has a working default.
type Options struct {
	// Primary is the shared store decisions are made on while it works.
	Primary ratelimit.Store
	// Local is the in-process store used in Local mode. It must outlive the
	// outages: it holds this instance's recent consumption (see the package
	// documentation). Unused, and may be nil, in Allow and Deny modes.
	Local ratelimit.Store
	// Mode is what decides while the primary is unavailable; empty means Local.
	Mode Mode
	// Timeout bounds each call to the primary; zero means 50ms. The primary
	// must return once its context is done. A primary that bounds each of
	// its own calls (a method Timeout() time.Duration giving a positive
	// bound no longer than this one, as the Redis store has) is trusted to:
	// its Evaluate gets the caller's context as it is, which spares a timer
	// per decision.
	Timeout time.Duration
	// OpenTimeout is how long the breaker stays open before it lets one probe
	// through: 1ns..1s; zero means 500ms.
	OpenTimeout time.Duration
	// ConsecutiveFailures is the number of store failures in a row that opens
	// the breaker; zero means 5. A dead store is detected within that many
	// requests (each of which is still decided by the fallback), while the
	// isolated timeouts of a loaded machine only rarely line up five in a
	// row.
	ConsecutiveFailures int
	// Classify tells whether an error from the primary is a store failure
	// (decided by the fallback, counted by the breaker) and its kind for
	// OnStoreError. An error that is not a failure is returned to the caller
	// unchanged. Nil means every error is a failure, of kind "timeout" when
	// it wraps context.DeadlineExceeded and "other" otherwise. Classify is
	// never called for the caller's own cancellation.
	Classify func(err error) (kind string, failure bool)
	// Ping, if set, checks that the primary answers (for example the Redis
	// store's Ping). Ready uses it so that an instance taken out of rotation
	// still probes the store. Nil means Ready only reads the breaker.
	Ping func(ctx context.Context) error
	// Clock tells the time for the debts of the Local mode; it should be the
	// Local store's clock. Nil means the system clock.
	Clock ratelimit.Clock
	// MaxDebtKeys caps how many keys the fallback's admissions are remembered
	// for (see the package documentation); zero means 65536.
	MaxDebtKeys int

	// OnStoreError, if set, is called with ctx and the error's kind for each
	// store failure of the primary.
	OnStoreError func(ctx context.Context, kind string)
	// OnFallback, if set, is called with the request's ctx once for each
	// Evaluate decided without the primary, whatever the mode.
	OnFallback func(ctx context.Context, mode Mode)
	// OnRenewFailure, if set, is called with the primary's error for each
	// lease renewal (Renew) the primary fails, whatever the mode.
	OnRenewFailure func(err error)
	// OnStateChange, if set, is called with true when the breaker opens (the
	// fallback is in use) and with false when it closes again.
	OnStateChange func(active bool)
	// OnEngagedChange, if set, is called with true when [Store.Engaged]
	// becomes true and with false when it becomes false again (at most one
	// call per change, outside any lock of the Store's). It is what
	// sluice_fallback_active follows.
	OnEngagedChange func(engaged bool)
	// Hold is how long Engaged stays true after the last request decided
	// without the primary; zero means DefaultHold.
	Hold time.Duration

	// InProcess marks a primary that answers or fails at once, with no
	// remote call to bound or to stop making (the memory store, or a store
	// a test injects). Each call then goes straight to the primary: no
	// circuit breaker (Active is always false) and no Timeout; each failure
	// is decided by Mode all the same. In Local mode such a primary needs
	// no Local store, being local already: its failure is then returned as
	// an error wrapping [ErrUnavailable], and is not a fallback decision.
	InProcess bool
}

// Store is a [ratelimit.Store] that decides on Options.Primary and, while it
// fails, by Options.Mode. It is safe for concurrent use.
type Store struct {
	primary  ratelimit.Store
	local    ratelimit.Store // nil unless mode == Local
	mode     Mode
	timeout  time.Duration
	bounded  bool // the primary bounds its own calls within timeout
	classify func(error) (string, bool)
	ping     func(context.Context) error
	onError  func(context.Context, string)
	onFall   func(context.Context, Mode)
	onState  func(bool)
	// onRenewFail is Options.OnRenewFailure.
	onRenewFail func(error)
	inProcess   bool
	cb          *gobreaker.TwoStepCircuitBreaker[struct{}]
	debts       *debts // nil unless mode == Local
	eng         *engagement
	scratches   sync.Pool

	// brokeAt is when (monoNow) the last connection failure counted by the
	// breaker was seen; see outcome.
	brokeAt atomic.Int64

	active   atomic.Bool // breaker not closed; written under the breaker's lock
	reported atomic.Bool // last value given to onState
	notifyMu sync.Mutex
}

var _ ratelimit.Store = (*Store)(nil)

// selfBounded is a primary that bounds each of its calls by Timeout (see
// Options.Timeout).
type selfBounded interface{ Timeout() time.Duration }

// evaluateCtx returns the context for a primary Evaluate: ctx bounded by
// the Store's timeout, unless the primary bounds its calls itself.
func (s *Store) evaluateCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	if s.bounded {
		return ctx, noCancel
	}
	return context.WithTimeout(ctx, s.timeout)
}

func noCancel() {}

// errExcluded is handed to the breaker for outcomes that say nothing about
// the store's health: the caller's cancellation, an error Classify does not
// count.
var errExcluded = errors.New("not a store outcome")

// New validates opts and returns a Store, its breaker closed. Every problem
// with opts is reported, joined.
func New(opts Options) (*Store, error) {
	if opts.Mode == "" {
		opts.Mode = Local
	}
	if err := validate(opts); err != nil {
		return nil, err
	}
	s := &Store{
		primary:  opts.Primary,
		mode:     opts.Mode,
		timeout:  cmp.Or(opts.Timeout, DefaultTimeout),
		classify: opts.Classify,
		ping:     opts.Ping,
		onError:  opts.OnStoreError,
		onFall:   opts.OnFallback,
		onState:  opts.OnStateChange,

		onRenewFail: opts.OnRenewFailure,

		inProcess: opts.InProcess,
	}
	if s.classify == nil {
		s.classify = defaultClassify
	}
	if b, ok := opts.Primary.(selfBounded); ok {
		d := b.Timeout()
		s.bounded = d > 0 && d <= s.timeout
	}
	s.eng = newEngagement(cmp.Or(opts.Hold, DefaultHold), s.active.Load, opts.OnEngagedChange)
	if s.mode == Local && opts.Local != nil {
		s.local = opts.Local
		s.debts = newDebts(opts.Clock, cmp.Or(opts.MaxDebtKeys, DefaultMaxDebtKeys))
	}
	trip := uint32(cmp.Or(opts.ConsecutiveFailures, DefaultConsecutiveFailures))
	s.cb = gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreaker.Settings{
		Name:        "store",
		MaxRequests: 1, // one probe at a time in half-open, and one success closes
		Timeout:     cmp.Or(opts.OpenTimeout, DefaultOpenTimeout),
		ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= trip },
		IsExcluded:  func(err error) bool { return err == errExcluded },
		// Called with the breaker's lock held: record only; notify reports.
		OnStateChange: func(_ string, _, to gobreaker.State) { s.active.Store(to != gobreaker.StateClosed) },
	})
	return s, nil
}

// validate reports every problem with opts (Mode defaulted).
func validate(opts Options) error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("fallback store: "+format, args...))
	}
	if opts.Primary == nil {
		bad("a primary store is required")
	}
	switch opts.Mode {
	case Local:
		if opts.Local == nil && !opts.InProcess {
			bad("mode local needs a local store")
		}
	case Allow, Deny:
	default:
		bad("unknown mode %q (local, allow or deny)", opts.Mode)
	}
	if opts.Timeout < 0 {
		bad("timeout must not be negative, got %v", opts.Timeout)
	}
	if opts.OpenTimeout < 0 || opts.OpenTimeout > MaxOpenTimeout {
		bad("open timeout must be within 0..%v, got %v", MaxOpenTimeout, opts.OpenTimeout)
	}
	if opts.ConsecutiveFailures < 0 {
		bad("consecutive failures must not be negative, got %d", opts.ConsecutiveFailures)
	}
	if opts.Hold < 0 {
		bad("hold must not be negative, got %v", opts.Hold)
	}
	if opts.MaxDebtKeys < 0 {
		bad("max debt keys must not be negative, got %d", opts.MaxDebtKeys)
	}
	return errors.Join(errs...)
}

// defaultClassify counts every error as a store failure.
func defaultClassify(err error) (string, bool) {
	if errors.Is(err, context.DeadlineExceeded) {
		return "timeout", true
	}
	return "other", true
}

// Mode returns the store's fallback mode.
func (s *Store) Mode() Mode { return s.mode }

// Active reports whether the fallback is in use: the breaker is open or
// half-open, so requests (all of them, or all but the probe) are decided
// without the primary.
func (s *Store) Active() bool {
	// State moves an expired open breaker to half-open; both are active.
	s.cb.State()
	s.notify()
	return s.active.Load()
}

// Engaged reports whether requests are being decided without the primary:
// true while the breaker is open or half-open, and until Options.Hold has
// passed since the last request decided without the primary (by any mode,
// including the local-first denial of a key that owes what the fallback
// admitted, which never asks the primary); false otherwise. Unlike
// [Store.Active] it cannot read false while every decision is local, and
// the hold keeps a flapping breaker, or owing keys decided locally now and
// then, from turning it on and off: it reads as one stretch until a whole
// hold passes with every decision on the primary.
func (s *Store) Engaged() bool {
	s.cb.State()
	s.notify()
	return s.eng.engaged()
}

// fellBack counts a request decided without the primary, reporting it to
// OnFallback and to hook (the caller's, see [Store.Observed]) if not nil.
func (s *Store) fellBack(ctx context.Context, hook func(context.Context, Mode)) {
	s.eng.fellBack()
	if s.onFall != nil {
		s.onFall(ctx, s.mode)
	}
	if hook != nil {
		hook(ctx, s.mode)
	}
}

// Ready reports whether the instance should receive traffic (/readyz). In
// Allow mode, and in Local mode with a Local store, it is always true: the
// instance serves whether or not the store works. In Deny mode (and Local
// mode without a Local store) it is false while the store is unavailable.
// For an in-process primary that means Ping fails (true when Ping is nil);
// otherwise, with Options.Ping set, Ready pings the primary through the
// breaker (so it is false while the breaker is open, and an instance that
// receives no traffic still probes the store and recovers); without Ping, it
// is false while the breaker is not closed. In the other modes Ready also
// pings, if Ping is set and the breaker is not closed, only to speed up
// recovery.
func (s *Store) Ready(ctx context.Context) bool {
	if s.mode == Allow || s.local != nil {
		if s.ping != nil && s.Active() {
			s.probe(ctx)
		}
		return true
	}
	if s.ping == nil {
		return !s.Active()
	}
	return s.probe(ctx)
}

// probe pings the primary through the breaker and reports success.
func (s *Store) probe(ctx context.Context) bool {
	if s.inProcess {
		return s.ping(ctx) == nil
	}
	done, err := s.cb.Allow()
	s.notify()
	if err != nil {
		return false
	}
	pctx, cancel := context.WithTimeout(ctx, s.timeout)
	start := monoNow()
	err = s.ping(pctx)
	cancel()
	fail, pass := s.outcome(ctx, done, err, start)
	return !fail && pass == nil
}

// outcome classifies err from a primary call that started at start
// (monoNow), tells the breaker and fires OnStoreError. It returns fail true
// for a store failure (the request goes to the fallback), and pass non-nil
// for an error to hand back to the caller unchanged: the caller's own
// cancellation (as ctx.Err()) or an error Classify does not count. Both are
// zero on success.
//
// A broken connection fails every call in flight on it at once: a
// "connection" failure of a call that started before the last one the
// breaker counted is the same event, and is not counted again (it still
// falls back and is reported to OnStoreError). So one connection reset
// (CLIENT KILL, a proxy's RST) counts as one failure however many calls it
// took down, while a store that stays unreachable fails the calls made
// after it too, and so opens the breaker. Timeouts and server
// errors are counted one by one.
func (s *Store) outcome(ctx context.Context, done func(error), err error, start int64) (fail bool, pass error) {
	defer s.notify()
	switch {
	case err == nil:
		done(nil)
		return false, nil
	case ctx.Err() != nil:
		done(errExcluded)
		return false, ctx.Err()
	}
	kind, failure := s.classify(err)
	if !failure {
		done(errExcluded)
		return false, err
	}
	switch {
	case kind != "connection":
		done(err)
	case s.countBreak(start):
		done(err)
	default:
		done(errExcluded) // in flight when a counted failure broke its connection
	}
	if s.onError != nil {
		s.onError(ctx, kind)
	}
	return true, nil
}

// countBreak reports whether a connection failure of a call started at
// start counts: it does unless a counted failure came after the call
// started (the calls in flight on one broken connection count once). Of
// calls failing together, exactly one counts: the one whose swap of
// brokeAt succeeds first; the others then see it.
func (s *Store) countBreak(start int64) bool {
	for {
		b := s.brokeAt.Load()
		if start < b {
			return false
		}
		if s.brokeAt.CompareAndSwap(b, monoNow()) {
			return true
		}
	}
}

// monoEpoch is the origin of monoNow.
var monoEpoch = time.Now()

// monoNow is a monotonic time in nanoseconds, above zero.
func monoNow() int64 { return int64(time.Since(monoEpoch)) + 1 }

// notify reports a change of Active to OnStateChange, outside the
// breaker's lock.
func (s *Store) notify() {
	s.eng.check()
	if s.onState == nil || s.reported.Load() == s.active.Load() {
		return
	}
	s.notifyMu.Lock()
	defer s.notifyMu.Unlock()
	if a := s.active.Load(); s.reported.Load() != a {
		s.reported.Store(a)
		s.onState(a)
	}
}
