package faultload

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Options configures one run of a scenario. The zero value of every field
// but Binary has a default.
type Options struct {
	// Binary is the sluice executable; required.
	Binary string
	// Rate is the offered load in requests per second; zero means 500
	// (the rate of docs/reliability.md for a 2-core machine).
	Rate int
	// Before, Fault and After are the phases: clean load, the fault, and
	// load after the fault ends. Zero means 5s, 10s and 10s.
	Before, Fault, After time.Duration
	// Timeout is store.timeout; zero means 20ms (docs/reliability.md).
	Timeout time.Duration
	// Relaxed marks a run on a shared box (the short CI version). Every
	// check gives one of two verdicts: a failure (Report.Fail) is a
	// correctness problem (a 5xx, over-admission, a re-sent script, a write
	// to a stale master, a wrong on_error answer, a leak, a failed event, a
	// fallback that never engaged or never ended, a misclassified error)
	// and fails every run; a miss (Report.Miss) is a figure that CPU
	// contention alone can move (how soon decisions came back on Redis, the
	// share of decisions made locally, breaker openings with Redis healthy,
	// fallback decisions per reset or kill, calls reaching a hung Redis).
	// A miss fails a strict run; in a relaxed one it is printed in the
	// report, marked as not failed, and the run passes. Where a gross bound
	// still shows a defect on a loaded box, a relaxed run fails on it: A6
	// ≤ 2 breaker openings and < 5% of background decisions without Redis
	// (plan: ≤ 1 per minute, < 0.1%), a breaker stuck open or every call
	// timing out; B2 ≤ a quarter of the limited requests reaching the hung
	// Redis (plan: one probe per open interval), a breaker that does not
	// open; C4's running gateway ≥ 50% on Redis (plan: ≥ 99%), Redis
	// taken away; D5 < 75% off Redis with one shard of three down (plan:
	// ≤ 40%), the cluster down as a whole.
	Relaxed bool
	// Logf, if set, receives progress lines.
	Logf func(format string, args ...any)
}

func (o Options) withDefaults() Options {
	o.Rate = cmp.Or(o.Rate, 500)
	o.Before = cmp.Or(o.Before, 5*time.Second)
	o.Fault = cmp.Or(o.Fault, 10*time.Second)
	o.After = cmp.Or(o.After, 10*time.Second)
	o.Timeout = cmp.Or(o.Timeout, 20*time.Millisecond)
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	return o
}

// Scenario is one row of docs/reliability.md.
type Scenario struct {
	// ID is the docs/reliability.md row ("B1"), Title what it does.
	ID, Title string
	// OnError is store.on_error; empty means local.
	OnError string
	// Hung selects the latency target of a hung Redis: p99 ≤ timeout +
	// baseline p99 + 5 ms instead of min(25 ms, baseline + 15 ms).
	Hung bool
	// StateLoss allows a second burst on the accounting key: the fault
	// loses Redis' state (restart without persistence, failover).
	StateLoss bool
	// BackFromFault measures "back on Redis" from the fault's start (a
	// failover) instead of from its end.
	BackFromFault bool
	// BackWithin is the pass figure for back on Redis; zero means 2s.
	BackWithin time.Duration
	// MaxFallbackShare, if positive, bounds the share of limited requests
	// decided without Redis over the whole run (e.g. 0.01 for B9).
	MaxFallbackShare float64
	// RedisDownAtStart: the gateway starts while Redis is down, so the
	// warm-up does not wait for Redis decisions.
	RedisDownAtStart bool
	// Steps, if above 1, makes the fault phase Steps × Options.Fault long:
	// the scenario goes through Steps settings of Options.Fault each (B4's
	// three latencies, B5's resets then blackhole), or needs a longer
	// measurement in both versions (A6: 18 s short, 60 s long).
	Steps int
	// MinRate, if higher, is the offered load instead of Options.Rate (A6
	// measures spurious fallbacks at R0 = 500 req/s, also in the short
	// version).
	MinRate int
	// MinFault, if longer, is the fault phase's length instead of
	// Options.Fault (C2: the sentinels demote the old master seconds after
	// the switch, and that must happen under load).
	MinFault time.Duration
	// BgKeys is the number of distinct keys the background route spreads
	// its requests over; zero means 1,000 (D1: 10^4).
	BgKeys int
	// Setup starts the Redis side, names it with Env.Redis and schedules the
	// fault with Env.Inject and Env.Recover.
	Setup func(ctx context.Context, e *Env) error
}

