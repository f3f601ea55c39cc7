package fallback

import (
	"sync"
	"sync/atomic"
	"time"
)

// DefaultHold is how long [Store.Engaged] stays true after the last request
// decided without the primary, when Options.Hold is zero.
const DefaultHold = 10 * time.Second

// engagement tracks [Store.Engaged] and reports its changes to onChange. It
// is safe for concurrent use.
//
// The hot path costs a few atomic operations: a fallback decision moves the
// hold's end, and only a change of the reported value takes the lock. The
// end of the hold needs no request: a timer, armed while the value reads
// true, checks again when the hold may have ended (or every hold while the
// breaker stays open).
type engagement struct {
	hold     time.Duration
	open     func() bool // whether the breaker is open or half-open
	onChange func(bool)
	base     time.Time    // origin of since
	until    atomic.Int64 // since-ns before which the last fallback decision keeps it engaged
	reported atomic.Bool  // the value last given to onChange
	mu       sync.Mutex   // serialises reports and the timer
	timer    *time.Timer
}

func newEngagement(hold time.Duration, open func() bool, onChange func(bool)) *engagement {
	return &engagement{hold: hold, open: open, onChange: onChange, base: time.Now()}
}

// since returns the monotonic time since e.base in nanoseconds.
func (e *engagement) since() int64 { return int64(time.Since(e.base)) }

// engaged reports whether the breaker is open or half-open, or a request was
// decided without the primary within the hold.
func (e *engagement) engaged() bool {
	return e.open() || e.since() < e.until.Load()
}

// fellBack records a request decided without the primary now.
func (e *engagement) fellBack() {
	until := e.since() + int64(e.hold)
	for {
		old := e.until.Load()
		if old >= until || e.until.CompareAndSwap(old, until) {
			break
		}
	}
	if !e.reported.Load() {
		e.update()
	}
}

// check reports the breaker's opening; the breaker's closing, like the end
// of the hold, is seen by the timer.
func (e *engagement) check() {
	if !e.reported.Load() && e.open() {
		e.update()
	}
}

// update reports a change of engaged and, while it reads true, keeps the
// timer armed for the moment it may end.
func (e *engagement) update() {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := e.engaged()
	if now != e.reported.Load() {
		e.reported.Store(now)
		if e.onChange != nil {
			e.onChange(now)
		}
	}
	if !now {
		return
	}
	wait := e.hold
	if !e.open() {
		wait = max(time.Millisecond, time.Duration(e.until.Load()-e.since()))
	}
	if e.timer == nil {
		e.timer = time.AfterFunc(wait, e.update)
	} else {
		e.timer.Reset(wait)
	}
}
