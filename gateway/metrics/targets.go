package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// The reasons a pool target is taken out of rotation, the reason label of
// sluice_upstream_target_ejections_total.
const (
	EjectPassive = "passive" // connection failures in a row (pool.passive)
	EjectActive  = "active"  // failed health-check probes (pool.health_check)
	EjectLatency = "latency" // its latency over shedding.latency_threshold
)

// TargetSeries is one pool target's children of the per-target counters,
// looked up once when the route is built. A nil *TargetSeries records
// nothing.
type TargetSeries struct {
	requests  prometheus.Counter
	ejections [3]prometheus.Counter // passive, active, latency
}

// Target returns the series of target (its URL, as the label shows it) of
// route's pool; nil on a nil Metrics.
func (m *Metrics) Target(route, target string) *TargetSeries {
	if m == nil {
		return nil
	}
	s := &TargetSeries{requests: m.targetRequests.WithLabelValues(route, target)}
	for i, reason := range []string{EjectPassive, EjectActive, EjectLatency} {
		s.ejections[i] = m.targetEjections.WithLabelValues(route, target, reason)
	}
	return s
}

// Request counts one request (or retry) sent to the target.
func (s *TargetSeries) Request() {
	if s != nil {
		s.requests.Inc()
	}
}

// Ejected counts the target taken out of rotation for reason (EjectPassive,
// EjectActive or EjectLatency).
func (s *TargetSeries) Ejected(reason string) {
	if s == nil {
		return
	}
	switch reason {
	case EjectPassive:
		s.ejections[0].Inc()
	case EjectActive:
		s.ejections[1].Inc()
	case EjectLatency:
		s.ejections[2].Inc()
	}
}

// TargetState is one pool target as sluice_upstream_target_up reports it:
// Up is called at each scrape.
type TargetState struct {
	Route, Target string
	Up            func() bool
}

// SetTargets replaces the targets sluice_upstream_target_up reports with
// list: those of the configuration built last (a reload's replaces the
// previous one's, and a target no longer configured is no longer
// reported).
func (m *Metrics) SetTargets(list []TargetState) {
	if m == nil {
		return
	}
	m.targetUp.set(list)
}

// targetUp is the collector of sluice_upstream_target_up, read from the
// pools at scrape time, so that a target back after its ejection shows up
// whether or not a request has seen it since.
type targetUp struct {
	desc *prometheus.Desc
	mu   sync.Mutex
	list []TargetState
}

func newTargetUp() *targetUp {
	return &targetUp{desc: prometheus.NewDesc("sluice_upstream_target_up",
		"1 while a pool target is in rotation (not ejected by passive or active health checks or for latency), 0 otherwise, by route and target.",
		[]string{"route", "target"}, nil)}
}

func (c *targetUp) set(list []TargetState) {
	c.mu.Lock()
	c.list = list
	c.mu.Unlock()
}

// Describe implements prometheus.Collector.
func (c *targetUp) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect implements prometheus.Collector.
func (c *targetUp) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	list := c.list
	c.mu.Unlock()
	for _, t := range list {
		v := 0.0
		if t.Up() {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, v, t.Route, t.Target)
	}
}