// Env is what a Scenario's Setup configures.
type Env struct {
	Options
	redis    string
	events   []*Event
	cleanups []func()
	checks   []func(r *Report)
	dir      string
	gw       *Gateway
	config   string // the gateway's sluice.yaml, set before the load starts
	// upstreamPort is the port of the run's upstream, set before the load starts.
	upstreamPort int
}

// Event is a scheduled action and when it ran.
type Event struct {
	At         time.Duration // scheduled offset from the load's start
	Name       string
	Kind       string // "fault" (starts the fault phase), "recover" (ends it) or ""
	Do         func(ctx context.Context) error
	Start, End time.Duration // actual offsets
	Err        error
}

// Redis sets the store's redis section, e.g. `{addrs: ["127.0.0.1:7000"]}`.
func (e *Env) Redis(section string) { e.redis = section }

// Dir returns a temporary directory of the run.
func (e *Env) Dir() string { return e.dir }

// Cleanup registers fn to run after the run, last registered first.
func (e *Env) Cleanup(fn func()) { e.cleanups = append(e.cleanups, fn) }

// Check registers fn to examine (and amend) the report after the run.
func (e *Env) Check(fn func(r *Report)) { e.checks = append(e.checks, fn) }

// GatewayPID returns the gateway's process id; zero before it started
// (during Setup). Events run after it started.
func (e *Env) GatewayPID() int {
	if e.gw == nil {
		return 0
	}
	return e.gw.PID()
}

// Inject schedules do at offset at; the first one starts the fault phase.
// The returned Event holds, after the run, when it actually ran.
func (e *Env) Inject(at time.Duration, name string, do func(ctx context.Context) error) *Event {
	return e.add(&Event{At: at, Name: name, Kind: "fault", Do: do})
}

// Recover schedules do at offset at; the fault phase ends when it returns.
func (e *Env) Recover(at time.Duration, name string, do func(ctx context.Context) error) *Event {
	return e.add(&Event{At: at, Name: name, Kind: "recover", Do: do})
}

// Event schedules do at offset at, with no effect on the phases.
func (e *Env) Event(at time.Duration, name string, do func(ctx context.Context) error) *Event {
	return e.add(&Event{At: at, Name: name, Do: do})
}

func (e *Env) add(ev *Event) *Event {
	e.events = append(e.events, ev)
	return ev
}

// Run runs sc with opts: it sets the scenario up, starts an upstream and
// the gateway, offers the load, runs the events and computes the report.
// An error means the run itself could not be done; the scenario's verdict
// is in the report.
func Run(ctx context.Context, sc Scenario, opts Options) (*Report, error) {
	opts = opts.withDefaults()
	if sc.Steps > 1 {
		opts.Fault *= time.Duration(sc.Steps)
	}
	opts.Fault = max(opts.Fault, sc.MinFault)
	opts.Rate = max(opts.Rate, sc.MinRate)
	if opts.Binary == "" {
		return nil, errors.New("faultload: Options.Binary is required")
	}
	dir, err := os.MkdirTemp("", "faultload-")
	if err != nil {
		return nil, err
	}
	e := &Env{Options: opts, dir: dir}
	defer func() {
		for _, fn := range slices.Backward(e.cleanups) {
			fn()
		}
		os.RemoveAll(dir)
	}()
	if err := sc.Setup(ctx, e); err != nil {
		return nil, fmt.Errorf("faultload: %s setup: %w", sc.ID, err)
	}
	up, err := startUpstream()
	if err != nil {
		return nil, err
	}
	defer up.Close()
	l := max(1, opts.Rate/5)
	e.config = gatewayConfig(sc, e, up.URL, l)
	e.upstreamPort = up.port
	gw, err := StartGateway(opts.Binary, dir, e.config)
	if err != nil {
		return nil, err
	}
	e.gw = gw
	defer func() {
		if err := gw.Close(); err != nil {
			opts.Logf("%s: %v", sc.ID, err)
		}
	}()
	c := newClient()
	defer c.CloseIdleConnections()
	if err := warmUp(ctx, c, gw, !sc.RedisDownAtStart); err != nil {
		return nil, fmt.Errorf("faultload: %s warm-up: %w\n%s", sc.ID, err, gw.Logs())
	}
	opts.Logf("%s: load %d req/s for %v, fault at %v for %v", sc.ID, opts.Rate, opts.Before+opts.Fault+opts.After, opts.Before, opts.Fault)
	res := drive(ctx, c, gw, e.events, opts, cmp.Or(sc.BgKeys, 1000))
	r := analyze(sc, opts, l, res)
	r.GatewayPID = gw.PID()
	r.Note("breaker openings over the run (gateway log): %d", openings(gw.Logs(), res.start, -time.Hour, res.total+time.Hour))
	for _, fn := range e.checks {
		fn(r)
	}
	return r, nil
}

