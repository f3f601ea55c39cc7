package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-gw/sluice/internal/testkit"
)

// poolUpstream is one target of a pool that a test can kill (its listener
// and every open connection closed at once) and start again on its port.
// It counts the requests it received, those in flight and those it
// answered; a health probe (User-Agent sluice-health-check) is answered
// at once and counted apart. A kill also counts the requests any byte of
// which reached the upstream and that it did not answer (see kill).
type poolUpstream struct {
	t    *testing.T
	addr string // 127.0.0.1:port

	mu  sync.Mutex
	srv *http.Server
	ln  *net.TCPListener // the listener srv serves on
	// conns are the open connections; a connection is busy from the first
	// byte of a request read until its answer was written (and flushed).
	conns    map[*trackConn]bool
	down     bool
	received int // requests the handler was called for, probes aside
	inFlight int
	answered int
	probes   int
	// heldAtKill counts the requests the last kill found reached and
	// unanswered; late those it could not see then: some byte of them was
	// read from a connection after the kill looked at it, or they waited
	// on a connection accepted while the kill was under way.
	heldAtKill, late int
	// pending and pendingReached count the connections the last kill
	// found in the accept backlog, and those of them with a byte waiting;
	// acceptedLate the connections accepted while it was under way.
	pending, pendingReached, acceptedLate int
	// ids counts each X-Request-Seq received (probes aside); unread holds
	// those a kill found in a receive queue or saw read from a connection
	// it closed, which the handler may never see.
	ids    map[string]int
	unread map[string]bool
	// serving counts the Serve calls that have not returned.
	serving sync.WaitGroup
}

func newPoolUpstream(t *testing.T) *poolUpstream {
	if !canCountQueued {
		t.Skip("a pool upstream counts the bytes in its sockets' receive queues, which needs Linux")
	}
	u := &poolUpstream{t: t, conns: map[*trackConn]bool{}, ids: map[string]int{}, unread: map[string]bool{}}
	ln := testkit.Listen(t)
	u.addr = ln.Addr().String()
	u.serve(ln)
	t.Cleanup(func() {
		u.mu.Lock()
		srv := u.srv
		u.mu.Unlock()
		srv.Close()
		u.serving.Wait()
	})
	return u
}

func (u *poolUpstream) url() string { return "http://" + u.addr }

// serve serves on ln, a TCP listener.
func (u *poolUpstream) serve(ln net.Listener) {
	srv := &http.Server{
		Handler:           http.HandlerFunc(u.handle),
		ReadHeaderTimeout: 10 * time.Second,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return context.WithValue(ctx, trackConnKey{}, c.(*trackConn))
		},
	}
	tl := ln.(*net.TCPListener)
	u.mu.Lock()
	u.srv, u.ln, u.down = srv, tl, false
	u.mu.Unlock()
	u.serving.Add(1)
	go func() {
		defer u.serving.Done()
		err := srv.Serve(&trackListener{TCPListener: tl, u: u})
		if err != nil && !errors.Is(err, http.ErrServerClosed) && !errors.Is(err, net.ErrClosed) {
			u.t.Errorf("upstream %s: %v", u.addr, err)
		}
	}()
}

type trackConnKey struct{}

func (u *poolUpstream) handle(w http.ResponseWriter, r *http.Request) {
	c, _ := r.Context().Value(trackConnKey{}).(*trackConn)
	if r.Header.Get("User-Agent") == "sluice-health-check" {
		u.mu.Lock()
		u.probes++
		u.mu.Unlock()
		w.Header().Set("Content-Length", "2")
		io.WriteString(w, "ok")
		w.(http.Flusher).Flush()
		u.idle(c)
		return
	}
	u.mu.Lock()
	u.received++
	u.inFlight++
	u.ids[r.Header.Get("X-Request-Seq")]++
	u.mu.Unlock()
	time.Sleep(3 * time.Millisecond)
	body := "from " + u.addr
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	_, err := io.WriteString(w, body)
	w.(http.Flusher).Flush()
	u.mu.Lock()
	u.inFlight--
	if err == nil && !u.down {
		u.answered++
	}
	u.mu.Unlock()
	u.idle(c)
}

