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
		for k, e := range sh.m {
			if now >= e.expiresAt {
				delete(sh.m, k)
				n++
			}
		}
		sh.shrink()
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
	s.expired.Add(n)
}

// shrink rebuilds the shard's map once it holds a quarter of its peak or
// less: a Go map never gives back the memory of deleted keys, so without this
// a burst of distinct keys would keep its memory after the keys are gone.
// sh must be locked.
func (sh *shard) shrink() {
	if sh.peak < 64 || len(sh.m) > sh.peak/4 {
		return
	}
	m := make(map[string]*entry, len(sh.m))
	for k, e := range sh.m {
		m[k] = e
	}
	sh.m, sh.peak = m, len(m)
}