// gatewayConfig is the run's sluice.yaml.
func gatewayConfig(sc Scenario, e *Env, upstream string, l int) string {
	onError := cmp.Or(sc.OnError, "local")
	return fmt.Sprintf(`server:
  listen: "127.0.0.1:0"
  shutdown_timeout: 5s
admin:
  listen: "127.0.0.1:0"
store: {type: redis, prefix: fault, timeout: %v, on_error: %s, redis: %s}
policies:
  acct: {algorithm: token_bucket, capacity: %d, rate: %d}
  bg: {algorithm: gcra, rate: 100, burst: 100}
routes:
  - id: acct
    match: {path: /acct}
    upstream: %s
    limits: [{policy: acct, key: header:X-Key}]
  - id: bg
    match: {path: /bg}
    upstream: %s
    limits: [{policy: bg, key: header:X-Key}]
  - id: free
    match: {path: /free}
    upstream: %s
`, e.Timeout, onError, e.redis, l, l, upstream, upstream, upstream)
}

// upstream is the run's backend: it answers 200 at once.
type upstream struct {
	srv  *http.Server
	URL  string
	port int
}

func startUpstream() (*upstream, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	u := &upstream{URL: "http://" + ln.Addr().String(), port: ln.Addr().(*net.TCPAddr).Port, srv: &http.Server{
		Handler:           http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok\n")) }),
		ReadHeaderTimeout: 5 * time.Second,
	}}
	go u.srv.Serve(ln)
	return u, nil
}

func (u *upstream) Close() error { return u.srv.Close() }

func newClient() *http.Client {
	return &http.Client{
		Timeout: 10 * time.Second,
		Transport: &http.Transport{
			DialContext:         (&net.Dialer{Timeout: 2 * time.Second}).DialContext,
			MaxIdleConnsPerHost: 1024,
			MaxIdleConns:        1024,
			IdleConnTimeout:     30 * time.Second,
		},
	}
}

// warmUp sends background requests until 20 in a row were decided on
// Redis (no fallback decision counted), or, with redisUp false, until 5
// were answered 200. It gives up after 10 s.
func warmUp(ctx context.Context, c *http.Client, gw *Gateway, redisUp bool) error {
	deadline := time.Now().Add(10 * time.Second)
	clean := 0
	var last error
	for i := 0; time.Now().Before(deadline); i++ {
		m0, err := gw.Scrape(ctx, c)
		if err != nil {
			return err
		}
		code, _, err := send(ctx, c, gw.Base+"/bg", fmt.Sprintf("warm-%d", i))
		if err != nil || code != 200 {
			last = fmt.Errorf("warm-up request: %d %v", code, err)
			clean = 0
			continue
		}
		m1, err := gw.Scrape(ctx, c)
		if err != nil {
			return err
		}
		if !redisUp || m1.Sum("sluice_fallback_decisions_total") == m0.Sum("sluice_fallback_decisions_total") {
			clean++
		} else {
			clean = 0
		}
		if (redisUp && clean >= 20) || (!redisUp && clean >= 5) {
			return nil
		}
		if clean == 0 {
			time.Sleep(50 * time.Millisecond) // let the breaker's open interval pass
		}
	}
	return fmt.Errorf("not decided on Redis within 10s (last: %v)", last)
}

// send makes one request with X-Key: key and reports the status and
// whether Retry-After was "1".
func send(ctx context.Context, c *http.Client, url, key string) (int, bool, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		return 0, false, err
	}
	req.Header.Set("X-Key", key)
	resp, err := c.Do(req)
	if err != nil {
		return 0, false, err
	}
	var buf [512]byte
	for {
		if _, err := resp.Body.Read(buf[:]); err != nil {
			break
		}
	}
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("Retry-After") == "1", nil
}

// Routes of the load, by request index.
const (
	routeAcct = iota
	routeBg
	routeFree
)