// idle marks c as between requests: its answer was written.
func (u *poolUpstream) idle(c *trackConn) {
	if c == nil {
		return
	}
	u.mu.Lock()
	if _, open := u.conns[c]; open {
		u.conns[c] = false
	}
	u.mu.Unlock()
}

// kill closes the listener and every open connection at once, and
// returns a count of the requests that had reached the upstream
// unanswered: a byte of them was in its kernel or read by it, and no
// answer written (the count grows until the reads under way at the close
// have returned). It counts, as closely as a process can:
//
//   - each connection waiting in the listener's accept backlog with a
//     byte in its receive queue (each is accepted and closed);
//   - each open connection that is busy (a request's first byte read, its
//     answer not yet written), or idle with a byte in its receive queue
//     (unread by the server);
//   - each connection from which the server reads a byte after the kill
//     looked at it (the read was under way), and each connection the
//     server accepted while the kill was under way that has a byte
//     waiting (see trackConn.Read and trackListener.Accept).
//
// Each connection is closed right after it was looked at, so a byte that
// arrives after the look and before the close (microseconds) is all that
// can reach the upstream uncounted; one that arrives after the close is
// refused by a reset. A request counts once per connection (sluice sends
// one at a time on each); a probe in flight counts as a request.
func (u *poolUpstream) kill() (held func() int) {
	u.mu.Lock()
	u.down = true
	u.heldAtKill, u.late, u.pending, u.pendingReached, u.acceptedLate = 0, 0, 0, 0, 0
	drain := func() {
		n, reached, err := drainPending(u.ln, u.noteUnread)
		if err != nil {
			u.t.Errorf("upstream %s: accepting the backlog at the kill: %v", u.addr, err)
		}
		u.pending += n
		u.pendingReached += reached
		u.heldAtKill += reached
	}
	drain()
	for c, busy := range u.conns {
		q, head, err := queuedBytes(c.Conn.(*net.TCPConn))
		busy = busy || err != nil || q > 0
		u.noteUnread(head)
		c.Conn.Close()
		c.gone, c.counted = true, busy
		delete(u.conns, c)
		if busy {
			u.heldAtKill++
		}
	}
	drain() // those that connected meanwhile
	u.ln.Close()
	srv := u.srv
	u.mu.Unlock()
	srv.Close() // the connections accepted meanwhile; returns at once
	return func() int {
		u.mu.Lock()
		defer u.mu.Unlock()
		return u.heldAtKill + u.late
	}
}

// noteUnread records in u.unread the X-Request-Seq values in head, bytes
// of a request found by a kill (see unread). The caller holds u.mu.
func (u *poolUpstream) noteUnread(head []byte) {
	for line := range strings.SplitSeq(string(head), "\r\n") {
		name, value, ok := strings.Cut(line, ":")
		if ok && strings.EqualFold(name, "X-Request-Seq") {
			u.unread[strings.TrimSpace(value)] = true
		}
	}
}

// reached returns how many times each X-Request-Seq reached the upstream:
// received by the handler, or found by a kill (see unread), which counts
// once with the handler's (the handler may have received the same bytes).
func (u *poolUpstream) reached() map[string]int {
	u.mu.Lock()
	defer u.mu.Unlock()
	m := map[string]int{}
	for id, n := range u.ids {
		m[id] = n
	}
	for id := range u.unread {
		m[id] = max(m[id], 1)
	}
	return m
}

// busyConns returns how many open connections are busy.
func (u *poolUpstream) busyConns() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	n := 0
	for _, busy := range u.conns {
		if busy {
			n++
		}
	}
	return n
}

// killCounts returns what the last kill found: the connections in the
// accept backlog and those of them with a byte waiting, the connections
// accepted while it was under way, the requests counted late, and the
// X-Request-Seq values found unread in receive queues.
func (u *poolUpstream) killCounts() (pending, pendingReached, acceptedLate, late, unread int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.pending, u.pendingReached, u.acceptedLate, u.late, len(u.unread)
}

