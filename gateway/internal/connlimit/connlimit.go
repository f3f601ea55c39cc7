// Package connlimit bounds the connections the public listeners hold open
// (server.max_conns, server.max_conns_per_ip). It works on the listener,
// below the HTTP engines, so that every engine serving a public listener
// shares one bound.
package connlimit

import (
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-gw/sluice/gateway/config"
	"github.com/sluice-gw/sluice/gateway/metrics"
	"github.com/sluice-gw/sluice/httplimit"
)

// Limit bounds the connections a listener holds open: at most max at
// once (server.max_conns), and at most perIP from one client address
// (server.max_conns_per_ip; IPv6 grouped by /64), 0 for no bound. It works
// on the listener, below the HTTP engine, so that any engine serving the
// listener shares it. A connection past a bound is answered at once, 503
// (or 429 past the per-address bound) in problem+json with Retry-After: 1,
// and closed; it never reaches the engine. It is safe for concurrent use.
type Limit struct {
	slots   chan struct{} // one per open connection
	perIP   int
	log     *slog.Logger
	metrics *metrics.Metrics // counts refusals

	mu  sync.Mutex
	ips map[netip.Prefix]int // open connections per client address, when perIP > 0

	lastWarn atomic.Int64 // unix nanoseconds of the last refusal logged
}

// New returns the bounds; maxConns below 1 means no bound.
func New(maxConns, perIP int, log *slog.Logger, m *metrics.Metrics) *Limit {
	l := &Limit{perIP: perIP, log: log, metrics: m}
	if maxConns > 0 {
		l.slots = make(chan struct{}, maxConns)
	}
	if perIP > 0 {
		l.ips = make(map[netip.Prefix]int)
	}
	return l
}

// Take claims room for c. It returns the function that gives the room
// back (call it once, when c is closed), or nil and the answer refusing c.
func (l *Limit) Take(c net.Conn) (release func(), status int, detail string) {
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

// Refuse answers c with status and detail in problem+json and closes it.
// It does not read the request: c's Close reads and drops what the client
// still sends for a moment (the engine's graceful close), so that the client reads the
// answer rather than a reset.
func (l *Limit) Refuse(c net.Conn, status int, detail string) {
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

// Drop counts the refusal of c with status, as Refuse does, and closes c
// without an answer: for a TLS listener, whose client cannot read one
// before its handshake.
func (l *Limit) Drop(c net.Conn, status int) {
	bound := metrics.BoundMaxConns
	if status == http.StatusTooManyRequests {
		bound = metrics.BoundMaxConnsPerIP
	}
	l.metrics.ConnRefused(bound)
	c.Close()
}

// ForServer returns the connection bounds of sc: server.max_conns (its
// default when unset) and server.max_conns_per_ip.
func ForServer(sc config.Server, log *slog.Logger, m *metrics.Metrics) *Limit {
	maxConns := sc.MaxConns
	if maxConns <= 0 {
		maxConns = config.DefaultMaxConns
	}
	return New(maxConns, sc.MaxConnsPerIP, log, m)
}

// Listen returns ln accepting connections within l's bounds that close
// gracefully (Conn). A connection past a bound is refused at once (Refuse;
// Drop when tls, whose client cannot read an answer before its
// handshake), and one accepted gives its room back once it is closed.
func Listen(ln net.Listener, l *Limit, tls bool) net.Listener {
	return listener{Listener: ln, limit: l, tls: tls}
}

type listener struct {
	net.Listener
	limit *Limit
	tls   bool
}

func (l listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		release, status, detail := l.limit.Take(c)
		if release == nil {
			if l.tls {
				l.limit.Drop(c, status)
			} else {
				go l.limit.Refuse(wrap(c, nil), status, detail)
			}
			continue
		}
		return wrap(c, release), nil
	}
}

// wrap returns c closing gracefully when it is TCP, calling done (if not
// nil) once it is closed.
func wrap(c net.Conn, done func()) net.Conn {
	if tc, ok := c.(*net.TCPConn); ok {
		return &Conn{TCPConn: tc, done: done}
	}
	if done == nil {
		return c
	}
	return &doneConn{Conn: c, done: done}
}

// doneConn calls done once it is closed.
type doneConn struct {
	net.Conn
	once sync.Once
	done func()
}

func (c *doneConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.done)
	return err
}

// lingerTime bounds how long a closed connection still reads what the
// client sends.
const lingerTime = 500 * time.Millisecond

// Conn is a public TCP connection that closes its write side first and
// reads (and drops) what the client still sends for a short while before it
// closes, as Go's server does: a client still writing a request the server
// answered early (a 431 to an oversize header block, say) then reads the
// answer instead of a connection reset.
//
// done, if not nil, is called once the connection is closed for good (after
// the linger), so that a connection bound counts lingering sockets too.
type Conn struct {
	*net.TCPConn
	once sync.Once
	done func()
}

// TCP returns the TCP connection under c.
func (c *Conn) TCP() *net.TCPConn { return c.TCPConn }

func (c *Conn) Close() error {
	c.once.Do(func() {
		if c.TCPConn.CloseWrite() != nil {
			c.closed()
			return
		}
		go func() {
			c.TCPConn.SetReadDeadline(time.Now().Add(lingerTime)) //nolint:errcheck // the read below ends either way
			io.Copy(io.Discard, io.LimitReader(c.TCPConn, 1<<20)) //nolint:errcheck // draining
			c.closed()
		}()
	})
	return nil
}

// closed closes the socket and calls done.
func (c *Conn) closed() {
	c.TCPConn.Close()
	if c.done != nil {
		c.done()
	}
}
