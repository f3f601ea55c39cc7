package admin

import (
	"cmp"
	"slices"
	"sync"
	"time"
)

// topKeys finds the most limited keys of the last few minutes in bounded
// memory: one space-saving summary (Metwally et al., 2005) per minute in a
// ring. Each summary tracks at most `capacity` keys; a new key evicts the one
// with the smallest count and inherits that count as its possible
// overestimate, so every key counted more than total/capacity times in a
// minute is in the summary, and no count is ever too low. The key value
// itself stays in memory only (the dashboard behind the admin token shows
// it); it never becomes a metric label. It is safe for concurrent use.
type topKeys struct {
	mu       sync.Mutex
	capacity int
	span     time.Duration // of one summary
	ring     []summary
}

// summary is one span's space-saving counters.
type summary struct {
	start   int64 // span index (unix time / span); -1 unused
	entries []topEntry
	index   map[string]int // id -> position in entries
}

type topEntry struct {
	id    string // overrideField(route, parts)
	count uint64
	err   uint64 // overestimate bound inherited on eviction
}

// TopKey is one of the most limited keys.
type TopKey struct {
	Route  string   `json:"route"`
	Key    []string `json:"key"`
	Denied uint64   `json:"denied"`
	// Error is how much Denied may overstate the true count.
	Error uint64 `json:"error,omitempty"`
}

func newTopKeys(capacity int, span time.Duration, spans int) *topKeys {
	t := &topKeys{capacity: capacity, span: span, ring: make([]summary, spans)}
	for i := range t.ring {
		t.ring[i].start = -1
	}
	return t
}

// add counts one denial of parts on route at now.
func (t *topKeys) add(now time.Time, route string, parts []string) {
	idx := now.UnixNano() / int64(t.span)
	var buf [128]byte
	idb := AppendField(buf[:0], route, parts)
	t.mu.Lock()
	defer t.mu.Unlock()
	s := &t.ring[idx%int64(len(t.ring))]
	if s.start != idx {
		s.start, s.entries = idx, s.entries[:0]
		clear(s.index)
		if s.index == nil {
			s.index = make(map[string]int, t.capacity)
		}
	}
	if i, ok := s.index[string(idb)]; ok {
		s.entries[i].count++
		return
	}
	id := string(idb)
	if len(s.entries) < t.capacity {
		s.index[id] = len(s.entries)
		s.entries = append(s.entries, topEntry{id: id, count: 1})
		return
	}
	m := 0
	for i := range s.entries {
		if s.entries[i].count < s.entries[m].count {
			m = i
		}
	}
	old := s.entries[m]
	delete(s.index, old.id)
	s.index[id] = m
	s.entries[m] = topEntry{id: id, count: old.count + 1, err: old.count}
}

// top returns the n keys with most denials over the spans that end at now,
// most first.
func (t *topKeys) top(now time.Time, n int) []TopKey {
	idx := now.UnixNano() / int64(t.span)
	sum := map[string]*topEntry{}
	t.mu.Lock()
	for i := range t.ring {
		s := &t.ring[i]
		if s.start < 0 || s.start <= idx-int64(len(t.ring)) || s.start > idx {
			continue
		}
		for _, e := range s.entries {
			a := sum[e.id]
			if a == nil {
				a = &topEntry{id: e.id}
				sum[e.id] = a
			}
			a.count += e.count
			a.err += e.err
		}
	}
	t.mu.Unlock()
	all := make([]*topEntry, 0, len(sum))
	for _, e := range sum {
		all = append(all, e)
	}
	slices.SortFunc(all, func(a, b *topEntry) int {
		if c := cmp.Compare(b.count, a.count); c != 0 {
			return c
		}
		return cmp.Compare(a.id, b.id)
	})
	out := make([]TopKey, 0, min(n, len(all)))
	for _, e := range all[:min(n, len(all))] {
		route, parts, _ := ParseField(e.id)
		out = append(out, TopKey{Route: route, Key: parts, Denied: e.count, Error: e.err})
	}
	return out
}