// restart serves again on the upstream's port.
func (u *poolUpstream) restart() {
	deadline := time.Now().Add(10 * time.Second)
	for {
		ln, err := testkit.ListenAgain(u.t, u.addr)
		if err == nil {
			u.serve(ln)
			return
		}
		if time.Now().After(deadline) {
			u.t.Fatalf("upstream %s cannot listen again: %v", u.addr, err)
		}
		time.Sleep(50 * time.Millisecond) // the port is still held; bounded
	}
}

func (u *poolUpstream) counts() (received, inFlight, answered, probes int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.received, u.inFlight, u.answered, u.probes
}

// trackListener wraps the connections it accepts in trackConns. A
// connection it accepts once its listener was killed is closed at once
// (counted late when a byte of it waits), and it accepts again, which
// fails on the closed listener.
type trackListener struct {
	*net.TCPListener
	u *poolUpstream
}

func (l *trackListener) Accept() (net.Conn, error) {
	for {
		c, err := l.TCPListener.Accept()
		if err != nil {
			return nil, err
		}
		u := l.u
		u.mu.Lock()
		if !u.down && u.ln == l.TCPListener {
			tc := &trackConn{Conn: c, u: u}
			u.conns[tc] = false
			u.mu.Unlock()
			return tc, nil
		}
		u.acceptedLate++
		q, head, err := queuedBytes(c.(*net.TCPConn))
		if err != nil || q > 0 {
			u.late++
		}
		u.noteUnread(head)
		c.Close()
		u.mu.Unlock()
	}
}

// trackConn marks its connection busy when it reads a byte of a request.
// Once a kill closed it, a byte read (by a read under way at the close)
// counts its request late, unless the kill counted it.
type trackConn struct {
	net.Conn
	u *poolUpstream
	// gone: a kill closed the connection; counted: the kill, or a read
	// since, counted its request. Both guarded by u.mu.
	gone, counted bool
}

func (c *trackConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		u := c.u
		u.mu.Lock()
		if c.gone {
			u.noteUnread(p[:n])
			if !c.counted {
				c.counted = true
				u.late++
			}
		} else if busy, open := u.conns[c]; open && !busy {
			u.conns[c] = true
		}
		u.mu.Unlock()
	}
	return n, err
}

func (c *trackConn) Close() error {
	c.u.mu.Lock()
	delete(c.u.conns, c)
	c.u.mu.Unlock()
	return c.Conn.Close()
}

// poolLoad is a bounded load of GETs from a few clients.
type poolLoad struct {
	mu     sync.Mutex
	codes  map[int]int
	errs   []string
	seq    atomic.Int64
	stop   chan struct{}
	done   sync.WaitGroup
	client *http.Client
	url    string
}

func startPoolLoad(client *http.Client, url string, clients int) *poolLoad {
	l := &poolLoad{codes: map[int]int{}, stop: make(chan struct{}), client: client, url: url}
	for range clients {
		l.done.Add(1)
		go func() {
			defer l.done.Done()
			for {
				select {
				case <-l.stop:
					return
				default:
				}
				l.one()
			}
		}()
	}
	return l
}

func (l *poolLoad) one() {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, l.url, nil)
	if err != nil {
		panic(err)
	}
	req.Header.Set("X-Request-Seq", strconv.FormatInt(l.seq.Add(1), 10))
	resp, err := l.client.Do(req)
	if err == nil {
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		l.errs = append(l.errs, err.Error())
		return
	}
	l.codes[resp.StatusCode]++
}

// snapshot returns the answers by status and the transport errors so far.
func (l *poolLoad) snapshot() (codes map[int]int, errs []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	codes = map[int]int{}
	for k, v := range l.codes {
		codes[k] = v
	}
	return codes, append([]string(nil), l.errs...)
}

func (l *poolLoad) end() {
	close(l.stop)
	l.done.Wait()
}

