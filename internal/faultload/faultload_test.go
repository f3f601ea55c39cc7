package faultload

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sluice-gw/sluice/internal/testdiff"
)

func TestParseMetricsAndSum(t *testing.T) {
	m, err := parseMetrics(strings.NewReader(`# HELP x
# TYPE sluice_requests_total counter
sluice_requests_total{code="200",route="acct"} 7
sluice_requests_total{code="429",route="acct"} 3
sluice_requests_total{code="200",route="bg"} 5
sluice_fallback_active 1
go_goroutines 42
`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"sluice_requests_total", nil, 15},
		{"sluice_requests_total", []string{`route="acct"`}, 10},
		{"sluice_requests_total", []string{`route="acct"`, `code="429"`}, 3},
		{"sluice_fallback_active", nil, 1},
		{"go_goroutines", nil, 42},
		{"missing", nil, 0},
	} {
		if got := m.Sum(tt.name, tt.labels...); got != tt.want {
			t.Errorf("Sum(%s, %v) = %v, want %v", tt.name, tt.labels, got, tt.want)
		}
	}
}

// snaps builds scrapes every 100 ms from per-interval (fallback, limited)
// increments.
func snaps(steps [][2]float64) []snapshot {
	var out []snapshot
	var fb, n float64
	for i := 0; i <= len(steps); i++ {
		out = append(out, snapshot{at: time.Duration(i) * 100 * time.Millisecond, m: Metrics{
			`sluice_fallback_decisions_total{mode="local",route="bg"}`:   fb,
			`sluice_requests_total{code="200",route="bg"}`:               n,
			`sluice_fallback_decisions_total{mode="local",route="acct"}`: 1000 * fb, // ignored
		}})
		if i < len(steps) {
			fb += steps[i][0]
			n += steps[i][1]
		}
	}
	return out
}

