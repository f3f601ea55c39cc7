package main

import (
	"context"
	"math"
	"net/http"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"
)

// phase is what one attack measured.
type phase struct {
	requests   int           // responses and transport errors
	elapsed    time.Duration // from the attack's start to its last result
	ok, denied int           // 200s and 429s
	errors     int           // transport errors and any other status
	firstError string
	latencies  []time.Duration // of every result, sorted
}

// rps is the completed requests per second.
func (p phase) rps() float64 {
	if p.elapsed <= 0 {
		return 0
	}
	return float64(p.requests) / p.elapsed.Seconds()
}

// quantile returns the q-quantile of the latencies (nearest rank), 0 if none.
func (p phase) quantile(q float64) time.Duration {
	if len(p.latencies) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(p.latencies)))) - 1
	return p.latencies[max(0, min(i, len(p.latencies)-1))]
}

// targeter returns the requests of every cell: GET base/api/items from users
// u0 … u(users-1) in turn. With deny50, every other request is instead on
// the free plan from one of ten users whose budget is spent after their
// first request.
func targeter(base string, users int, deny50 bool) vegeta.Targeter {
	var n atomic.Uint64
	url := base + "/api/items"
	return func(t *vegeta.Target) error {
		i := n.Add(1)
		h := make(http.Header, 2)
		if deny50 && i%2 == 1 {
			h["X-Plan"] = []string{"free"}
			h["X-User-Id"] = []string{"f" + strconv.FormatUint(i/2%10, 10)}
		} else {
			h["X-User-Id"] = []string{"u" + strconv.FormatUint(i%uint64(users), 10)}
		}
		*t = vegeta.Target{Method: http.MethodGet, URL: url, Header: h}
		return nil
	}
}

// attack runs tr for du. rate 0 is a closed loop: workers goroutines, each
// sending its next request as soon as the previous one is answered, over
// at most workers keep-alive connections. rate > 0 sends that many requests
// per second whatever the latency (open loop), adding workers up to
// maxWorkers when responses are slow.
func attack(ctx context.Context, tr vegeta.Targeter, rate, workers int, du time.Duration) phase {
	opts := []func(*vegeta.Attacker){
		vegeta.KeepAlive(true),
		vegeta.Timeout(10 * time.Second),
		vegeta.Redirects(vegeta.NoFollow),
		vegeta.Connections(max(workers, 64)),
	}
	if rate == 0 {
		opts = append(opts, vegeta.Workers(uint64(workers)), vegeta.MaxWorkers(uint64(workers)), vegeta.MaxConnections(workers))
	} else {
		opts = append(opts, vegeta.Workers(uint64(workers)), vegeta.MaxWorkers(512))
	}
	a := vegeta.NewAttacker(opts...)
	stop := context.AfterFunc(ctx, func() { a.Stop() })
	defer stop()
	var p phase
	start := time.Now()
	var last time.Time
	for r := range a.Attack(tr, vegeta.Rate{Freq: rate, Per: time.Second}, du, "") {
		p.requests++
		p.latencies = append(p.latencies, r.Latency)
		if end := r.End(); end.After(last) {
			last = end
		}
		switch {
		case r.Error == "" && r.Code == http.StatusOK:
			p.ok++
		case r.Code == http.StatusTooManyRequests:
			p.denied++
		default:
			p.errors++
			if p.firstError == "" {
				p.firstError = r.Error
				if p.firstError == "" {
					p.firstError = "status " + strconv.Itoa(int(r.Code))
				}
			}
		}
	}
	p.elapsed = last.Sub(start)
	slices.Sort(p.latencies)
	return p
}