// count5xx sums the 5xx answers.
func count5xx(codes map[int]int) int {
	n := 0
	for c, k := range codes {
		if c >= 500 {
			n += k
		}
	}
	return n
}

// waitFor polls cond every 20 ms until it holds or timeout passes.
func waitFor(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond) // polling another process, bounded
	}
	return true
}

// targetUp returns sluice_upstream_target_up of the target at url, "" when
// absent.
func targetUp(t *testing.T, p *proc, route, url string) string {
	t.Helper()
	return p.metric(fmt.Sprintf(`sluice_upstream_target_up{route=%q,target=%q}`, route, url))
}

// TestPoolKillTarget runs a bounded load of GETs through a round-robin
// pool of three upstreams and kills one partway (its listener and open
// connections closed at once): the clients see no 5xx beyond the requests
// that had reached the killed upstream unanswered (a byte of them in its
// kernel or read by it, as kill counts them), no request reaches the
// upstreams twice (one the killed upstream had is answered 502, not sent
// again; one no byte of which reached it is tried on another target), the
// other two keep answering, the target's sluice_upstream_target_up goes
// to 0, and once the upstream is started again on its port, its health
// check passes and it is back in rotation (receives requests, target_up
// 1). Over HTTP/1.1 (the fast engine) and h2c (the HTTP/2 engine).
func TestPoolKillTarget(t *testing.T) {
	for _, proto := range []string{"http1", "h2c"} {
		t.Run(proto, func(t *testing.T) { testPoolKillTarget(t, proto == "h2c") })
	}
}