func TestBackOnRedis(t *testing.T) {
	for _, tt := range []struct {
		name  string
		steps [][2]float64
		ref   time.Duration
		want  time.Duration
	}{
		{"clean from the start", [][2]float64{{0, 50}, {0, 50}, {0, 50}}, 0, 0},
		{"fallback until 300ms", [][2]float64{{50, 50}, {50, 50}, {50, 50}, {0, 50}, {0, 50}}, 0, 300 * time.Millisecond},
		{"measured from ref", [][2]float64{{50, 50}, {50, 50}, {0, 50}, {0, 50}}, 100 * time.Millisecond, 100 * time.Millisecond},
		{"one stray fallback in 1% is back", [][2]float64{{50, 50}, {0, 100}, {1, 100}, {0, 100}}, 0, 100 * time.Millisecond},
		{"a relapse within 1s counts", [][2]float64{{50, 50}, {0, 50}, {50, 50}, {0, 50}}, 0, 300 * time.Millisecond},
		{"a relapse after 1s does not", [][2]float64{{50, 50}, {0, 50}, {0, 50}, {0, 50}, {0, 50}, {0, 50}, {0, 50},
			{0, 50}, {0, 50}, {0, 50}, {0, 50}, {0, 50}, {50, 50}, {0, 50}}, 0, 100 * time.Millisecond},
		{"never", [][2]float64{{50, 50}, {50, 50}}, 0, -1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := backOnRedis(snaps(tt.steps), tt.ref); got != tt.want {
				t.Errorf("backOnRedis = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestPhase(t *testing.T) {
	var lats []time.Duration
	for i := 1; i <= 100; i++ {
		lats = append(lats, time.Duration(i)*time.Millisecond)
	}
	got := phase("x", lats)
	want := Phase{Name: "x", Requests: 100, P50: 50 * time.Millisecond, P99: 99 * time.Millisecond, Max: 100 * time.Millisecond}
	if diff := testdiff.Diff(want, got); diff != "" {
		t.Errorf("phase (-want +got):\n%s", diff)
	}
}

// echoServer answers each line with "+OK\r\n", like a tiny RESP server.
func echoServer(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				sc := bufio.NewScanner(c)
				for sc.Scan() {
					if sc.Text() == "END" { // ScanLines drops the \r
						io.WriteString(c, "+OK\r\n")
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

func TestProxyCountsScriptsAcrossReads(t *testing.T) {
	p, err := NewProxy(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sha := strings.Repeat("a", 40)
	cmd := "*4\r\n$7\r\nEVALSHA\r\n$40\r\n" + sha + "\r\n$1\r\n0\r\n"
	eval := "*3\r\n$4\r\nEVAL\r\n$6\r\nreturn\r\n$1\r\n0\r\n"
	stream := strings.Repeat(cmd, 3) + eval + cmd + "END\r\n"
	// Write byte by byte so every token is split across reads.
	r := bufio.NewReader(c)
	for i := range len(stream) {
		if _, err := c.Write([]byte{stream[i]}); err != nil {
			t.Fatal(err)
		}
	}
	if line, err := r.ReadString('\n'); err != nil || line != "+OK\r\n" {
		t.Fatalf("reply %q, %v", line, err)
	}
	want := map[string]int64{sha: 4, "EVAL": 1}
	if diff := testdiff.Diff(want, p.ScriptsBySHA()); diff != "" {
		t.Errorf("ScriptsBySHA (-want +got):\n%s", diff)
	}
	if got := p.Scripts(); got != 5 {
		t.Errorf("Scripts = %d, want 5", got)
	}
}

func TestProxyDelaysReplies(t *testing.T) {
	p, err := NewProxy(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	roundTrip := func() time.Duration {
		t0 := time.Now()
		io.WriteString(c, "END\r\n")
		if _, err := r.ReadString('\n'); err != nil {
			t.Fatal(err)
		}
		return time.Since(t0)
	}
	roundTrip()
	p.SetReplyDelay(200 * time.Millisecond)
	// A lower bound only: the reply cannot come before the delay.
	if d := roundTrip(); d < 200*time.Millisecond {
		t.Errorf("round trip with a 200ms reply delay took %v", d)
	}
	p.SetReplyDelay(0)
	p.ResetAll()
	if _, err := r.ReadString('\n'); err == nil {
		t.Error("connection still open after ResetAll")
	}
}

func TestProxyBlackholeHoldsTraffic(t *testing.T) {
	p, err := NewProxy(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	io.WriteString(c, "END\r\n")
	if _, err := r.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	p.SetBlackhole(true)
	io.WriteString(c, "END\r\n")
	// A lower bound only: nothing may come back while blackholed.
	c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if line, err := r.ReadString('\n'); err == nil {
		t.Fatalf("reply %q through a blackhole", line)
	}
	c.SetReadDeadline(time.Time{})
	p.SetBlackhole(false)
	if line, err := r.ReadString('\n'); err != nil || line != "+OK\r\n" {
		t.Fatalf("held reply after the blackhole: %q, %v", line, err)
	}
}

func TestProxyJitterKeepsOrder(t *testing.T) {
	p, err := NewProxy(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	p.SetReplyDelay(2 * time.Millisecond)
	p.SetReplyJitter(2 * time.Millisecond)
	for range 100 {
		if d := p.chunkDelay(); d < 0 || d > 4*time.Millisecond {
			t.Fatalf("chunk delay %v outside 2ms ± 2ms", d)
		}
	}
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	for range 20 {
		io.WriteString(c, "END\r\n")
	}
	for i := range 20 {
		if line, err := r.ReadString('\n'); err != nil || line != "+OK\r\n" {
			t.Fatalf("reply %d: %q, %v", i, line, err)
		}
	}
}

func TestFDCount(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	pid := os.Getpid()
	total0, to0, on0, err := fdCount(pid, port, port)
	if err != nil {
		t.Skip(err) // no /proc
	}
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	total1, to1, on1, err := fdCount(pid, port, port)
	if err != nil {
		t.Fatal(err)
	}
	// The dialed socket's remote port is port; the accepted one's local:
	// both are HTTP sockets, only the dialed one goes to port.
	// (The total also moves with other descriptors of the test process.)
	if to1 != to0+1 || on1 != on0+2 || total1 < 2 {
		t.Errorf("fdCount after one connection: total %d→%d, to port %d→%d, on port %d→%d; want to +1, on +2",
			total0, total1, to0, to1, on0, on1)
	}
}

// gatewayLog returns gateway log lines (the text handler's format) for
// messages at offsets from start.
func gatewayLog(start time.Time, lines map[time.Duration]string) string {
	var b strings.Builder
	for at, msg := range lines {
		fmt.Fprintf(&b, "time=%s level=INFO msg=%q\n", start.Add(at).Format("2006-01-02T15:04:05.000Z07:00"), msg)
	}
	return b.String()
}

const (
	openedMsg = "redis store unavailable: deciding with the on_error fallback until it answers"
	closedMsg = "redis store answers again: decisions are back on Redis"
)

func TestOpenings(t *testing.T) {
	start := time.Date(2026, 11, 26, 13, 0, 0, 0, time.FixedZone("", 3600))
	logs := gatewayLog(start, map[time.Duration]string{
		100 * time.Millisecond:  openedMsg,
		700 * time.Millisecond:  closedMsg,
		2 * time.Second:         openedMsg,
		2600 * time.Millisecond: closedMsg,
		5 * time.Second:         openedMsg, // within 10 s of the last local decision: the gauge would not rise
		5 * time.Second / 2:     "sluice listening",
	})
	for _, tt := range []struct {
		from, to time.Duration
		want     int
	}{
		{0, 10 * time.Second, 3},
		{100 * time.Millisecond, 10 * time.Second, 2}, // from is exclusive
		{0, 2 * time.Second, 2},                       // to is inclusive
		{time.Second, 4 * time.Second, 1},
		{6 * time.Second, 10 * time.Second, 0},
	} {
		if got := openings(logs, start, tt.from, tt.to); got != tt.want {
			t.Errorf("openings(%v, %v) = %d, want %d", tt.from, tt.to, got, tt.want)
		}
	}
}

// a6Report is a report of an A6 run at 500 req/s whose measured window
// (2 s to 20 s) had fallbackPct percent of the background decisions made
// without Redis, and whose log shows opens breaker openings in it.
func a6Report(relaxed bool, fallbackPct float64, opens int) (*Report, string) {
	start := time.Now()
	const bg = 4500.0 // background requests in the window
	r := &Report{ID: "A6", Rate: 500, Relaxed: relaxed, FaultStart: 2 * time.Second, FaultEnd: 20 * time.Second,
		res: &result{start: start, snaps: []snapshot{
			{at: 2 * time.Second, m: Metrics{`sluice_requests_total{route="bg"}`: 0, `sluice_fallback_decisions_total{route="bg"}`: 0}},
			{at: 20 * time.Second, m: Metrics{`sluice_requests_total{route="bg"}`: bg, `sluice_fallback_decisions_total{route="bg"}`: bg * fallbackPct / 100}},
		}}}
	lines := map[time.Duration]string{}
	for i := range opens {
		lines[3*time.Second+time.Duration(i)*time.Second] = openedMsg
	}
	return r, gatewayLog(start, lines)
}

// TestVerdicts: a figure CPU contention can move (A6's plan bounds) is a
// miss, which fails a strict run and is reported, not failed, in a relaxed
// one; A6's gross bounds fail a relaxed run too.
func TestVerdicts(t *testing.T) {
	for _, tt := range []struct {
		name          string
		relaxed       bool
		pct           float64
		opens         int
		pass          bool
		fails, misses int
	}{
		{"clean strict", false, 0, 0, true, 0, 0},
		{"clean relaxed", true, 0, 0, true, 0, 0},
		{"plan missed, strict", false, 1, 2, false, 0, 2},
		{"plan missed, relaxed", true, 1, 2, true, 0, 2},
		{"breaker stuck open, relaxed", true, 30, 1, false, 1, 1},
		{"breaker flapping, relaxed", true, 1, 5, false, 1, 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r, logs := a6Report(tt.relaxed, tt.pct, tt.opens)
			checkSpurious(r, logs)
			if r.Passed() != tt.pass || len(r.Failures) != tt.fails || len(r.Misses) != tt.misses {
				t.Errorf("Passed() = %v, failures %q, misses %q; want %v, %d failures, %d misses",
					r.Passed(), r.Failures, r.Misses, tt.pass, tt.fails, tt.misses)
			}
			var b strings.Builder
			r.Print(&b)
			out := b.String()
			for _, m := range r.Misses {
				if !strings.Contains(out, m) {
					t.Errorf("report does not show the miss %q:\n%s", m, out)
				}
			}
			marked := strings.Contains(out, "MISS (load-sensitive, relaxed: not failed): ")
			if len(r.Misses) > 0 && marked != tt.relaxed {
				t.Errorf("misses marked as not failed: %v, want %v:\n%s", marked, tt.relaxed, out)
			}
			if verdict := strings.Contains(out, ": FAIL"); verdict == tt.pass {
				t.Errorf("printed verdict FAIL %v, want %v:\n%s", verdict, !tt.pass, out)
			}
		})
	}
}
