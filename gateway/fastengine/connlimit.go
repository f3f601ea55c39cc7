package fastengine

import (
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-gw/sluice/gateway/metrics"
	"github.com/sluice-gw/sluice/httplimit"
)

// connLimit bounds the connections a listener holds open: at most max at
// once (server.max_conns), and at most perIP from one client address
// (server.max_conns_per_ip; IPv6 grouped by /64), 0 for no bound. It works
// on the listener, below the HTTP engine, so that any engine serving the
// listener shares it. A connection past a bound is answered at once, 503
// (or 429 past the per-address bound) in problem+json with Retry-After: 1,
// and closed; it never reaches the engine. It is safe for concurrent use.
type connLimit struct {
	slots   chan struct{} // one per open connection
	perIP   int
	log     *slog.Logger
	metrics *metrics.Metrics // counts refusals

	mu  sync.Mutex
	ips map[netip.Prefix]int // open connections per client address, when perIP > 0

	lastWarn atomic.Int64 // unix nanoseconds of the last refusal logged
}

// newConnLimit returns the bounds; maxConns below 1 means no bound.
func newConnLimit(maxConns, perIP int, log *slog.Logger, m *metrics.Metrics) *connLimit {
	l := &connLimit{perIP: perIP, log: log, metrics: m}
	if maxConns > 0 {
		l.slots = make(chan struct{}, maxConns)
	}
	if perIP > 0 {
		l.ips = make(map[netip.Prefix]int)
	}
	return l
}

// take claims room for c. It returns the function that gives the room
// back (call it once, when c is closed), or nil and the answer refusing c.
func (l *connLimit) take(c net.Conn) (release func(), status int, detail string) {
	if l.slots != nil {
		select {
		case l.slots <- struct{}{}:
		default:
			return nil, http.StatusServiceUnavailable, "The server has " + strconv.Itoa(cap(l.slots)) +
				" connections open, its bound (server.max_conns). Please retry later."
		}
	}
	free := func() {
		if l.slots != nil {
			<-l.slots
		}
	}
	if l.perIP <= 0 {
		return free, 0, ""
	}
	key, ok := clientPrefix(c.RemoteAddr())
	if !ok {
		return free, 0, ""
	}
	l.mu.Lock()
	n := l.ips[key]
	if n >= l.perIP {
		l.mu.Unlock()
		free()
		return nil, http.StatusTooManyRequests, "This address has " + strconv.Itoa(n) +
			" connections open, the bound per address (server.max_conns_per_ip). Please retry later."
	}
	l.ips[key] = n + 1
	l.mu.Unlock()
	return func() {
		l.mu.Lock()
		if l.ips[key] <= 1 {
			delete(l.ips, key)
		} else {
			l.ips[key]--
		}
		l.mu.Unlock()
		free()
	}, 0, ""
}

// clientPrefix returns the address a connection from addr counts against:
// the IPv4 address, or the IPv6 /64.
func clientPrefix(addr net.Addr) (netip.Prefix, bool) {
	ta, ok := addr.(*net.TCPAddr)
	if !ok {
		return netip.Prefix{}, false
	}
	ip, ok := netip.AddrFromSlice(ta.IP)
	if !ok {
		return netip.Prefix{}, false
	}
	ip = ip.Unmap()
	bits := 32
	if ip.Is6() {
		bits = 64
	}
	p, err := ip.Prefix(bits)
	return p, err == nil
}

// refuseWriteTimeout bounds writing the refusal; it fits any socket
// buffer, so the write does not wait in practice.
const refuseWriteTimeout = time.Second

// refuse answers c with status and detail in problem+json and closes it.
// It does not read the request: c's Close reads and drops what the client
// still sends for a moment (lingerConn), so that the client reads the
// answer rather than a reset.
func (l *connLimit) refuse(c net.Conn, status int, detail string) {
	bound := metrics.BoundMaxConns
	if status == http.StatusTooManyRequests {
		bound = metrics.BoundMaxConnsPerIP
	}
	l.metrics.ConnRefused(bound)
	now, last := time.Now().UnixNano(), l.lastWarn.Load()
	if now-last > int64(time.Minute) && l.lastWarn.CompareAndSwap(last, now) {
		l.log.Warn("refusing public connections over their bound", "status", status, "detail", detail)
	}
	body := httplimit.ProblemBody(status, detail)
	b := make([]byte, 0, 256+len(body))
	b = append(b, "HTTP/1.1 "...)
	b = strconv.AppendInt(b, int64(status), 10)
	b = append(b, ' ')
	b = append(b, http.StatusText(status)...)
	b = append(b, "\r\n"...)
	for _, kv := range httplimit.ProblemHeaders {
		b = append(b, kv[0]+": "+kv[1]+"\r\n"...)
	}
	b = append(b, "Retry-After: 1\r\nConnection: close\r\nContent-Length: "...)
	b = strconv.AppendInt(b, int64(len(body)), 10)
	b = append(b, "\r\n\r\n"...)
	b = append(b, body...)
	c.SetWriteDeadline(time.Now().Add(refuseWriteTimeout)) //nolint:errcheck // a failed write is the end of it
	c.Write(b)                                             //nolint:errcheck // the client may be gone
	c.Close()
}