// routeOf spreads requests: 40% accounting key, 10% free, 50% background.
func routeOf(i int) int {
	switch {
	case i%5 == 0 || i%5 == 3:
		return routeAcct
	case i%10 == 9:
		return routeFree
	}
	return routeBg
}

// record is one request's outcome.
type record struct {
	at, lat time.Duration
	code    int
	route   int
	retry1  bool
	err     error // the transport error when code is 0
}

// snapshot is one /metrics scrape during the load.
type snapshot struct {
	at time.Duration
	m  Metrics
}

// result is what drive collected.
type result struct {
	recs   []record
	snaps  []snapshot
	events []*Event
	total  time.Duration
	lagged int       // requests the pacer sent more than 10 ms late
	start  time.Time // when the load started (offset 0)
}

// drive offers the load, runs the events and scrapes /metrics every 100 ms.
// The background route's requests cycle over bgKeys keys. The load lasts
// Before+Fault+After, and longer when the events overrun their plan (a
// restart or a cluster's recovery slowed by a busy machine): it goes on
// until After has passed since the last event ended, up to Fault+After
// more, so that the after phase is never cut short.
func drive(ctx context.Context, c *http.Client, gw *Gateway, events []*Event, o Options, bgKeys int) *result {
	total := o.Before + o.Fault + o.After
	n := int(int64(total) * int64(o.Rate) / int64(time.Second))
	maxN := n + int(int64(o.Fault+o.After)*int64(o.Rate)/int64(time.Second))
	interval := time.Second / time.Duration(o.Rate)
	res := &result{recs: make([]record, maxN), events: events, total: total}
	start := time.Now()
	res.start = start
	done := make(chan struct{})
	var eventsEnd atomic.Int64 // offset of the last event's end, once every event ran
	var bg sync.WaitGroup
	bg.Go(func() {
		slices.SortStableFunc(events, func(a, b *Event) int { return cmp.Compare(a.At, b.At) })
		for _, ev := range events {
			select {
			case <-time.After(time.Until(start.Add(ev.At))):
			case <-done:
				return
			}
			ev.Start = time.Since(start)
			ev.Err = ev.Do(ctx)
			ev.End = time.Since(start)
			o.Logf("  t=%.2fs..%.2fs %s (err %v)", ev.Start.Seconds(), ev.End.Seconds(), ev.Name, ev.Err)
		}
		eventsEnd.Store(int64(max(time.Since(start), 1)))
	})
	bg.Go(func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			at := time.Since(start)
			if m, err := gw.Scrape(ctx, c); err == nil {
				res.snaps = append(res.snaps, snapshot{at, m})
			}
			select {
			case <-tick.C:
			case <-done:
				if m, err := gw.Scrape(ctx, c); err == nil {
					res.snaps = append(res.snaps, snapshot{time.Since(start), m})
				}
				return
			}
		}
	})
	sem := make(chan struct{}, 4096)
	var reqs sync.WaitGroup
	sent := 0
	for i := range maxN {
		if i >= n {
			end := time.Duration(eventsEnd.Load())
			if end > 0 && time.Duration(i)*interval >= end+o.After {
				break
			}
		}
		sent = i + 1
		due := start.Add(time.Duration(i) * interval)
		if d := time.Until(due); d > 0 {
			time.Sleep(d)
		} else if d < -10*time.Millisecond {
			res.lagged++
		}
		sem <- struct{}{}
		reqs.Go(func() {
			defer func() { <-sem }()
			route := routeOf(i)
			path, key := "/acct", "acct"
			switch route {
			case routeBg:
				// 7919 is a prime that divides no key count in use, so no
				// background key repeats within bgKeys requests.
				path, key = "/bg", fmt.Sprintf("bg-%d", (i*7919)%bgKeys)
			case routeFree:
				path, key = "/free", "free"
			}
			t0 := time.Now()
			code, retry1, err := send(ctx, c, gw.Base+path, key)
			if err != nil {
				code = 0
			}
			res.recs[i] = record{at: t0.Sub(start), lat: time.Since(t0), code: code, route: route, retry1: retry1, err: err}
		})
	}
	reqs.Wait()
	close(done)
	bg.Wait()
	res.recs = res.recs[:sent]
	res.total = max(total, time.Duration(sent)*interval)
	if sent > n {
		o.Logf("  the events ran past their plan: load extended to %.2fs", res.total.Seconds())
	}
	return res
}
