package fallback

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/sluice-gw/sluice/ratelimit"
)

// brokenConn is a primary whose calls block until drop, then all fail with
// errRefused, like the calls in flight on a connection that breaks; calls
// made after drop fail at once.
type brokenConn struct {
	ratelimit.Store
	entered chan struct{} // receives once per blocked call
	drop    chan struct{}
}

func (b *brokenConn) Evaluate(ctx context.Context, reqs []ratelimit.Request, out []ratelimit.Decision) (bool, error) {
	select {
	case <-b.drop:
		return false, errRefused
	default:
	}
	b.entered <- struct{}{}
	<-b.drop
	return false, errRefused
}

// classifyConn reports errRefused as a "connection" failure.
func classifyConn(err error) (string, bool) {
	if errors.Is(err, errRefused) {
		return "connection", true
	}
	return defaultClassify(err)
}

// TestBreakerConnectionBurst: the calls in flight when a connection breaks
// fail together; they count as one failure, not enough to open the breaker
// (docs/reliability.md row B9: a CLIENT KILL is not an outage). Each of them is still
// decided by the fallback and reported. Calls made after the break count
// one by one, so a store that stays unreachable opens the breaker as
// before.
func TestBreakerConnectionBurst(t *testing.T) {
	const inFlight = 3 * DefaultConsecutiveFailures
	b := &brokenConn{entered: make(chan struct{}), drop: make(chan struct{})}
	e := newEnv(t, func(o *Options) {
		b.Store = o.Primary
		o.Primary = b
		o.Classify = classifyConn
	})
	var wg sync.WaitGroup
	for i := range inFlight {
		wg.Go(func() {
			if _, ok := e.allow(fmt.Sprint("k", i), bucket); !ok {
				t.Errorf("call %d denied, want a local admission", i)
			}
		})
	}
	for range inFlight {
		<-b.entered
	}
	close(b.drop)
	wg.Wait()
	errs, falls, _ := e.hooks.snapshot()
	if errs["connection"] != inFlight || falls[Local] != inFlight {
		t.Errorf("store errors %v, fallbacks %v; want %d each (every call failed and fell back)", errs, falls, inFlight)
	}
	if e.s.Active() {
		t.Fatalf("breaker open after %d calls failed together on one broken connection, want closed", inFlight)
	}
	// The burst counted once: DefaultConsecutiveFailures-1 more failures open it.
	for i := range DefaultConsecutiveFailures - 1 {
		if e.s.Active() {
			t.Fatalf("breaker open after the burst and %d later failures, want closed until %d", i, DefaultConsecutiveFailures-1)
		}
		e.allow(fmt.Sprint("later", i), bucket)
	}
	if !e.s.Active() {
		t.Errorf("breaker closed after the burst and %d later failures, want open", DefaultConsecutiveFailures-1)
	}
}
