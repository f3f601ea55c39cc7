package redistest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// waitUntil calls cond until it returns nil or ctx ends, sleeping a little
// longer after each failure. On timeout the error names what was awaited and
// quotes the last reason cond gave.
func waitUntil(ctx context.Context, what string, cond func(ctx context.Context) error) error {
	delay := 5 * time.Millisecond
	for {
		err := cond(ctx)
		if err == nil {
			return nil
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("redistest: wait for %s: %w (last: %v)", what, ctx.Err(), err)
		case <-t.C:
		}
		delay = min(2*delay, 100*time.Millisecond)
	}
}

// startAll starts n servers in parallel with start(i), and closes those
// that started if any failed.
func startAll(n int, start func(i int) (*Server, error)) ([]*Server, error) {
	servers := make([]*Server, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { servers[i], errs[i] = start(i) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		closeAll(servers)
		return nil, err
	}
	return servers, nil
}

// closeAll closes the non-nil servers in parallel and joins their errors.
func closeAll(servers []*Server) error {
	errs := make([]error, len(servers))
	var wg sync.WaitGroup
	for i, s := range servers {
		if s != nil {
			wg.Go(func() { errs[i] = s.Close() })
		}
	}
	wg.Wait()
	return errors.Join(errs...)
}

// addrs returns the TCP addresses of servers.
func addrs(servers []*Server) []string {
	a := make([]string, len(servers))
	for i, s := range servers {
		a[i] = s.Addr()
	}
	return a
}
