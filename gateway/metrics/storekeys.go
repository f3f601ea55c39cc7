package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// storeKeys is the sluice_store_keys gauge: at each scrape it asks the
// in-process store of each name (memory, fallback) how many keys it tracks.
// Gateways that replace each other on reload share it (New reuses it), and
// each watches the store it opened until it closes that store; the store
// opened last of a name is the one reported.
type storeKeys struct {
	desc *prometheus.Desc
	mu   sync.Mutex
	src  map[string][]*keysSource // by store name, oldest first
}

type keysSource struct{ keys func() int }

func newStoreKeys() *storeKeys {
	return &storeKeys{
		desc: prometheus.NewDesc("sluice_store_keys",
			"Keys tracked by an in-process store (memory, or the Redis store's local fallback); store.memory.max_keys caps it.",
			[]string{"store"}, nil),
		src: make(map[string][]*keysSource),
	}
}

func (c *storeKeys) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *storeKeys) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	srcs := make(map[string]*keysSource, len(c.src))
	for name, list := range c.src {
		srcs[name] = list[len(list)-1]
	}
	c.mu.Unlock()
	for name, s := range srcs { // outside the lock: keys may lock the store's shards
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(s.keys()), name)
	}
}

// watch adds keys as the latest source of store name and returns the
// function that removes it again.
func (c *storeKeys) watch(name string, keys func() int) (stop func()) {
	s := &keysSource{keys: keys}
	c.mu.Lock()
	c.src[name] = append(c.src[name], s)
	c.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			c.mu.Lock()
			defer c.mu.Unlock()
			list := c.src[name]
			for i, o := range list {
				if o == s {
					list = append(list[:i:i], list[i+1:]...)
					break
				}
			}
			if len(list) == 0 {
				delete(c.src, name)
			} else {
				c.src[name] = list
			}
		})
	}
}

// WatchStoreKeys reports keys(), read at each scrape, as
// sluice_store_keys{store=name}, and creates
// sluice_store_key_overflow_total{store=name} at zero. Name is "memory" or
// "fallback". While several sources of one name are watched (a reload builds
// the new store before the old one closes), the one added last is reported.
// keys is called without any lock of Metrics held and must be safe for
// concurrent use. The returned function stops reporting keys; it may be
// called more than once. On a nil Metrics it does nothing.
func (m *Metrics) WatchStoreKeys(name string, keys func() int) (stop func()) {
	if m == nil {
		return func() {}
	}
	m.keyOverflow.WithLabelValues(name)
	return m.storeKeys.watch(name, keys)
}

// StoreKeyOverflow counts n limits decided against a shared overflow budget
// by the in-process store name because their key found it full
// (store.memory.max_keys).
func (m *Metrics) StoreKeyOverflow(name string, n int) {
	if m == nil {
		return
	}
	m.keyOverflow.WithLabelValues(name).Add(float64(n))
}