func testPoolKillTarget(t *testing.T, h2c bool) {
	ups := []*poolUpstream{newPoolUpstream(t), newPoolUpstream(t), newPoolUpstream(t)}
	server := `server: {listen: "127.0.0.1:0"}`
	if h2c {
		server = `server: {listen: "127.0.0.1:0", http2: {h2c: true}}`
	}
	p := start(t, server+`
admin: {listen: "127.0.0.1:0"}
store: {type: memory}
routes:
  - id: pool
    match: {path: /**}
    timeout: 10s
    pool:
      targets: [`+ups[0].url()+`, `+ups[1].url()+`, `+ups[2].url()+`]
      balance: round_robin
      retries: 1
      passive: {failures: 2, eject_for: 1s}
      health_check: {path: /healthz, interval: 200ms, timeout: 100ms, healthy_threshold: 2, unhealthy_threshold: 1}
`)
	tr := &http.Transport{MaxIdleConnsPerHost: 16}
	if h2c {
		tr.Protocols = new(http.Protocols)
		tr.Protocols.SetUnencryptedHTTP2(true)
	}
	defer tr.CloseIdleConnections()
	cl := &http.Client{Transport: tr, Timeout: 30 * time.Second}

	for i, u := range ups {
		if v := targetUp(t, p, "pool", u.url()); v != "1" {
			t.Fatalf("target %d: sluice_upstream_target_up = %q before the load, want 1", i, v)
		}
	}
	load := startPoolLoad(cl, p.base+"/work", 8)
	stopped := false
	defer func() {
		if !stopped {
			load.end()
		}
	}()

	// Warm up: every target answers.
	warm := time.Now().Add(time.Second)
	if !waitFor(20*time.Second, func() bool {
		if time.Now().Before(warm) {
			return false
		}
		for _, u := range ups {
			if _, _, a, _ := u.counts(); a < 20 {
				return false
			}
		}
		return true
	}) {
		t.Fatal("the three upstreams did not each answer 20 requests within 20s")
	}
	codes, errs := load.snapshot()
	if count5xx(codes) != 0 || len(errs) != 0 {
		t.Fatalf("before the kill: answers %v, errors %q", codes, errs)
	}

	killed := ups[1]
	killedURL := killed.url()
	before5xx := count5xx(codes)
	held := killed.kill()
	killedAt := time.Now()

	// The killed target leaves rotation: sluice_upstream_target_up 0.
	if !waitFor(10*time.Second, func() bool { return targetUp(t, p, "pool", killedURL) == "0" }) {
		t.Fatalf("sluice_upstream_target_up of the killed target is %q 10s after the kill, want 0", targetUp(t, p, "pool", killedURL))
	}
	// The other two keep answering.
	var others [2]int
	for i, u := range []*poolUpstream{ups[0], ups[2]} {
		_, _, others[i], _ = u.counts()
	}
	if !waitFor(10*time.Second, func() bool {
		for i, u := range []*poolUpstream{ups[0], ups[2]} {
			if _, _, a, _ := u.counts(); a < others[i]+50 {
				return false
			}
		}
		return true
	}) {
		t.Fatal("the two live upstreams did not each answer 50 more requests within 10s of the kill")
	}
	// Let the load run a while with the target away (and probes failing).
	if d := time.Until(killedAt.Add(time.Second)); d > 0 {
		time.Sleep(d)
	}
	codes, errs = load.snapshot()
	heldAtKill := held()
	if got := count5xx(codes) - before5xx; got > heldAtKill {
		t.Errorf("%d answers 5xx after the kill (%v), more than the %d requests the killed upstream held at the kill", got, codes, heldAtKill)
	}
	if len(errs) != 0 {
		t.Errorf("the clients saw %d transport errors: %q", len(errs), errs[:min(len(errs), 5)])
	}
	pending, pendingReached, acceptedLate, late, unread := killed.killCounts()
	t.Logf("at the kill the upstream held %d requests (%d counted late, %d found unread by X-Request-Seq; backlog: %d connections, %d with a byte; %d accepted during the kill); 5xx since: %d; answers %v",
		heldAtKill, late, unread, pending, pendingReached, acceptedLate, count5xx(codes)-before5xx, codes)
	for line := range strings.SplitSeq(p.logs.String(), "\n") {
		if strings.Contains(line, "upstream request failed") {
			t.Logf("sluice: %s", line)
		}
	}

	// Started again on its port, it is back in rotation once its health
	// check passes (and its passive ejection, if any, ended).
	receivedBefore, _, _, _ := killed.counts()
	killed.restart()
	restartedAt := time.Now()
	if !waitFor(15*time.Second, func() bool {
		r, _, _, _ := killed.counts()
		return r >= receivedBefore+20
	}) {
		r, _, _, probes := killed.counts()
		t.Fatalf("the restarted upstream received %d requests (and %d probes) within 15s, want 20: not back in rotation", r-receivedBefore, probes)
	}
	t.Logf("back in rotation %v after the restart", time.Since(restartedAt).Round(time.Millisecond))
	if !waitFor(10*time.Second, func() bool { return targetUp(t, p, "pool", killedURL) == "1" }) {
		t.Fatalf("sluice_upstream_target_up of the restarted target is %q, want 1", targetUp(t, p, "pool", killedURL))
	}
	load.end()
	stopped = true

	codes, errs = load.snapshot()
	if got := count5xx(codes) - before5xx; got > heldAtKill {
		t.Errorf("%d answers 5xx in all (%v), more than the %d requests the killed upstream held at the kill", got, codes, heldAtKill)
	}
	if len(errs) != 0 {
		t.Errorf("the clients saw %d transport errors: %q", len(errs), errs[:min(len(errs), 5)])
	}
	total := 0
	for _, n := range codes {
		total += n
	}
	if codes[200] < total-heldAtKill {
		t.Errorf("answers %v: fewer than %d of %d are 200", codes, total-heldAtKill, total)
	}
	// No request reached the upstreams more than once, not even one the
	// killed upstream had (read, or found unread in a receive queue).
	seen := map[string]int{}
	for _, u := range ups {
		for id, n := range u.reached() {
			seen[id] += n
		}
	}
	var twice []string
	for id, n := range seen {
		if n > 1 {
			twice = append(twice, id+"×"+strconv.Itoa(n))
		}
	}
	if len(twice) > 0 {
		sort.Strings(twice)
		t.Errorf("%d requests reached the upstreams more than once (%s), want none (the killed upstream had %d)", len(twice), strings.Join(twice, " "), heldAtKill)
	}
}
