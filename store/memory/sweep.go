package memory

import "time"

// sweepEvery removes expired keys every interval until Close.
func (s *Store) sweepEvery(interval time.Duration) {
	defer close(s.done)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			s.sweep()
		}
	}
}

// sweep removes every key and overflow budget past its expiry, locking one
// shard at a time so that requests wait at most for one shard's scan.
func (s *Store) sweep() {
	var n uint64
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		now := s.nowMicros()
		n += uint64(sh.t.removeExpired(now))
		sh.t.shrink()
		sh.mu.Unlock()
	}
	s.overflow.mu.Lock()
	now := s.nowMicros()
	for k, e := range s.overflow.m {
		if now >= e.expiresAt {
			delete(s.overflow.m, k)
		}
	}
	s.overflow.mu.Unlock()
	s.sweepLeases()
	s.expired.Add(n)
}
