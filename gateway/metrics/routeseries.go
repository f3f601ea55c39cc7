package metrics

import (
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// routeSeries holds one route's children of the per-route collectors, each
// looked up in its vector once: the request path records through them
// without the vectors' label hashing and locks.
type routeSeries struct {
	// codes[c-100] counts requests answered c (100..599); other the rest.
	codes    [500]atomic.Pointer[prometheus.Counter]
	other    atomic.Pointer[prometheus.Counter]
	upstream prometheus.Observer
	// decisions maps a decisionLabels to its prometheus.Counter.
	decisions sync.Map
}

// decisionLabels are the labels of a decision besides the route.
type decisionLabels struct{ policy, result string }

// series returns route's children, creating them on first use.
func (m *Metrics) series(route string) *routeSeries {
	if s, ok := m.routes.Load(route); ok {
		return s.(*routeSeries)
	}
	s, _ := m.routes.LoadOrStore(route, &routeSeries{upstream: m.upstream.WithLabelValues(route)})
	return s.(*routeSeries)
}

// request returns the counter of requests on route answered code.
func (m *Metrics) request(route string, code int) prometheus.Counter {
	s := m.series(route)
	slot := &s.other
	label := "other"
	if code >= 100 && code <= 599 {
		slot = &s.codes[code-100]
		label = ""
	}
	if c := slot.Load(); c != nil {
		return *c
	}
	if label == "" {
		label = strconv.Itoa(code)
	}
	c := m.requests.WithLabelValues(route, label)
	slot.Store(&c)
	return c
}

// decision returns the counter of route's decisions of policy with result.
func (m *Metrics) decision(route, policy, result string) prometheus.Counter {
	s := m.series(route)
	k := decisionLabels{policy, result}
	if c, ok := s.decisions.Load(k); ok {
		return c.(prometheus.Counter)
	}
	c, _ := s.decisions.LoadOrStore(k, m.decisions.WithLabelValues(route, policy, result))
	return c.(prometheus.Counter)
}
